// What the server's log says happened to locks between polls (log_lock_waits' lines, lock
// timeouts and failed NOWAITs, deadlocks): counted into the target's Counters and turned into
// events, once each, however many polls a wait spans.
//
//   a wait's "still waiting" line --------> open (counted once: pglock_logged_lock_waits_total;
//                                                the line written again each time the waiting
//                                                backend wakes is the same wait)
//   open --"acquired ... after N ms"-----------> ended: a lock_wait event, N in the histogram
//   open --the same process's 55P03 ----------> ended: a lock_timeout event (its lock, the holders
//                                                the wait line named)
//   open --the same process's 40P01 ----------> ended: in the deadlock event (the others of the
//                                                cycle wait on, and end with their own lines)
//   open --neither within kOpenWaitSeconds----> forgotten (its end was not logged)
//   a 55P03 with no open wait ---------------> a lock_timeout event (the blocker from the last
//                                                poll, when it saw the process wait)
//   a 40P01 ----------------------------------> a deadlock event naming every process of the cycle
//
// A wait the polls also saw is one wait, not two: waits are counted from the log alone (the polls
// keep their gauges), and the event says whether a poll saw it (`seen by a poll`).
// Bounded: at most kMaxOpenWaits open waits (the oldest go); roles in pglock_lock_timeouts_total
// by the first top_n that time out, the rest "other"; events as every event.
// Thread-compatible: owned by one poller; JudgeLoggedLocks (judge.h) is the way in.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/serverlog/lock_records.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/poll_index.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// The buckets of pglock_logged_lock_wait_seconds: a logged wait lasted at least deadlock_timeout
// (1 s by default).
inline const std::vector<double> kLoggedWaitBuckets = {0.5, 1, 2, 5, 10, 30, 60, 300, 1800};
inline constexpr size_t kMaxOpenWaits = 10'000;
inline constexpr double kOpenWaitSeconds = 3600;

class LoggedLockTracker {
 public:
  LoggedLockTracker() = default;
  LoggedLockTracker(const LoggedLockTracker&) = delete;
  LoggedLockTracker& operator=(const LoggedLockTracker&) = delete;

  // Judges `records` (the log's lock records read since the last call, in the log's order)
  // against `poll` (the sessions it saw waiting, their identities). Queries and statements go
  // into events only with `query_text`. `top_n` bounds the roles of lock timeouts.
  void Observe(const PollData& poll, const std::vector<LockRecord>& records, const LockNames* names,
               int top_n, bool query_text, Counters* counters, std::vector<Event>* events);

  size_t open_waits() const { return open_.size(); }

 private:
  struct OpenWait {
    LockRecord first;  // the "still waiting" line
    bool seen_by_poll = false;
  };
  using Key = std::pair<int, int64_t>;  // pid, backend start

  void StillWaiting(const LockRecord& r, const LockNames* names, Counters* counters);
  void WaitEnded(const PollIndex& index, const LockRecord& r, const LockNames* names,
                 Counters* counters, std::vector<Event>* events);
  void TimedOut(const PollIndex& index, const LockRecord& r, const LockNames* names, int top_n,
                bool query_text, Counters* counters, std::vector<Event>* events);
  void Deadlock(const PollIndex& index, const LockRecord& r, const LockNames* names,
                bool query_text, std::vector<Event>* events);
  // The role label of a lock timeout: its own for the first top_n roles, else "other".
  std::string RoleLabel(const std::string& user, int top_n);
  void Forget(double now);

  std::map<Key, OpenWait> open_;
  std::set<std::string> timeout_roles_;
};

// "advisory lock [db,classid,objid,objsubid]" as the lock's configured name or key (LockLabel);
// a relation's lock (a row, a page, the relation) as its schema.table when the poller named it;
// any other lock as the log described it.
std::string LoggedLockLabel(const LoggedLockTag& tag, const LockNames* names);
// The `lock` label of pglock_logged_lock_waits_total: a configured advisory name, "unnamed" for
// other advisory keys, "" for other lock types.
std::string LoggedLockCounterLabel(const LoggedLockTag& tag, const LockNames* names);

}  // namespace pglock
