#include "exporter/pg/connection.h"

#include <poll.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>

namespace pglock {
namespace {

void IgnoreNotice(void*, const char*) {}

// `text` quoted by libpq's PQescapeIdentifier or PQescapeLiteral; "" without a connection.
std::string Quote(PGconn* conn, const std::string& text,
                  char* (*escape)(PGconn*, const char*, size_t)) {
  if (conn == nullptr) return "";
  char* q = escape(conn, text.c_str(), text.size());
  if (q == nullptr) return "";
  std::string out(q);
  PQfreemem(q);
  return out;
}

std::string TrimMessage(const char* msg) {
  // libpq's messages span lines: the error, DETAIL/HINT, and for SQL errors a "LINE n:" excerpt
  // with a caret under it. Keep the meaningful lines, joined, so a log entry stays one line.
  std::string out;
  std::string_view rest = msg != nullptr ? msg : "";
  bool skip_caret = false;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    const bool excerpt = line.rfind("LINE ", 0) == 0;
    if (excerpt || (skip_caret && line.find_first_not_of(' ') != std::string_view::npos &&
                    line[line.find_first_not_of(' ')] == '^')) {
      skip_caret = excerpt;
      continue;
    }
    skip_caret = false;
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    if (line.empty()) continue;
    if (!out.empty()) out += ' ';
    for (char c : line) out += c == '\t' ? ' ' : c;
  }
  return out.empty() ? "unknown libpq error" : out;
}

int RemainingMs(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, INT32_MAX));
}

}  // namespace

// Double and Int read the text with one libpq call: a NULL's text is empty, which parses as no
// number, like any text that is not one (a value in text format holds no NUL byte); out of range,
// libpq gives a null pointer.
std::string_view PgResult::RawText(int row, int col) const {
  const char* v = PQgetvalue(result_.get(), row, col);
  return v != nullptr ? std::string_view(v) : std::string_view();
}

std::optional<double> PgResult::Double(int row, int col) const {
  const std::string_view t = RawText(row, col);
  if (t.empty()) return std::nullopt;  // NULL: most waitstarts
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> PgResult::Int(int row, int col) const {
  const char* p = PQgetvalue(result_.get(), row, col);
  if (p == nullptr) return std::nullopt;
  // Up to 18 digits cannot overflow: parsed in place (pids, oids and keys of every lock row).
  const char* digits = *p == '-' ? p + 1 : p;
  int64_t n = 0;
  const char* q = digits;
  for (; *q >= '0' && *q <= '9' && q - digits < 18; ++q) n = n * 10 + (*q - '0');
  if (*q == '\0' && q != digits) return *p == '-' ? -n : n;
  const std::string_view t(p);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

Status PgConnection::Connect(const std::string& conninfo,
                             const std::vector<std::pair<std::string, std::string>>& overrides,
                             SteadyClock::time_point deadline, std::unique_ptr<PgConnection>* out,
                             const std::atomic<bool>* abort) {
  out->reset();
  std::vector<const char*> keys = {"dbname"};
  std::vector<const char*> values = {conninfo.c_str()};
  for (const auto& [k, v] : overrides) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* raw = PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (raw == nullptr) return Status::ConnectionLost("out of memory");
  std::unique_ptr<PgConnection> conn(new PgConnection(raw, abort));
  if (PQstatus(raw) == CONNECTION_BAD)
    return Status::ConnectionLost(TrimMessage(PQerrorMessage(raw)));
  PQsetNoticeProcessor(raw, IgnoreNotice, nullptr);
  for (;;) {
    const PostgresPollingStatusType st = PQconnectPoll(raw);
    if (st == PGRES_POLLING_OK) break;
    if (st == PGRES_POLLING_FAILED) return Status::ConnectionLost(TrimMessage(PQerrorMessage(raw)));
    if (Status s = conn->Wait(st == PGRES_POLLING_WRITING, deadline); !s.ok()) {
      return s.WithContext("connect");
    }
  }
  if (PQsetnonblocking(raw, 1) != 0)
    return Status::ConnectionLost(TrimMessage(PQerrorMessage(raw)));
  *out = std::move(conn);
  return Status::Ok();
}

PgConnection::PgConnection(PGconn* conn, const std::atomic<bool>* abort)
    : conn_(conn), abort_(abort), serial_([] {
        static std::atomic<uint64_t> next{1};
        return next.fetch_add(1, std::memory_order_relaxed);
      }()) {}

PgConnection::~PgConnection() { Close(); }

void PgConnection::Close() {
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
}

bool PgConnection::Broken() const { return conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK; }

std::string PgConnection::QuoteIdentifier(const std::string& ident) const {
  return Quote(conn_, ident, PQescapeIdentifier);
}

std::string PgConnection::QuoteLiteral(const std::string& text) const {
  return Quote(conn_, text, PQescapeLiteral);
}

Status PgConnection::Wait(bool for_write, SteadyClock::time_point deadline) {
  const int fd = PQsocket(conn_);
  if (fd < 0) return Status::ConnectionLost("no socket");
  for (;;) {
    if (abort_ != nullptr && abort_->load()) return Status::Aborted("aborted: shutting down");
    const int ms = RemainingMs(deadline);
    if (ms == 0) return Status::Deadline("timed out");
    pollfd p{fd, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
    const int rc = poll(&p, 1, abort_ != nullptr ? std::min(ms, 100) : ms);
    if (rc > 0) return Status::Ok();
    if (rc == 0) continue;
    if (errno != EINTR) {
      return Status::ConnectionLost("poll: " + std::generic_category().message(errno));
    }
  }
}

Status PgConnection::CloseWith(Status status) {
  Close();
  return status;
}

Status PgConnection::Exec(const std::string& sql, const std::vector<std::string>& params,
                          SteadyClock::time_point deadline, std::vector<PgResult>* results) {
  results->clear();
  if (Broken()) return Status::ConnectionLost("connection is closed");
  int sent = 0;
  if (params.empty()) {
    sent = PQsendQuery(conn_, sql.c_str());
  } else {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p.c_str());
    sent = PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                             values.data(), nullptr, nullptr, 0);
  }
  if (sent == 0) return CloseWith(Status::ConnectionLost(TrimMessage(PQerrorMessage(conn_))));
  // Push the query out, then read until libpq has every result.
  for (;;) {
    const int f = PQflush(conn_);
    if (f == 0) break;
    if (f < 0) return CloseWith(Status::ConnectionLost(TrimMessage(PQerrorMessage(conn_))));
    if (Status s = Wait(true, deadline); !s.ok()) return CloseWith(s);
  }
  std::string first_error, first_sqlstate;
  for (;;) {
    while (PQisBusy(conn_) != 0) {
      if (Status s = Wait(false, deadline); !s.ok()) return CloseWith(s);
      if (PQconsumeInput(conn_) == 0) {
        return CloseWith(Status::ConnectionLost(TrimMessage(PQerrorMessage(conn_))));
      }
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    PgResult result(r);
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK || st == PGRES_EMPTY_QUERY) {
      results->push_back(std::move(result));
    } else if (first_error.empty()) {
      first_error = TrimMessage(PQresultErrorMessage(r));
      const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      first_sqlstate = state != nullptr ? state : "";
    }
  }
  if (Broken()) {
    const std::string why = first_error.empty() ? TrimMessage(PQerrorMessage(conn_)) : first_error;
    return CloseWith(Status::ConnectionLost(why));
  }
  if (!first_error.empty()) return Status::StatementFailed(first_error, first_sqlstate);
  return Status::Ok();
}

Status PgConnection::ExecOne(const std::string& sql, const std::vector<std::string>& params,
                             SteadyClock::time_point deadline, std::optional<PgResult>* result) {
  std::vector<PgResult> results;
  if (Status s = Exec(sql, params, deadline, &results); !s.ok()) return s;
  if (results.size() != 1) {
    return Status::UnexpectedShape("expected one result, got " + std::to_string(results.size()));
  }
  result->emplace(std::move(results[0]));
  return Status::Ok();
}

}  // namespace pglock
