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
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// Seconds of slack when deciding that a session was idle long enough for its timeout to fire.
inline constexpr double kTimeoutSlackSeconds = 1.0;
// Keys remembered after their holder's session ended, to spot the next run taking them.
inline constexpr size_t kMaxLostKeys = 10'000;
// Inventories that may pass before lock events are judged with stale session counters (see
// EventTracker::Observe).
inline constexpr int kMaxCounterWaits = 3;
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
  EventTracker() = default;
  EventTracker(const EventTracker&) = delete;
  EventTracker& operator=(const EventTracker&) = delete;

  // Counts what happened between the previous good poll and `cur` into *counters. Lock events
  // are judged when `cur` is an inventory, against `last_inventory` (InventoryTier::last(), as it
  // was before `cur`; null at first). `names` maps configured keys to names; other keys count
  // under lock="unnamed". On PostgreSQL 14, when a lock holder's session is gone but the session
  // counters may predate its end, the judgement waits for a later inventory (at most
  // kMaxCounterWaits), against the same baseline.
  void Observe(std::shared_ptr<const PollData> cur, std::shared_ptr<const PollData> last_inventory,
               const LockNames* names, Counters* counters);

 private:
  void CountSessionsEnded(const PollData& cur, Counters* counters);
  void CountLockEvents(const PollData& prev, const PollData& cur, const LockNames* names,
                       Counters* counters);
  void CountLeaseTransitions(const PollData& cur, Counters* counters);
  void SeedZeroCounters(const PollData& cur, const LockNames* names, Counters* counters);

  std::shared_ptr<const PollData> last_;  // last successful poll
  // The inventory that lock events are judged against while the session counters lag, the now()
  // of the first inventory that waited, and how many have waited.
  std::shared_ptr<const PollData> waiting_baseline_;
  double waiting_since_ = 0;
  int counter_waits_ = 0;
  std::map<AdvisoryKey, LostKey> lost_keys_;
  std::map<uint32_t, DatabaseStats> last_stats_;                        // by datid, last good poll
  std::map<std::string, std::map<std::string, LeaseRow>> last_leases_;  // table -> name -> row
  std::map<std::string, bool> last_leases_complete_;                    // table -> not capped
};

// The cause of a lost lock from what was last seen of its session and the counter deltas of its
// database. deltas_known is false before PostgreSQL 14 (no session counters). Exposed for unit
// tests.
struct SessionEndDeltas {
  int64_t fatal = 0;
  int64_t killed = 0;
  int64_t abandoned = 0;
};
std::string InferLossCause(const Session& last_seen, double last_poll_now, double cur_poll_now,
                           double idle_in_transaction_timeout, double idle_session_timeout,
                           SessionEndDeltas* deltas, bool deltas_known);

}  // namespace pglock
