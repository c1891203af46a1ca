#include "exporter/serverlog/session_end_facts.h"

#include <cmath>
#include <string_view>

namespace pglock {
namespace {

// A 57P01 this long after a shutdown request is the shutdown's, not an administrator's.
constexpr double kShutdownWindowSeconds = 60;

struct EndCode {
  std::string_view sqlstate;
  HoldEnd end;
};

constexpr EndCode kEndCodes[] = {
    {"57P01", HoldEnd::kTerminated},         {"25P03", HoldEnd::kIdleInTransactionTimeout},
    {"57P05", HoldEnd::kIdleSessionTimeout}, {"25P04", HoldEnd::kTransactionTimeout},
    {"08P01", HoldEnd::kConnectionLost},     {"08006", HoldEnd::kConnectionLost},
    {"57P02", HoldEnd::kServerRestart},      {"57P03", HoldEnd::kServerRestart},
};

// csvlog before 13 has no backend_type: only client backends carry a user and a database there.
bool IsClientBackend(const LogRecord& r) {
  if (!r.backend_type.empty()) return r.backend_type == "client backend";
  return !r.user.empty() || !r.dbname.empty();
}

// Whether `severity` ends the session for the end `code` names. COMMERROR (a lost client) is
// written as LOG; a crash of another process was a WARNING before PostgreSQL 14.
bool EndsSession(HoldEnd end, std::string_view code, std::string_view severity) {
  if (severity == "FATAL" || severity == "PANIC") return true;
  if (end == HoldEnd::kConnectionLost) return severity == "LOG";
  return code == "57P02" && severity == "WARNING";
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::optional<LoggedEnd> ClassifyEnd(const LogRecord& r) {
  if (r.session_start == 0 || !IsClientBackend(r)) return std::nullopt;
  for (const EndCode& c : kEndCodes) {
    if (r.state_code == c.sqlstate && EndsSession(c.end, c.sqlstate, r.error_severity)) {
      return LoggedEnd{c.end, r.state_code, r.log_time, r.dbname};
    }
  }
  if (r.error_severity == "FATAL" || r.error_severity == "PANIC") {
    return LoggedEnd{HoldEnd::kUnknown, r.state_code, r.log_time, r.dbname};
  }
  if (r.error_severity == "LOG" && StartsWith(r.message, "disconnection: session time:")) {
    return LoggedEnd{HoldEnd::kCleanClose, r.state_code, r.log_time, r.dbname};
  }
  return std::nullopt;
}

bool IsShutdownRequest(const LogRecord& r) {
  const bool postmaster =
      r.backend_type.empty() ? r.user.empty() && r.dbname.empty() : r.backend_type == "postmaster";
  return postmaster && r.error_severity == "LOG" &&
         (r.message == "received fast shutdown request" ||
          r.message == "received smart shutdown request" ||
          r.message == "received immediate shutdown request");
}

SessionEndFacts::SessionEndFacts(size_t max_sessions, double retention_seconds)
    : max_sessions_(max_sessions), retention_seconds_(retention_seconds) {}

void SessionEndFacts::Add(const LogRecord& r) {
  std::optional<LoggedEnd> end = ClassifyEnd(r);
  const bool shutdown = !end && IsShutdownRequest(r);
  if (!end && !shutdown) return;
  MutexLock lock(&mu_);
  if (r.log_time > newest_time_) newest_time_ = r.log_time;
  if (shutdown) {
    shutdown_time_ = r.log_time;
    return;
  }
  if (end->end == HoldEnd::kCleanClose) disconnections_logged_ = true;
  if (end->end == HoldEnd::kTerminated && shutdown_time_ && r.log_time >= *shutdown_time_ &&
      r.log_time - *shutdown_time_ <= kShutdownWindowSeconds) {
    end->end = HoldEnd::kServerRestart;
  }
  const Key key{r.pid != 0 ? r.pid : r.session_pid, r.session_start};
  if (!ends_.emplace(key, std::move(*end)).second) return;  // the first end stands
  order_.push_back(key);
  Evict();
}

void SessionEndFacts::Evict() {
  while (!order_.empty()) {
    const auto it = ends_.find(order_.front());
    const bool too_many = ends_.size() > max_sessions_;
    if (it != ends_.end() && !too_many && it->second.time >= newest_time_ - retention_seconds_) {
      return;
    }
    if (it != ends_.end()) ends_.erase(it);
    order_.pop_front();
  }
}

std::optional<LoggedEnd> SessionEndFacts::Find(int pid, double backend_start) const {
  const Key key{pid, static_cast<int64_t>(std::floor(backend_start))};
  MutexLock lock(&mu_);
  const auto it = ends_.find(key);
  if (it == ends_.end()) return std::nullopt;
  return it->second;
}

std::vector<LoggedSessionEnd> SessionEndFacts::EndsBetween(const std::string& dbname, double from,
                                                           double to) const {
  std::vector<LoggedSessionEnd> out;
  MutexLock lock(&mu_);
  // order_ is by arrival, which is log order: bounded by max_sessions_ in any case.
  for (const Key& key : order_) {
    const auto it = ends_.find(key);
    if (it == ends_.end() || it->second.dbname != dbname) continue;
    if (it->second.time < from || it->second.time > to) continue;
    out.push_back({{key.first, static_cast<double>(key.second)}, it->second.end});
  }
  return out;
}

bool SessionEndFacts::disconnections_logged() const {
  MutexLock lock(&mu_);
  return disconnections_logged_;
}

size_t SessionEndFacts::size() const {
  MutexLock lock(&mu_);
  return ends_.size();
}

}  // namespace pglock
