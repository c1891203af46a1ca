// How a session that held a lock ended, from the evidence two polls leave: what was last seen of
// it (idle since when, under which timeouts) and the session end counters of its database
// (pg_stat_database sessions_fatal / _killed / _abandoned, PostgreSQL 14+). Each counted
// abnormal end explains one session only; sessions that end as a timeout would claim the fatal
// ends first, those holding nothing before lock holders, so that a server reaping idle sessions
// cannot make a holder's clean close page. Pure functions over their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/session_end.h"

namespace pglock {

// Seconds of slack when deciding that a session was idle long enough for its timeout to fire.
inline constexpr double kTimeoutSlackSeconds = 1.0;
// How long a session that ended as a timeout would end it, but whose end the session counters do
// not show yet, waits to claim its late count (a poll may fall between the two reads an exit spans;
// on PostgreSQL 14 the counters may also be up to 500 ms old).
inline constexpr double kLateSessionEndSeconds = 10.0;
// The abnormal session ends of one database not explained yet.
struct SessionEndDeltas {
  int64_t fatal = 0;
  int64_t killed = 0;
  int64_t abandoned = 0;
};

// A delta of a cumulative counter; a decrease is a reset, the new value counts from zero.
inline int64_t CounterDelta(int64_t prev, int64_t cur) { return cur >= prev ? cur - prev : cur; }

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
using Sightings = std::map<SessionId, SessionSighting>;

// How a session that held a lock ended, from what was last seen of it and the counter deltas of its
// database: kCleanClose (a release), else the cause of the loss. Each abnormal end explains one
// session (the delta is consumed). deltas_known is false before PostgreSQL 14 (no session
// counters).
HoldEnd InferEnd(const Session& last_seen, double last_poll_now, double cur_poll_now,
                 double idle_in_transaction_timeout, double idle_session_timeout,
                 SessionEndDeltas* deltas, bool deltas_known);

// The cause of a session end that no timeout explains, consuming the delta that explains it
// (kCleanClose: none left).
HoldEnd ClaimEnd(SessionEndDeltas* deltas, bool deltas_known = true);
// The same for a session whose idle time matches `timeout` (nullopt: none): that timeout when a
// fatal end is left, else any abnormal end, in the order InferEnd gives them.
HoldEnd ClaimEnd(const std::optional<HoldEnd>& timeout, SessionEndDeltas* deltas);

// kIdleInTransactionTimeout / kIdleSessionTimeout when the session, last seen idle (in
// transaction) at last_poll_now, would have reached that timeout by cur_poll_now (with
// kTimeoutSlackSeconds of slack); else nullopt.
std::optional<HoldEnd> TimeoutMatch(const Session& last_seen, double last_poll_now,
                                    double cur_poll_now, double idle_in_transaction_timeout,
                                    double idle_session_timeout);
// The same for a sighting, under the timeouts `poll` gives its database and role.
std::optional<HoldEnd> TimeoutMatch(const SessionSighting& seen, double cur_poll_now,
                                    const PollData& poll);

// Deltas of the session end counters per database from `before` to `after`; only databases in
// both.
std::map<uint32_t, SessionEndDeltas> EndDeltasBetween(const std::vector<DatabaseStats>& before,
                                                      const std::vector<DatabaseStats>& after);

// Sessions whose log shows no cause (a disconnection line, no FATAL, no "unexpected EOF") ended
// cleanly or vanished: the log cannot tell them apart, the abandoned count of their database can,
// when it is 0 or when it accounts for every such end of the interval. What that needs, for one
// database and one interval (two polls' now()):
struct AbandonedShare {
  uint32_t datid = 0;
  std::string datname;
  double from = 0;
  double to = 0;
  bool counted = false;         // the server has sessions_abandoned (14+)
  int64_t abandoned = 0;        // counted in the interval, less the ends settled before it
  std::vector<SessionId> gone;  // its sessions a poll saw and the interval ended, holders or not
};

// How far past an interval's end a session whose end it counted may have logged its disconnection
// line: the line comes after the count in the same exit (milliseconds), while the poll's now() is
// its transaction's start, before it reads the counters. Its start needs no such slack (an end
// counted after the earlier poll's read was logged after its now()) but the log's millisecond.
inline constexpr double kNoCauseLogSlackSeconds = 1.0;
inline constexpr double kLogTimeResolutionSeconds = 0.001;

// The counters' word on a session whose log shows no cause: an abandoned end of its database if
// one is left (it takes it), else a clean close. Never killed or fatal: the log rules those out.
HoldEnd ClaimAbandoned(SessionEndDeltas* deltas, bool deltas_known = true);

// The pure decision, for one database and interval: `abandoned` ends counted; of the sessions that
// ended in it, `lost_logged` have their lost connection in the log (08P01, 08006: they took one
// each) and `no_cause` show no cause (their disconnection line, or nothing yet). None left:
// kCleanClose. As many left as no-cause ends: every one vanished, kConnectionLost (exact: one
// such end in the interval). Else the count cannot say which: kUndetermined.
HoldEnd DecideNoCauseEnd(int64_t abandoned, int64_t lost_logged, int64_t no_cause);

// How a session of `share.gone` whose log shows no cause ended: its database's sessions that
// ended in the interval, those the log shows (a poll saw them or not) and those a poll saw go whose
// lines are not read yet, given to DecideNoCauseEnd. Before 14 (no abandoned count): kCleanClose,
// as every end that is neither a timeout nor a restart there.
HoldEnd JudgeNoCauseEnd(const AbandonedShare& share, const SessionEndLog& log);

// The sessions whose hold judgement waits (advisory_holds.h): those that still take part in
// explaining the next interval's ends.
struct PendingSessions {
  std::set<SessionId> all;      // every session of a hold that waits
  std::set<SessionId> awaited;  // of those, gone as a timeout would end them, count not seen yet
  std::set<SessionId> ending;   // of those, kBackendEnding: lock gone while still listed
  // Per database, the ends counted in the interval in which the `ending` sessions' locks went
  // that no session gone in that interval claimed. A backend counts its end before it leaves
  // pg_stat_activity: a poll can see the end counted and the session still listed, and the next
  // interval then counts nothing for it. Only the `ending` sessions claim these, first.
  std::map<uint32_t, SessionEndDeltas> counted_while_listed;
};

// How the lock holders of an interval ended.
struct EndJudgement {
  std::map<SessionId, HoldEnd> causes;  // of the holders at `prev` gone at `cur`
  // Of those, the causes the server's log gave; the rest are the counters' word (kCounters), or
  // the timing alone before PostgreSQL 14 (kTiming).
  std::set<SessionId> logged;
  EndEvidence unlogged_evidence = EndEvidence::kCounters;
  // Holders at `prev` that ended as a timeout would, their end not counted yet (not those waiting
  // already: a backend counts its end before it leaves, so one interval is enough).
  std::set<SessionId> pending;
  // Per database, the ends of the interval that no session claimed.
  std::map<uint32_t, SessionEndDeltas> unclaimed;
  // Holders gone whose log shows no cause: their cause above is the counters' (an abandoned end
  // or none); JudgeNoCauseEnd gives the final one, against their database's share.
  std::set<SessionId> no_cause;
  // Per database with a session gone in the interval: what JudgeNoCauseEnd needs.
  std::map<uint32_t, std::shared_ptr<const AbandonedShare>> shares;
};

// How each session that held a lock at `prev` (or whose hold is pending: `pending`) and is gone at
// `cur` ended: kCleanClose, else the cause of the loss. The server's `log` (may be null) is asked
// first: a session whose end it shows takes that cause, and the counted end of its kind if one is
// left, so that the counters explain the other sessions only. `settled` are the ends already given
// to a holder judged at `prev` (not claimed again). `sightings` holds the last sight of every
// session seen since `prev` (and of those ended earlier that still wait for their end count); those
// that ended as a timeout would, but whose database shows no fatal end for them yet, are marked as
// waiting for it.
EndJudgement EndCauses(const PollData& prev, const PollData& cur, const PendingSessions& pending,
                       const std::map<uint32_t, SessionEndDeltas>& settled, Sightings* sightings,
                       const SessionEndLog* log = nullptr);

// Takes the counted end that a session whose end the log gave as `end` left in *deltas, when one
// of its kind is there (terminated: killed; connection lost: abandoned; a timeout or an unknown
// end: fatal; a clean close or a restart: none). True when one was taken.
bool TakeLoggedEnd(HoldEnd end, SessionEndDeltas* deltas);

}  // namespace pglock
