// How sessions ended, in the server log's own words: ClassifyEnd() reads one record, and
// SessionEndFacts keeps what the log said per session (pid and backend start, from session_id) for
// the poller to join to the sessions it saw go away. Records from client backends only.
//
// By SQLSTATE, whatever lc_messages is:
//   57P01 (FATAL) terminated; a server restart within 60 s after the postmaster's shutdown request
//   25P03 idle-in-transaction timeout   57P05 idle-session timeout   25P04 transaction timeout
//   08P01, 08006 (FATAL, or LOG as COMMERROR writes them) connection lost
//   57P02 (FATAL, or WARNING before 14), 57P03 server restart
//   any other FATAL or PANIC: unknown
// And by English text (log_disconnections = on, lc_messages English): "disconnection: session
// time: ..." is kCleanClose, which says only that no cause was logged (a clean close, or a client
// that vanished outside a transaction: its EOF is logged at DEBUG1); the postmaster's "received
// fast|smart|immediate shutdown request" marks a shutdown. The first end the log gives for a
// session stands: a FATAL line comes before the same session's disconnection line.
//
// ClassifyEnd is pure and thread-safe. SessionEndFacts is thread-safe (one mutex): the log thread
// adds, the poller finds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exporter/serverlog/log_record.h"
#include "exporter/snapshot/session_end.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

struct LoggedEnd {
  HoldEnd end = HoldEnd::kUnknown;
  std::string sqlstate;  // "00000" for a disconnection line
  double time = 0;       // the record's log_time
  std::string dbname;
};

// The end `record` reports for its session, or nullopt when it reports none (or is not from a
// client backend). A 57P01 is kTerminated here: only SessionEndFacts knows of a shutdown.
std::optional<LoggedEnd> ClassifyEnd(const LogRecord& record);

// The postmaster's "received ... shutdown request" line.
bool IsShutdownRequest(const LogRecord& record);

class SessionEndFacts {
 public:
  static constexpr size_t kDefaultMaxSessions = 100000;
  static constexpr double kDefaultRetentionSeconds = 15 * 60;

  // Keeps at most max_sessions ends, none older than retention_seconds of log time behind the
  // newest record added; the oldest go first.
  explicit SessionEndFacts(size_t max_sessions = kDefaultMaxSessions,
                           double retention_seconds = kDefaultRetentionSeconds);
  SessionEndFacts(const SessionEndFacts&) = delete;
  SessionEndFacts& operator=(const SessionEndFacts&) = delete;

  void Add(const LogRecord& record) EXCLUDES(mu_);

  // The end the log gave for the session of `pid` that started at `backend_start` (epoch
  // seconds, as pg_stat_activity.backend_start: the log has it truncated to the second).
  std::optional<LoggedEnd> Find(int pid, double backend_start) const EXCLUDES(mu_);
  std::optional<LoggedEnd> Find(const SessionId& session) const {
    return Find(session.first, session.second);
  }

  // The ends of sessions of `dbname` logged between `from` and `to` (log time), oldest first.
  std::vector<LoggedSessionEnd> EndsBetween(const std::string& dbname, double from, double to) const
      EXCLUDES(mu_);

  // A disconnection line was seen: log_disconnections is on, so a session with no line yet has
  // not been logged as ended (rather than never will be).
  bool disconnections_logged() const EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

 private:
  using Key = std::pair<int, int64_t>;  // pid, backend start in whole seconds

  void Evict() REQUIRES(mu_);

  const size_t max_sessions_;
  const double retention_seconds_;
  mutable Mutex mu_;
  std::map<Key, LoggedEnd> ends_ GUARDED_BY(mu_);
  std::deque<Key> order_ GUARDED_BY(mu_);  // the keys of ends_, oldest first
  double newest_time_ GUARDED_BY(mu_) = 0;
  std::optional<double> shutdown_time_ GUARDED_BY(mu_);
  bool disconnections_logged_ GUARDED_BY(mu_) = false;
};

}  // namespace pglock
