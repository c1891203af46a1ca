// Events between polls: compares a poll with the previous good one and counts into the target's
// cumulative Counters what happened in between, each by its own state machine: advisory holds
// released, lost, handed over or taken over (advisory_holds.h), lease transitions
// (lease_transitions.h), session locks on pooled connections (pooled_locks.h); and the sessions
// ended, from pg_stat_database. The state carried from poll to poll survives failed polls (a
// reconnect is not a release) but not a server restart (everything is lost then).
// Thread-compatible: owned by one poller; JudgePoll() (judge.h) is the one way in.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exporter/events/advisory_holds.h"
#include "exporter/events/event_log.h"
#include "exporter/events/lease_transitions.h"
#include "exporter/events/pooled_locks.h"
#include "exporter/events/session_ends.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

class EventTracker {
 public:
  // A key taken by another session within `takeover_window_seconds` of its loss is a takeover.
  explicit EventTracker(double takeover_window_seconds = 3600) : holds_(takeover_window_seconds) {}
  EventTracker(const EventTracker&) = delete;
  EventTracker& operator=(const EventTracker&) = delete;

  // Counts what happened between the previous good poll and `cur` into *counters. Lock events
  // are judged when `cur` is an inventory, against `last_inventory` (InventoryTier::last(), as it
  // was before `cur`; null at first). `names` maps configured keys to names; other keys count
  // under lock="unnamed". On PostgreSQL 14, when a lock holder's session is gone but the session
  // counters may predate its end, the judgement waits for a later inventory (at most
  // kMaxCounterWaits), against the same baseline. A held lock gone while its session, still
  // listed, ran no statement since (a backend that ends releases its locks before it leaves
  // pg_stat_activity and counts its end) is judged, with its key's next holder, at the next
  // judgement (HoldState::kBackendEnding); the rest of the interval at once. Each loss, takeover,
  // hand-over, release by session close, lease transition but a renewal, and pooled-lock
  // inheritance counted is also appended to *events (when not null), without its target.
  void Observe(std::shared_ptr<const PollData> cur, std::shared_ptr<const PollData> last_inventory,
               const LockNames* names, Counters* counters, std::vector<Event>* events = nullptr);

  // True when the last Observe() judged lock holders' sessions closed cleanly with no end counted
  // in their database. An ending backend releases its locks, counts its end, then leaves
  // pg_stat_activity; a poll reads the counters, then pg_stat_activity: a session that counted its
  // end and left between those two reads is gone with no end counted. The poller then reads the
  // session end counters again, at once, and calls Settle().
  bool settling() const { return holds_.settling(); }
  // Judges the holds of the last Observe() that were waiting to settle, against `later` (the
  // counters read again `seconds_after_poll` after that poll's now(); nullopt when they could not
  // be read):
  // an end counted since that poll explains one of those sessions (a loss, and a takeover of its
  // key if another session took it), the rest are clean closes (a release, and a hand-over). The
  // ends claimed here are not claimed again at the next judgement. Observe() settles what is
  // still waiting against nothing before it judges a new poll.
  void Settle(const std::optional<std::vector<DatabaseStats>>& later, double seconds_after_poll,
              const LockNames* names, Counters* counters, std::vector<Event>* events = nullptr) {
    holds_.Settle(later, seconds_after_poll, names, counters, events);
  }

  // The server's log, asked first for how a holder's session ended (null: none configured).
  void set_log(std::shared_ptr<const SessionEndLog> log) { holds_.set_log(std::move(log)); }

  // A reload changed events.takeover_window; what was lost is still remembered.
  void set_takeover_window(double seconds) { holds_.set_takeover_window(seconds); }

  // The advisory holds' state machine, as of the last Observe().
  const AdvisoryHolds& holds() const { return holds_; }

  // Session locks on pooled server connections, as of the last Observe().
  const PooledLockTracker& pooled() const { return pooled_; }
  // Those saved before a restart (PooledLockTracker::Restore).
  void RestorePooled(const std::vector<PooledLock>& locks) { pooled_.Restore(locks); }

  // The lease tables' state between reads, for the state file and back at a start.
  LeaseTransitions::Saved SaveLeases() const { return leases_.Save(); }
  // What SaveLeases() would copy, read in place (the state's fingerprint).
  const std::map<std::string, LeaseTransitions::LeaseTableState>& lease_tables() const {
    return leases_.tables();
  }
  void RestoreLeases(LeaseTransitions::Saved saved) { leases_.Restore(std::move(saved)); }

  // The lease tables found to be queues by their names (LeaseTransitions::detected_queues).
  const std::set<std::string>& detected_queues() const { return leases_.detected_queues(); }

 private:
  void CountSessionsEnded(const PollData& cur, Counters* counters);

  AdvisoryHolds holds_;
  PooledLockTracker pooled_;
  std::map<uint32_t, DatabaseStats> last_stats_;  // by datid, last good poll
  LeaseTransitions leases_;
};

}  // namespace pglock
