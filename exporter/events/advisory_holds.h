// Advisory holds: a state machine per (key, holding session), judged at each inventory against
// the one before it (a tiered poll's locks are the last inventory's, not a fresh read). It counts
// releases and losses (with their cause), and the key's next holder as a hand-over or, after a
// loss, a takeover. The holds survive failed polls (a reconnect is not a release); a server
// restart ends every hold as a loss, and the lost keys are remembered across it, so a key taken
// after the restart is a takeover (docs/events.md, "What survives what"). An exporter restart
// keeps nothing: its first inventory is the baseline.
//
//   kHeld --still held at the next inventory-------------------------------------------> kHeld
//     |---server restarted--------------------------------------------------------------> kEnded
//     |                                                                       (server_restart)
//     |---gone; session listed, no statement since ------------> kBackendEnding --+
//     |---gone; session gone as a timeout would end it, fatal end                 |
//     |   not counted yet -------------------------------------> kAwaitingEndCount +
//     |                                                          (next inventory) |
//     +---gone; session connected -------------------------------> kEnded (unlocked)
//     +---gone; session gone, an abnormal end explains it -------> kEnded (lost: cause)
//     +---gone; session gone, no end counted (14+) --> kSettling <-+ (same rules as from kHeld,
//     +---gone; session gone, no counters (12/13) ---> kEnded        by how the session ended)
//                                                     (session_closed)
//   kSettling --the counters read again right after the poll: an end counted since--> kEnded (lost)
//             --none counted, or no second read -------------------------------> kEnded
//                                                                        (session_closed)
//   With the server's log read (SessionEndLog), its word comes first and ends the hold at once,
//   from any state: a session whose FATAL (or lost-connection) line the log shows takes that
//   cause, evidence "log". A hold that would end on the counters' word while the log is readable
//   but has not shown its session's end waits for it instead, and so does one whose log shows
//   only its disconnection line (no cause: a clean close or a vanished client):
//     any state --ends on the counters' word, log readable--> kAwaitingLog
//   kAwaitingLog --the log shows a cause------------------------------------> kEnded (log's cause)
//                --the log shows no cause, nothing abandoned in its database
//                  over its interval---------------------> kEnded (session_closed, log+counters)
//                --the log shows no cause, abandoned ends counted, read through
//                  twice since or kMaxLogWaitSeconds passed--> kEnded (JudgeNoCauseEnd:
//                                 connection_lost or undetermined, log+counters)
//                --read through again since, or kMaxLogWaitSeconds passed---> kEnded (the counters'
//                                                                             cause, kept)
//   kEnded, exclusive, another session holds the key: released -> hand-over; lost -> takeover
//   (a loss's key stays remembered for events.takeover_window; one takeover per loss).
//
// The judgement as a whole waits (the holds stay kHeld, judged later against the same baseline)
// while PostgreSQL 14's session counters may predate a holder's end: kMaxCounterWaits inventories
// at most.
//
// What counts as proof, and why normal operation cannot produce it:
//   - lost (the transition that pages): the holder's session is gone AND its database's
//     pg_stat_database counters show an abnormal end (fatal, killed, abandoned) that this session
//     is the one to explain (session_ends.h: timeouts claim fatal ends first, sessions holding
//     nothing before lock holders, each end explains one session). A clean close counts no end;
//     an unlock leaves the session connected; a transaction lock ends with its transaction: none
//     of them produces that evidence. Before PostgreSQL 14 (no counters) only a timeout match or
//     a server restart is a loss.
//   - kBackendEnding: the lock is gone while its session, still listed, ran no statement (same
//     state and state_change). Nothing the client sent released it: the backend is ending (it
//     releases its locks before it counts its end and leaves pg_stat_activity). A client that
//     unlocks runs a statement for it, which moves state_change; one that unlocks inside a
//     statement still running waits here an inventory and ends as an unlock: its session is still
//     there. Time adds no evidence of a loss; only the end counters do. Its end may already be
//     counted at the poll that saw it listed (it counts its end, then leaves): the ends of that
//     interval no gone session claimed are kept for the kBackendEnding sessions alone, one of
//     each kind per session, and claimed by them first at the next judgement.
//   - kAwaitingEndCount: the session's idle time reached its timeout, but no fatal end is counted
//     yet (a poll may fall between the two writes an exit spans). A clean close after the same
//     idle time looks identical, so the hold goes the way of a clean close (kSettling) if no count
//     comes by the next inventory: time never invents a loss.
//   - the log's word: the backend writes its FATAL line (with its SQLSTATE) before it releases
//     its locks, and its disconnection line after; both carry its session id (backend start and
//     pid). Nothing but the end of that very session writes them: no race with other sessions of
//     its database, no inference. The disconnection line alone proves no clean close: a client
//     gone outside a transaction has its EOF logged at DEBUG1 only. It is a loss when its
//     database's abandoned ends over the interval are as many as its no-cause ends (one: its
//     own), undetermined when fewer, a release when none (session_ends.h, JudgeNoCauseEnd).
//   - kAwaitingLog: time adds nothing else; it ends on the log's word or, failing it, on
//     the cause the counters gave when it started to wait (evidence "counters").
//   - kSettling: a backend counts its end, then leaves pg_stat_activity; a poll reads the counters
//     first: a session that left between those two reads is gone with no end counted. The second
//     read settles it; ends that other pending holds' sessions will claim (kBackendEnding holds,
//     sessions ending as a timeout by the time of that read: the reservation horizon) are reserved
//     for them first, so a settling clean close cannot take their end.
// Thread-compatible: owned by one poller's EventTracker.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/events/session_ends.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// Keys remembered after their holder's session ended, to spot the next run taking them.
inline constexpr size_t kMaxLostKeys = 10'000;
// Inventories that may pass before lock events are judged with stale session counters.
inline constexpr int kMaxCounterWaits = 3;

enum class HoldState {
  kHeld,              // held at the last inventory (the hold lives in that poll's locks)
  kBackendEnding,     // gone from a session still listed that ran no statement since
  kAwaitingEndCount,  // its session gone as a timeout would end it, the fatal end not counted yet
  kSettling,          // its session closed with no end counted; waits for the counters read again
  kAwaitingLog,       // ended on the counters' word; waits for the log to show its session's end
  kEnded,             // counted: released (unlocked, session_closed) or lost (a cause)
};
const char* HoldStateName(HoldState s);

// What one judgement knows of a hold's session: the evidence of a transition.
struct HoldEvidence {
  bool restarted = false;              // the server restarted since the hold was last judged
  bool still_held = false;             // its session holds the key at this inventory
  bool backend_ending = false;         // the lock gone, its session listed with no statement since
  bool end_count_awaited = false;      // session gone as a timeout would end it, no end counted yet
  std::optional<HoldEnd> session_end;  // how its session ended; nullopt: still connected
  bool can_settle = false;  // a second read of the counters can show the end (14+, no restart)
  EndEvidence evidence = EndEvidence::kNone;  // what gave session_end
  // The log is readable and may still show the session's end (not read through since the hold
  // started to wait for it, and for less than kMaxLogWaitSeconds).
  bool log_awaited = false;
  // The log shows its disconnection line and no cause: session_end, if any, is the counters'.
  bool no_cause = false;
};

struct HoldTransition {
  HoldState to = HoldState::kHeld;
  HoldEnd end = HoldEnd::kStillConnected;  // when `to` is kEnded (kAwaitingLog: the counters')
  EndEvidence evidence = EndEvidence::kNone;
};

// The transitions of the diagram above, in one place. Pure.
HoldTransition NextHoldState(HoldState from, const HoldEvidence& evidence);

// A hold whose judgement waits (kBackendEnding, kAwaitingEndCount, kSettling): what is kept of it
// and of its key's next holder, judged by how its session ended.
struct PendingHold {
  HoldState state = HoldState::kBackendEnding;
  AdvisoryKey key;
  SessionId session;
  bool exclusive = false;
  double held_at = 0;  // now() of the inventory that last saw it held
  std::string db;
  Identity holder;
  std::optional<SessionId> taken_by;  // the key's exclusive holder when it started to wait
  Identity taker;
  // kAwaitingLog: the end the counters gave, and when the wait for the log started.
  HoldEnd counters_end = HoldEnd::kCleanClose;
  EndEvidence counters_evidence = EndEvidence::kCounters;
  uint64_t log_reads_at_wait = 0;
  double log_wait_since = 0;
  // Its database's share of the interval its session ended in (null: no log, or not gone yet),
  // and the abandoned ends a later read of the counters gave it (Settle): JudgeNoCauseEnd's input
  // when the log shows no cause.
  std::shared_ptr<const AbandonedShare> share;
  int64_t late_abandoned = 0;
};

struct LostKey {
  int pid = 0;
  double backend_start = 0;
  double lost_at = 0;
  Identity holder;  // who lost it, for the takeover event
};

struct Hold;            // hold_index.h
class HoldIndex;        // hold_index.h
struct JudgedInterval;  // advisory_holds.cc

class AdvisoryHolds {
 public:
  // A key taken by another session within `takeover_window_seconds` of its loss is a takeover.
  explicit AdvisoryHolds(double takeover_window_seconds)
      : takeover_window_seconds_(takeover_window_seconds) {}
  AdvisoryHolds(const AdvisoryHolds&) = delete;
  AdvisoryHolds& operator=(const AdvisoryHolds&) = delete;

  // Judges the holds between `last_inventory` (null at first) and `cur` when `cur` is an
  // inventory; remembers the sessions of every poll. See EventTracker::Observe.
  void Observe(const std::shared_ptr<const PollData>& cur,
               const std::shared_ptr<const PollData>& last_inventory, const LockNames* names,
               Counters* counters, std::vector<Event>* events);
  // True when some hold is kSettling. See EventTracker::Settle.
  bool settling() const;
  void Settle(const std::optional<std::vector<DatabaseStats>>& later, double seconds_after_poll,
              const LockNames* names, Counters* counters, std::vector<Event>* events);
  void set_takeover_window(double seconds) { takeover_window_seconds_ = seconds; }
  // The server's log, asked first for how a holder's session ended; null: none configured.
  void set_log(std::shared_ptr<const SessionEndLog> log) { log_ = std::move(log); }

  // The state of `session`'s hold of `key` as of the last judgement (kHeld: held at its
  // inventory); nullopt when it is not tracked (never seen, or ended).
  std::optional<HoldState> StateOf(const AdvisoryKey& key, const SessionId& session) const;

 private:
  // Judges the interval `prev` to `cur`, but the holds whose evidence may still be on its way.
  void JudgeInterval(const std::shared_ptr<const PollData>& prev,
                     const std::shared_ptr<const PollData>& cur, const LockNames* names,
                     Counters* counters, std::vector<Event>* events);
  // The holds of `poll` indexed by key: those of the last judgement's `cur` are kept, not rebuilt.
  std::shared_ptr<const HoldIndex> HoldsOf(const std::shared_ptr<const PollData>& poll);
  // The holds that waited since the last judgement: ended, or kSettling.
  void JudgePendingHolds(const JudgedInterval& in, const EndJudgement& ended,
                         std::vector<PendingHold> pending, const LockNames* names,
                         Counters* counters, std::vector<Event>* events);
  // The kHeld holds of `prev`: still held, pending, or ended; the keys whose change of holder
  // waits with them go into *pending_keys.
  void JudgeHeldHolds(const JudgedInterval& in, const EndJudgement& ended, const LockNames* names,
                      Counters* counters, std::vector<Event>* events,
                      std::set<AdvisoryKey>* pending_keys);
  // One kHeld hold `h` of `key` at `prev`, with the key's holds at `cur`.
  void JudgeHeldHold(const JudgedInterval& in, const EndJudgement& ended, const AdvisoryKey& key,
                     const Hold& h, std::span<const Hold> now_held, const LockNames* names,
                     Counters* counters, std::vector<Event>* events,
                     std::set<AdvisoryKey>* pending_keys);
  // Counts one hold of `prev` that ended as `t` at once (a loss remembers its key).
  void CountEnded(const JudgedInterval& in, const AdvisoryKey& key, const Hold& h,
                  const HoldTransition& t, const LockNames* names, Counters* counters,
                  std::vector<Event>* events);
  // Counts a hold that waited and ended as `t`, with the hand-over or takeover of its key by
  // its next holder.
  void CountEndedAfterWait(const PendingHold& d, const HoldTransition& t, double now,
                           const LockNames* names, Counters* counters, std::vector<Event>* events);
  // A hold that ends as `t` or, when `t` is kAwaitingLog, starts to wait for the log at `now`.
  void EndOrAwaitLog(PendingHold d, const HoldTransition& t, double now, const LockNames* names,
                     Counters* counters, std::vector<Event>* events);
  // The kAwaitingLog holds whose session's end the log shows now, or whose wait is over, end.
  void JudgeAwaitingLog(double now, const LockNames* names, Counters* counters,
                        std::vector<Event>* events);
  // The log's final word on `session` (a cause it wrote), as the evidence of a judgement; false
  // when it has none. A disconnection line with no cause is not final: e->no_cause.
  bool AskLog(const SessionId& session, HoldEvidence* e) const;
  // How a hold whose log shows no cause ended (REQUIRES: d in kAwaitingLog, log_ set): a clean
  // close at once when no abandoned end was counted; else, once the log was read through twice
  // since the wait started (or kMaxLogWaitSeconds passed), JudgeNoCauseEnd. nullopt: wait.
  std::optional<HoldTransition> NoCauseVerdict(const PendingHold& d, double now) const;
  // Takes out of *late, the ends counted since the poll that judged the `settling` holds, those
  // that belong to other sessions: one end for each kBackendEnding session, and a fatal end for
  // each session that ends as a timeout would by the reservation horizon (when the second read
  // ran: the poll's now() plus the time since). Those sessions claim their ends at the next
  // judgement.
  void ReserveOthersEnds(const PollData& poll, const std::set<SessionId>& settling,
                         double reservation_horizon,
                         std::map<uint32_t, SessionEndDeltas>* late) const;
  // The sessions of the holds that wait for the next inventory (kBackendEnding, kAwaitingEndCount).
  PendingSessions Pending() const;
  // After a judgement: keeps, of the interval's unclaimed ends, those the kBackendEnding sessions
  // may have counted while still listed.
  void KeepEndsCountedWhileListed(const EndJudgement& ended);
  // Remembers what every poll shows of each session, for EndCauses.
  void SeeSessions(const PollData& cur);
  // After a judgement: forgets the sessions gone by `cur`, but those still pending for their late
  // end count (for at most kLateSessionEndSeconds) or whose hold waits.
  void ForgetEndedSessions(const PollData& cur);
  void SeedZeroCounters(const PollData& cur, const LockNames* names, Counters* counters);

  double takeover_window_seconds_;
  std::shared_ptr<const SessionEndLog> log_;
  // Holds in kBackendEnding, kAwaitingEndCount, kSettling or kAwaitingLog, in the order they
  // started to wait.
  std::vector<PendingHold> pending_;
  // What kSettling holds are settled against: the counters and now() of the poll that judged
  // them, and that poll (its settings, for the sessions' timeouts). The ends Settle() explained,
  // per database, not to be claimed again at the next judgement.
  struct SettleBase {
    std::vector<DatabaseStats> stats;
    std::shared_ptr<const PollData> poll;
    double now = 0;
  } settle_;
  std::map<uint32_t, SessionEndDeltas> settled_ends_;
  // The ends counted in the last judged interval that no session claimed, at most one of each kind
  // per kBackendEnding session of the database: theirs to claim at the next judgement
  // (PendingSessions::counted_while_listed).
  std::map<uint32_t, SessionEndDeltas> counted_while_listed_;
  Sightings sightings_;
  // While the session counters may predate a holder's end: the inventory lock events are judged
  // against, the now() of the first inventory that waited, and how many have waited.
  struct CounterWait {
    std::shared_ptr<const PollData> baseline;
    double since = 0;
    int waits = 0;
  } counter_wait_;
  std::map<AdvisoryKey, LostKey> lost_keys_;
  // The last judgement's `cur` and its holds indexed by key.
  std::shared_ptr<const PollData> indexed_poll_;
  std::shared_ptr<const HoldIndex> indexed_holds_;
};

}  // namespace pglock
