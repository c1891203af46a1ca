// The server's log of one target, read on a thread of its own ([targets.server_log]): it
// follows the log (LogFollower over a file, a directory, or the server's own log directory
// through SQL), keeps how each session ended (SessionEndFacts) for the events to ask first, and
// reports its own health as a ServerLogStatus for /metrics. It never touches the poller's
// connection and a poll never waits for it: a slow or unreadable log only makes the events fall
// back to the session end counters.
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "exporter/config/config.h"
#include "exporter/serverlog/lock_records.h"
#include "exporter/serverlog/log_follower.h"
#include "exporter/serverlog/session_end_facts.h"
#include "exporter/snapshot/session_end.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

class Families;

inline constexpr size_t kMaxQueuedLockRecords = 10'000;

class ServerLog : public SessionEndLog {
 public:
  // `dsn` is the target's: the SQL source opens a connection of its own with it.
  ServerLog(std::string target, ServerLogConfig config, std::string dsn);
  ~ServerLog() override;  // stops and joins
  ServerLog(const ServerLog&) = delete;
  ServerLog& operator=(const ServerLog&) = delete;

  void Start();
  void Stop() EXCLUDES(mu_);

  std::optional<HoldEnd> EndOf(const SessionId& session) const override;
  std::vector<LoggedSessionEnd> EndsLoggedBetween(const std::string& datname, double from,
                                                  double to) const override {
    return facts_.EndsBetween(datname, from, to);
  }
  bool readable() const override { return up_.load(); }
  uint64_t reads_through() const override { return reads_through_.load(); }

  // The server's lc_messages, from the poller's last poll.
  void NoteLanguage(const std::string& lc_messages) EXCLUDES(mu_);
  // The lock records (waits, lock timeouts, deadlocks) read since the last call, in the log's
  // order: at most kMaxQueuedLockRecords wait between two calls, those beyond are dropped and
  // counted (ServerLogStatus::dropped).
  std::vector<LockRecord> TakeLockRecords() EXCLUDES(mu_);
  // The reader's health as of its last read.
  std::shared_ptr<const ServerLogStatus> Status() const EXCLUDES(mu_);

  const ServerLogConfig& config() const { return config_; }
  const std::string& dsn() const { return dsn_; }

  // Before Start(): read from where an earlier reader of this log stopped (LogFollower::ResumeAt)
  // instead of the log's end; lock records logged up to `records_taken_until` (epoch seconds)
  // were judged before and are not queued again. readable() until the first read says otherwise.
  void ResumeAt(LogPosition at, double records_taken_until) EXCLUDES(mu_);
  // Where the reader is, to resume from after a restart; nullopt before its first read.
  std::optional<LogPosition> Position() const EXCLUDES(mu_);

  // Reads once on the calling thread (tests; not to be mixed with Start()).
  void ReadOnceForTest() { ReadOnce(); }

 private:
  void Run() EXCLUDES(mu_);
  void ReadOnce() EXCLUDES(mu_);
  std::unique_ptr<LogSource> MakeSource() const;

  const std::string target_;
  const ServerLogConfig config_;
  const std::string dsn_;
  const LogFormat format_;
  SessionEndFacts facts_;  // thread-safe
  std::atomic<bool> up_{false};
  std::atomic<bool> abort_{false};  // makes an SQL read in flight give up (Stop)
  std::atomic<uint64_t> reads_through_{0};

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::shared_ptr<const ServerLogStatus> status_ GUARDED_BY(mu_);
  std::string lc_messages_ GUARDED_BY(mu_);
  std::vector<LockRecord> lock_records_ GUARDED_BY(mu_);
  double dropped_ GUARDED_BY(mu_) = 0;
  bool translated_waits_ GUARDED_BY(mu_) = false;  // a wait line in another language was seen
  std::optional<LogPosition> resume_ GUARDED_BY(mu_);
  double records_taken_until_ GUARDED_BY(mu_) = 0;
  std::optional<LogPosition> position_ GUARDED_BY(mu_);
  std::thread thread_;

  // Owned by the reading thread.
  std::unique_ptr<LogFollower> follower_;
  std::string last_error_;  // logged once per change
  double taken_until_ = 0;  // see ResumeAt
  bool resume_logged_ = false;
};

// True when lc_messages makes the server write its messages in English (C, POSIX, en_*, or
// empty: the server's default when unset).
bool EnglishMessages(const std::string& lc_messages);

// The server log's families of one target: its health (pglock_server_log_up, _records_total,
// _unparsed_total, _dropped_total, pglock_server_log_untranslated) and what it counted
// (pglock_logged_lock_waits_total, pglock_logged_lock_wait_seconds, pglock_lock_timeouts_total).
void ExposeServerLog(const TargetSnapshot& t, Families* out);

}  // namespace pglock
