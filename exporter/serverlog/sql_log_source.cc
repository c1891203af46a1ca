// The SQL source (log_source.h): the server's own view of its log directory. pg_read_binary_file
// takes a path relative to the data directory, or an absolute one; log_directory is either, so the
// path is log_directory || '/' || name, built on the server. Files have no identity here (0): a
// file recreated under its name shows only as a truncation.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exporter/pg/columns.h"
#include "exporter/pg/session.h"
#include "exporter/serverlog/log_source.h"
#include "exporter/util/backoff.h"

namespace pglock {
namespace {

// The pace the backoff of a failing statement starts from: the reader's default read_interval.
constexpr Duration kRetryInterval = std::chrono::seconds(1);

constexpr char kListSql[] =
    "SELECT name, size, extract(epoch FROM modification)::float8 AS modified "
    "FROM pg_ls_logdir()";
constexpr char kReadSql[] =
    "SELECT pg_read_binary_file(current_setting('log_directory') || '/' || $1, $2::bigint, "
    "$3::bigint, true) AS data";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// bytea's hex output ("\x4a53...") into bytes; false when it is not that.
bool DecodeHexBytea(std::string_view text, std::string* out) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0) return false;
  out->resize((text.size() - 2) / 2);
  for (size_t i = 2, o = 0; i < text.size(); i += 2, ++o) {
    const int hi = HexValue(text[i]);
    const int lo = HexValue(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[o] = static_cast<char>(hi << 4 | lo);
  }
  return true;
}

class SqlLogSource : public LogSource {
 public:
  SqlLogSource(std::string dsn, LogFormat format, std::chrono::milliseconds timeout,
               const std::atomic<bool>* abort)
      : dsn_(std::move(dsn)), format_(format), timeout_(timeout), abort_(abort) {}

  Status List(std::vector<LogFileInfo>* out) override {
    out->clear();
    std::optional<PgResult> result;
    if (Status s = Run(kListSql, {}, &result); !s.ok()) return s.WithContext("pg_ls_logdir()");
    Columns columns(*result, "pg_ls_logdir()");
    const int name = columns["name"], size = columns["size"], modified = columns["modified"];
    if (Status s = columns.status(); !s.ok()) return s;
    for (int row = 0; row < result->Rows(); ++row) {
      LogFileInfo file{result->String(row, name), 0, result->Double(row, modified).value_or(0), 0};
      if (!IsLogFileName(file.name, format_) || file.name.find('/') != std::string::npos) continue;
      file.size = static_cast<uint64_t>(result->Int(row, size).value_or(0));
      out->push_back(std::move(file));
    }
    return Status::Ok();
  }

  Status Read(const LogFileInfo& file, uint64_t offset, size_t max_bytes,
              std::string* out) override {
    out->clear();
    std::optional<PgResult> result;
    const std::vector<std::string> params = {file.name, std::to_string(offset),
                                             std::to_string(max_bytes)};
    if (Status s = Run(kReadSql, params, &result); !s.ok()) {
      return s.WithContext("pg_read_binary_file(" + file.name + ")");
    }
    if (result->Rows() != 1 || result->Columns() != 1) {
      return Status::UnexpectedShape("pg_read_binary_file: not one value");
    }
    if (result->IsNull(0, 0)) {
      return Status::StatementFailed("server log: " + file.name + " is gone from log_directory");
    }
    if (!DecodeHexBytea(result->Text(0, 0), out)) {
      return Status::UnexpectedShape("pg_read_binary_file: not hex bytea output");
    }
    return Status::Ok();
  }

  std::string Describe() const override {
    return std::string("log_directory over SQL (") +
           (format_ == LogFormat::kJsonlog ? "*.json" : "*.csv") + ")";
  }

 private:
  // Runs one statement on the source's session, opening it first when needed. A session that
  // broke is dropped, to be opened again by the next call. After a failure (a missing privilege
  // fails at every read, and each failure is an ERROR or FATAL line in the very log this reads)
  // the calls fail with the same status, without a try, until the backoff's delay has passed.
  Status Run(const char* sql, const std::vector<std::string>& params,
             std::optional<PgResult>* result) {
    const auto now = SteadyClock::now();
    if (!backoff_.Due(now)) return last_failure_;
    Status s = RunNow(sql, params, now + timeout_, result);
    if (s.ok()) {
      backoff_.Succeeded();
    } else {
      // A session lost or refused is tried again as soon as the poller's own (a restart).
      backoff_.Failed(now, kRetryInterval, conn_ ? kMaxStatementBackoff : kMaxBackoff);
      last_failure_ = s;
    }
    return s;
  }

  Status RunNow(const char* sql, const std::vector<std::string>& params,
                SteadyClock::time_point deadline, std::optional<PgResult>* result) {
    if (conn_ == nullptr || conn_->Broken()) {
      conn_.reset();
      if (Status s = Connect(deadline); !s.ok()) return s;
    }
    Status s = conn_->ExecOne(sql, params, deadline, result);
    if (!s.ok() && conn_->Broken()) conn_.reset();
    return s;
  }

  Status Connect(SteadyClock::time_point deadline) {
    std::unique_ptr<PgConnection> conn;
    if (Status s = OpenSession(dsn_, "", deadline, abort_, &conn); !s.ok()) return s;
    const std::string setup =
        "SET statement_timeout = " + std::to_string(timeout_.count()) + "; SET bytea_output = hex";
    std::vector<PgResult> ignored;
    if (Status s = conn->Exec(setup, {}, deadline, &ignored); !s.ok()) return s;
    conn_ = std::move(conn);
    return Status::Ok();
  }

  const std::string dsn_;
  const LogFormat format_;
  const std::chrono::milliseconds timeout_;
  const std::atomic<bool>* const abort_;
  std::unique_ptr<PgConnection> conn_;  // opened at first use
  StatementBackoff backoff_;
  Status last_failure_ = Status::Ok();
};

}  // namespace

std::unique_ptr<LogSource> MakeSqlLogSource(std::string dsn, LogFormat format,
                                            std::chrono::milliseconds timeout,
                                            const std::atomic<bool>* abort) {
  return std::make_unique<SqlLogSource>(std::move(dsn), format, timeout, abort);
}

}  // namespace pglock
