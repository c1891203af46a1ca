#include "exporter/events/logged_locks.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "exporter/snapshot/poll_index.h"

namespace pglock {
namespace {

bool IsWaitEnd(LockRecordKind k) {
  return k == LockRecordKind::kAcquired || k == LockRecordKind::kFailedToAcquire ||
         k == LockRecordKind::kDetectedDeadlock;
}

bool IsTimeout(LockRecordKind k) {
  return k == LockRecordKind::kLockTimeout || k == LockRecordKind::kNowaitFailed ||
         k == LockRecordKind::kLockNotAvailable;
}

std::string Pids(const std::vector<int>& pids) {
  std::string out;
  for (int p : pids) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

// The waiter's identity: what the poll shows of its pid, else what the log line says.
Identity WhoLogged(const PollIndex& index, const LockRecord& r) {
  Identity id = IdentityOf(index.Find(r.pid), r.pid);
  if (id.usename.empty()) id.usename = r.user;
  if (id.application_name.empty()) id.application_name = r.application_name;
  return id;
}

// The first holder a wait line named, as the poll shows it (pid 0: none named).
Identity FirstHolder(const PollIndex& index, const std::vector<int>& holders) {
  if (holders.empty()) return Identity{};
  return IdentityOf(index.Find(holders.front()), holders.front());
}

// Two wait lines of one process are of one wait when they name the same lock and mode and the same
// start (each line's time less the time it says was waited): a later wait on the same lock starts
// after the first ended, at least deadlock_timeout after the first's start.
bool SameWait(const LockRecord& a, const LockRecord& b) {
  constexpr double kStartSlackSeconds = 0.1;  // log_time has milliseconds; two lines' rounding
  return a.lock.text == b.lock.text && a.mode == b.mode &&
         std::abs((a.time - a.waited_seconds) - (b.time - b.waited_seconds)) < kStartSlackSeconds;
}

Event LogEvent(EventKind kind, const LockRecord& r, const PollIndex& index) {
  Event e;
  e.time = r.time;
  e.kind = kind;
  e.datname = r.dbname;
  e.current = WhoLogged(index, r);
  e.evidence = EndEvidence::kLog;
  return e;
}

}  // namespace

std::string LoggedLockLabel(const LoggedLockTag& tag, const LockNames* names) {
  // A row, page or relation lock is named by its relation, as a poll names it: so `?lock=` finds
  // the logged wait and the waits the polls saw together.
  if (!tag.relation_name.empty()) return tag.relation_name;
  if (tag.locktype != "advisory") return tag.text;
  const AdvisoryKey key{tag.field[0], tag.field[1], tag.field[2], static_cast<int>(tag.field[3])};
  return LockLabel(key, names);
}

std::string LoggedLockCounterLabel(const LoggedLockTag& tag, const LockNames* names) {
  if (tag.locktype != "advisory") return "";
  const AdvisoryKey key{tag.field[0], tag.field[1], tag.field[2], static_cast<int>(tag.field[3])};
  return CounterLockLabel(key, names);
}

void LoggedLockTracker::Observe(const PollData& poll, const std::vector<LockRecord>& records,
                                const LockNames* names, int top_n, bool query_text,
                                Counters* counters, std::vector<Event>* events) {
  std::optional<PollIndex> built;
  const PollIndex& index = IndexOf(poll, &built);
  // Waits this poll sees: their waits were seen by a poll.
  for (auto& [key, wait] : open_) {
    const Session* s = index.Find(key.first);
    if (s != nullptr && s->waiting_on_lock) wait.seen_by_poll = true;
  }
  for (const LockRecord& r : records) {
    if (r.kind == LockRecordKind::kStillWaiting) {
      StillWaiting(r, names, counters);
      const Session* s = index.Find(r.pid);
      if (s != nullptr && s->waiting_on_lock) open_[{r.pid, r.session_start}].seen_by_poll = true;
    } else if (IsWaitEnd(r.kind)) {
      WaitEnded(index, r, names, counters, events);
    } else if (IsTimeout(r.kind)) {
      TimedOut(index, r, names, top_n, query_text, counters, events);
    } else if (r.kind == LockRecordKind::kDeadlock) {
      Deadlock(index, r, names, query_text, events);
    } else if (r.kind == LockRecordKind::kLockFailure) {
      // PostgreSQL 18's log_lock_failures: the holders of the NOWAIT that fails next.
      open_[{r.pid, r.session_start}].first = r;
    }
  }
  Forget(poll.now);
}

void LoggedLockTracker::StillWaiting(const LockRecord& r, const LockNames* names,
                                     Counters* counters) {
  OpenWait& w = open_[{r.pid, r.session_start}];
  // PostgreSQL writes "still waiting" again each time the waiting backend wakes: the same wait,
  // counted at its first line, which keeps its holders and queue.
  if (w.first.kind == LockRecordKind::kStillWaiting && SameWait(w.first, r)) return;
  w.first = r;
  counters->logged_lock_waits[{r.dbname, r.lock.locktype, LoggedLockCounterLabel(r.lock, names)}] +=
      1;
}

void LoggedLockTracker::WaitEnded(const PollIndex& index, const LockRecord& r,
                                  const LockNames* names, Counters* counters,
                                  std::vector<Event>* events) {
  const auto it = open_.find({r.pid, r.session_start});
  const bool was_open = it != open_.end() && it->second.first.kind == LockRecordKind::kStillWaiting;
  // Its "still waiting" line came before the reader started: the wait counts now.
  if (!was_open) StillWaiting(r, names, counters);
  const OpenWait wait = open_[{r.pid, r.session_start}];
  open_.erase({r.pid, r.session_start});
  if (r.kind == LockRecordKind::kAcquired) {
    counters->logged_wait_seconds[r.lock.locktype].Observe(r.waited_seconds, kLoggedWaitBuckets);
  }
  // A wait that ended in a deadlock is told by the deadlock's event, which names every process.
  if (events == nullptr || r.kind == LockRecordKind::kDetectedDeadlock) return;
  Event e = LogEvent(EventKind::kLockWait, r, index);
  e.lock = LoggedLockLabel(r.lock, names);
  e.outcome = r.kind == LockRecordKind::kAcquired ? EventOutcome::kAcquired
                                                  : EventOutcome::kFailedToAcquire;
  e.duration = r.waited_seconds;
  e.started = r.time - r.waited_seconds;
  const std::vector<int>& holders = was_open ? wait.first.holders : r.holders;
  e.previous = FirstHolder(index, holders);
  e.detail = std::string(r.mode) + (r.lock.relation_name.empty() ? "" : " on " + r.lock.text) +
             "; holders " + Pids(holders) +
             (was_open && !wait.first.queue.empty() ? "; queue " + Pids(wait.first.queue) : "") +
             (wait.seen_by_poll ? "; seen by a poll" : "; between polls");
  events->push_back(std::move(e));
}

std::string LoggedLockTracker::RoleLabel(const std::string& user, int top_n) {
  if (timeout_roles_.count(user) != 0) return user;
  if (static_cast<int>(timeout_roles_.size()) < std::max(top_n, 1)) {
    timeout_roles_.insert(user);
    return user;
  }
  return "other";
}

void LoggedLockTracker::TimedOut(const PollIndex& index, const LockRecord& r,
                                 const LockNames* names, int top_n, bool query_text,
                                 Counters* counters, std::vector<Event>* events) {
  counters->lock_timeouts[{r.dbname, RoleLabel(r.user, top_n)}] += 1;
  const auto it = open_.find({r.pid, r.session_start});
  const std::optional<OpenWait> wait =
      it == open_.end() ? std::nullopt : std::optional<OpenWait>(it->second);
  if (it != open_.end()) open_.erase(it);
  if (events == nullptr) return;
  Event e = LogEvent(EventKind::kLockTimeout, r, index);
  e.cause = r.kind == LockRecordKind::kNowaitFailed       ? EventCause::kNowaitFailed
            : r.kind == LockRecordKind::kLockNotAvailable ? EventCause::kLockNotAvailable
                                                          : EventCause::kLockTimeout;
  std::vector<int> holders;
  if (wait) {
    e.lock = LoggedLockLabel(wait->first.lock, names);
    holders = wait->first.holders;
    e.duration = r.time - (wait->first.time - wait->first.waited_seconds);
  } else if (const Session* s = index.Find(r.pid); s != nullptr && s->waiting_on_lock) {
    holders = s->blocked_by;  // the last poll saw it wait behind these
  }
  if (e.lock.empty() && !r.relation_name.empty()) e.lock = "relation " + r.relation_name;
  e.previous = FirstHolder(index, holders);
  std::string detail = "holders " + Pids(holders);
  if (query_text && !r.statement.empty()) detail += "; statement: " + r.statement.substr(0, 1024);
  e.detail = detail;
  events->push_back(std::move(e));
}

void LoggedLockTracker::Deadlock(const PollIndex& index, const LockRecord& r,
                                 const LockNames* names, bool query_text,
                                 std::vector<Event>* events) {
  // The cancelled process's wait ended here; the others of the cycle go on waiting, and their
  // "acquired" lines end their own waits (counted once, from their "still waiting" line).
  open_.erase({r.pid, r.session_start});
  if (events == nullptr) return;
  Event e = LogEvent(EventKind::kDeadlock, r, index);
  e.previous = e.current;  // the process the server cancelled
  e.current = Identity{};
  std::string cycle;
  for (const DeadlockProcess& p : r.cycle) {
    if (!cycle.empty()) cycle += "; ";
    cycle += "pid " + std::to_string(p.pid) + " waits for " + p.mode + " on " +
             LoggedLockLabel(p.lock, names) + ", blocked by pid " + std::to_string(p.blocked_by);
    if (query_text && !p.query.empty()) cycle += " (query: " + p.query.substr(0, 1024) + ")";
  }
  if (r.truncated) cycle += "; ...";
  e.detail = "cancelled pid " + std::to_string(r.pid) + ": " + cycle;
  if (!r.cycle.empty()) e.lock = LoggedLockLabel(r.cycle.front().lock, names);
  events->push_back(std::move(e));
}

void LoggedLockTracker::Forget(double now) {
  for (auto it = open_.begin(); it != open_.end();) {
    it = now - it->second.first.time > kOpenWaitSeconds ? open_.erase(it) : std::next(it);
  }
  while (open_.size() > kMaxOpenWaits) {
    auto oldest = std::min_element(open_.begin(), open_.end(), [](const auto& a, const auto& b) {
      return a.second.first.time < b.second.first.time;
    });
    open_.erase(oldest);
  }
}

}  // namespace pglock
