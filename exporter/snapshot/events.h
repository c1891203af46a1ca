// Events between polls: compares a poll with the previous good one and counts lock releases and
// losses (with an inferred cause), takeovers, sessions ended (pg_stat_database) and lease
// transitions into the target's cumulative Counters. The state carried from poll to poll survives
// failed polls (a reconnect is not a release) but not a server restart (everything is lost then).
// Thread-compatible: owned by one poller.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/collectors/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/pooled_locks.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// Seconds of slack when deciding that a session was idle long enough for its timeout to fire.
inline constexpr double kTimeoutSlackSeconds = 1.0;
// Keys remembered after their holder's session ended, to spot the next run taking them.
inline constexpr size_t kMaxLostKeys = 10'000;
// Distinct lease names per table that get their own transition counters; the rest count as
// lease="other", so tables with per-job lease names cannot grow the counters without bound.
inline constexpr size_t kMaxLeaseCounterNames = 1'000;
// Lease tables with at most this many rows get their transition counters created at 0.
inline constexpr size_t kMaxSeededLeases = 100;

struct LostKey {
  int pid = 0;
  double backend_start = 0;
  double lost_at = 0;
};

class EventTracker {
 public:
  // A key taken by another session within `takeover_window_seconds` of its loss is a takeover.
  explicit EventTracker(double takeover_window_seconds = 3600)
      : takeover_window_seconds_(takeover_window_seconds) {}
  EventTracker(const EventTracker&) = delete;
  EventTracker& operator=(const EventTracker&) = delete;

  // Counts what happened between the previous good poll and `cur` into *counters. Lock events
  // are judged when `cur` is an inventory, against `last_inventory` (InventoryTier::last(), as it
  // was before `cur`; null at first). `names` maps configured keys to names; other keys count
  // under lock="unnamed".
  void Observe(std::shared_ptr<const PollData> cur, const PollData* last_inventory,
               const LockNames* names, Counters* counters);

  // Session locks on pooled server connections, as of the last Observe().
  const PooledLockTracker& pooled() const { return pooled_; }

 private:
  void CountSessionsEnded(const PollData& cur, Counters* counters);
  void CountLockEvents(const PollData& prev, const PollData& cur, const LockNames* names,
                       Counters* counters);
  void CountLeaseTransitions(const PollData& cur, Counters* counters);
  void SeedZeroCounters(const PollData& cur, const LockNames* names, Counters* counters);

  const double takeover_window_seconds_;
  std::shared_ptr<const PollData> last_;  // last successful poll
  std::map<AdvisoryKey, LostKey> lost_keys_;
  PooledLockTracker pooled_;
  std::map<uint32_t, DatabaseStats> last_stats_;                        // by datid, last good poll
  std::map<std::string, std::map<std::string, LeaseRow>> last_leases_;  // table -> name -> row
  std::map<std::string, bool> last_leases_complete_;                    // table -> not capped
};

// How a session that held a lock ended, from what was last seen of it and the counter deltas of its
// database: "" for a clean close (a release), else the cause of the loss. Each abnormal end
// explains one session (the delta is consumed). deltas_known is false before PostgreSQL 14 (no
// session counters). Exposed for unit tests.
struct SessionEndDeltas {
  int64_t fatal = 0;
  int64_t killed = 0;
  int64_t abandoned = 0;
};
std::string InferLossCause(const Session& last_seen, double last_poll_now, double cur_poll_now,
                           double idle_in_transaction_timeout, double idle_session_timeout,
                           SessionEndDeltas* deltas, bool deltas_known);

// "idle_in_transaction_timeout" / "idle_session_timeout" when the session, last seen idle (in
// transaction) at last_poll_now, would have reached that timeout by cur_poll_now (with
// kTimeoutSlackSeconds of slack); else "".
std::string TimeoutMatch(const Session& last_seen, double last_poll_now, double cur_poll_now,
                         double idle_in_transaction_timeout, double idle_session_timeout);

}  // namespace pglock
