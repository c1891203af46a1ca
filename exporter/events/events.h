// Events between polls: compares a poll with the previous good one and counts lock releases and
// losses (with an inferred cause), hand-overs and takeovers, and sessions ended
// (pg_stat_database) into the target's cumulative Counters; lease transitions and pooled locks
// are judged by their own state machines (lease_transitions.h, pooled_locks.h), owned here. The
// state carried from poll to poll survives failed polls (a reconnect is not a release) but not a
// server restart (everything is lost then). Thread-compatible: owned by one poller; JudgePoll()
// (judge.h) is the one way in.
//
// An advisory hold (session, key) seen at one inventory is judged at the next one:
//
//   held --still held---------------------------------------------------> held
//     |--gone; its session still there and ran a statement since-------> released (unlocked)
//     |--gone; its session still listed, no statement since------------> deferred (DeferredHold)
//     |--session gone; an abnormal end of its database explains it-----> lost (cause)
//     |--session gone as a timeout would end it, end not counted yet---> deferred (awaiting count)
//     |--session gone, no end counted (14+)----------------------------> settling
//     +--session counters may predate the end (14)---------------------> the judgement waits
//                                                                         (kMaxCounterWaits)
//   deferred --at the next judgement, by how its session ended--> released | lost
//   settling --the counters read again right after the poll (Settle): an end counted since--> lost
//            --no end counted, or no second read------------------------------------------>
//            released
//                                                                              (session_closed)
//   released, and another session holds the key ---> hand-over
//   lost, and another session takes the key within events.takeover_window ---> takeover (one per
//   loss)
//
// Proof of a loss, the transition that pages: the holder's session is gone AND its database's
// pg_stat_database counters show an abnormal end (fatal, killed, abandoned) that this session is
// the one to explain: sessions ending as a timeout would claim fatal ends first, those holding
// nothing before lock holders, and each counted end explains one session only. A clean close
// counts no end; an unlock leaves the session connected; a transaction lock ends with its
// transaction: none of them can produce that evidence. Before PostgreSQL 14 (no counters) only a
// timeout match or a server restart is a loss.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/events/lease_transitions.h"
#include "exporter/events/pooled_locks.h"
#include "exporter/snapshot/lock_names.h"
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
// How long a session that ended as a timeout would end it, but whose end the session counters do
// not show yet, waits to claim its late count (a poll may fall between the two reads an exit spans;
// on PostgreSQL 14 the counters may also be up to 500 ms old).
inline constexpr double kLateSessionEndSeconds = 10.0;
using SessionId = std::pair<int, double>;  // pid, backend_start: pids are reused

// How a hold that is gone from pg_locks ended: its session still connected (an unlock or the end
// of its transaction), a clean close of its session, or a loss and its cause.
enum class HoldEnd {
  kStillConnected,
  kCleanClose,
  kIdleInTransactionTimeout,
  kIdleSessionTimeout,
  kTerminated,
  kConnectionLost,
  kServerRestart,
  kUnknown,  // an abnormal end that matches no rule
};
inline constexpr HoldEnd kLossCauses[] = {
    HoldEnd::kIdleInTransactionTimeout, HoldEnd::kIdleSessionTimeout, HoldEnd::kTerminated,
    HoldEnd::kConnectionLost,           HoldEnd::kServerRestart,      HoldEnd::kUnknown};
inline bool IsLoss(HoldEnd e) { return e != HoldEnd::kStillConnected && e != HoldEnd::kCleanClose; }
// The label value where metrics and JSON are written: the `cause` of a loss, the `reason` of a
// release ("unlocked", "session_closed").
const char* HoldEndLabel(HoldEnd e);

// The last sight of a session, from any poll (an inventory or not) since lock events were last
// judged: a session that came and went between two inventories still takes part in explaining its
// database's session end counters.
struct SessionSighting {
  uint32_t datid = 0;
  uint32_t usesysid = 0;
  std::string state;
  std::optional<double> state_change;
  double seen_at = 0;                  // now() of the poll that saw it
  std::optional<double> awaiting_end;  // ended as a timeout would, its count not seen yet, since
};

// A lock whose holder's end is not known yet: gone from a session still listed that ran no
// statement since (its backend may be ending: it releases its locks before it leaves
// pg_stat_activity and counts its end), or held by a session gone as a timeout would end it whose
// fatal end is not counted yet. The rest of the interval is judged at once; this hold, and the
// hand-over or takeover of its key, at the next judgement, by how that session ended.
struct DeferredHold {
  AdvisoryKey key;
  SessionId session;
  bool exclusive = false;
  double held_at = 0;  // now() of the inventory that last saw it held
  std::string db;
  Identity holder;
  bool awaiting_count = false;  // gone, ended as a timeout would, its fatal end not counted yet
  std::optional<SessionId> taken_by;  // the key's exclusive holder when it was deferred
  Identity taker;
};

// How a session that held a lock ended, from what was last seen of it and the counter deltas of its
// database (declared here for EventTracker; see InferLossCause below).
struct SessionEndDeltas {
  int64_t fatal = 0;
  int64_t killed = 0;
  int64_t abandoned = 0;
};

struct LostKey {
  int pid = 0;
  double backend_start = 0;
  double lost_at = 0;
  Identity holder;  // who lost it, for the takeover event
};

struct Hold;            // events.cc
class HoldIndex;        // events.cc
struct EndJudgement;    // events.cc
struct JudgedInterval;  // events.cc

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
  // under lock="unnamed". On PostgreSQL 14, when a lock holder's session is gone but the session
  // counters may predate its end, the judgement waits for a later inventory (at most
  // kMaxCounterWaits), against the same baseline. A held lock gone while its session, still
  // listed, ran no statement since (a backend that ends releases its locks before it leaves
  // pg_stat_activity and counts its end) is judged, with its key's next holder, at the next
  // judgement (DeferredHold); the rest of the interval at once. Each loss, takeover, hand-over,
  // release by session close, lease transition but a renewal, and pooled-lock inheritance counted
  // is also appended to *events (when not null), without its target.
  void Observe(std::shared_ptr<const PollData> cur, std::shared_ptr<const PollData> last_inventory,
               const LockNames* names, Counters* counters, std::vector<Event>* events = nullptr);

  // True when the last Observe() judged lock holders' sessions closed cleanly with no end counted
  // in their database. An ending backend releases its locks, counts its end, then leaves
  // pg_stat_activity; a poll reads the counters, then pg_stat_activity: a session that counted its
  // end and left between those two reads is gone with no end counted. The poller then reads the
  // session end counters again, at once, and calls Settle().
  bool settling() const { return !settling_.empty(); }
  // Judges the holds of the last Observe() that were waiting to settle, against `later` (the
  // counters read again `seconds_after_poll` after that poll's now(); nullopt when they could not
  // be read):
  // an end counted since that poll explains one of those sessions (a loss, and a takeover of its
  // key if another session took it), the rest are clean closes (a release, and a hand-over). The
  // ends claimed here are not claimed again at the next judgement. Observe() settles what is
  // still waiting against nothing before it judges a new poll.
  void Settle(const std::optional<std::vector<DatabaseStats>>& later, double seconds_after_poll,
              const LockNames* names, Counters* counters, std::vector<Event>* events = nullptr);

  // A reload changed events.takeover_window; what was lost is still remembered.
  void set_takeover_window(double seconds) { takeover_window_seconds_ = seconds; }

  // Session locks on pooled server connections, as of the last Observe().
  const PooledLockTracker& pooled() const { return pooled_; }

 private:
  void CountSessionsEnded(const PollData& cur, Counters* counters);
  // Judges the lock events between the inventories `prev` and `cur`, but the holds whose evidence
  // may still be on its way (see DeferredHold), and those deferred by the last judgement.
  void CountLockEvents(const std::shared_ptr<const PollData>& prev,
                       const std::shared_ptr<const PollData>& cur, const LockNames* names,
                       Counters* counters, std::vector<Event>* events);
  // The holds of `poll` indexed by key: those of the last judgement's `cur` are kept, not rebuilt.
  std::shared_ptr<const HoldIndex> HoldsOf(const std::shared_ptr<const PollData>& poll);
  // The holds deferred by the last judgement, now that their sessions are gone or still there.
  void ResolveDeferredHolds(const JudgedInterval& in, const EndJudgement& ended,
                            const LockNames* names, Counters* counters, std::vector<Event>* events);
  // The holds of `prev` gone at `cur`: deferred, settling, or counted at once; the keys whose
  // change of holder waits with them go into *deferred_keys.
  void JudgeGoneHolds(const JudgedInterval& in, const EndJudgement& ended, const LockNames* names,
                      Counters* counters, std::vector<Event>* events,
                      std::set<AdvisoryKey>* deferred_keys);
  // Counts one hold of `prev` gone at `cur` that ended as `end` (a loss remembers its key).
  void CountGoneHold(const JudgedInterval& in, const AdvisoryKey& key, const Hold& h, HoldEnd end,
                     const LockNames* names, Counters* counters, std::vector<Event>* events);
  // Takes out of *late, the ends counted since the poll that judged the `settling` holds, those
  // that belong to other sessions: one end for each hold deferred because its backend may be
  // ending, and a fatal end for each session that ends as a timeout would by the reservation
  // horizon (when the second read ran: the poll's now() plus the time since). Those sessions
  // claim their ends at the next judgement.
  void ReserveOthersEnds(const PollData& poll, const std::vector<DeferredHold>& settling,
                         double reservation_horizon,
                         std::map<uint32_t, SessionEndDeltas>* late) const;
  // Remembers what every poll shows of each session, for EndCauses.
  void SeeSessions(const PollData& cur);
  // After a judgement: forgets the sessions gone by `cur`, but those still waiting for their late
  // end count (for at most kLateSessionEndSeconds).
  void ForgetEndedSessions(const PollData& cur);

 private:
  void SeedZeroCounters(const PollData& cur, const LockNames* names, Counters* counters);

  // Counts a deferred or settling hold that ended as `end`, with the hand-over or takeover of its
  // key by `next` (its next holder).
  void ResolveHold(const DeferredHold& d, HoldEnd end, double now,
                   const std::optional<Identity>& next, const LockNames* names, Counters* counters,
                   std::vector<Event>* events);

  double takeover_window_seconds_;
  std::vector<DeferredHold> deferred_;
  // Holds judged closed cleanly by the last Observe(), waiting for Settle(); the counters of that
  // poll and its now(); the ends Settle() explained, per database, not to be claimed again.
  std::vector<DeferredHold> settling_;
  std::vector<DatabaseStats> settle_base_;
  std::shared_ptr<const PollData> settle_poll_;  // its settings, for the sessions' timeouts
  double settle_now_ = 0;
  std::map<uint32_t, SessionEndDeltas> settled_ends_;
  std::map<SessionId, SessionSighting> sightings_;
  // The inventory that lock events are judged against while the session counters lag, the now()
  // of the first inventory that waited, and how many have waited.
  std::shared_ptr<const PollData> waiting_baseline_;
  double waiting_since_ = 0;
  int counter_waits_ = 0;
  std::map<AdvisoryKey, LostKey> lost_keys_;
  // The last judgement's `cur` and its holds indexed by key.
  std::shared_ptr<const PollData> indexed_poll_;
  std::shared_ptr<const HoldIndex> indexed_holds_;
  PooledLockTracker pooled_;
  std::map<uint32_t, DatabaseStats> last_stats_;  // by datid, last good poll
  LeaseTransitions leases_;
};

// How a session that held a lock ended, from what was last seen of it and the counter deltas of its
// database: kCleanClose (a release), else the cause of the loss. Each abnormal end explains one
// session (the delta is consumed). deltas_known is false before PostgreSQL 14 (no session
// counters). Exposed for unit tests.
HoldEnd InferLossCause(const Session& last_seen, double last_poll_now, double cur_poll_now,
                       double idle_in_transaction_timeout, double idle_session_timeout,
                       SessionEndDeltas* deltas, bool deltas_known);

// kIdleInTransactionTimeout / kIdleSessionTimeout when the session, last seen idle (in
// transaction) at last_poll_now, would have reached that timeout by cur_poll_now (with
// kTimeoutSlackSeconds of slack); else nullopt.
std::optional<HoldEnd> TimeoutMatch(const Session& last_seen, double last_poll_now,
                                    double cur_poll_now, double idle_in_transaction_timeout,
                                    double idle_session_timeout);

}  // namespace pglock
