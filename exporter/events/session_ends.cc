#include "exporter/events/session_ends.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "exporter/snapshot/poll_index.h"
#include "exporter/snapshot/timeouts.h"

namespace pglock {

HoldEnd ClaimEnd(const std::optional<HoldEnd>& timeout, SessionEndDeltas* deltas) {
  if (timeout && deltas->fatal > 0) {
    --deltas->fatal;
    return *timeout;
  }
  if (deltas->killed > 0) {
    --deltas->killed;
    return HoldEnd::kTerminated;
  }
  if (deltas->abandoned > 0) {
    --deltas->abandoned;
    return HoldEnd::kConnectionLost;
  }
  if (deltas->fatal > 0) {
    --deltas->fatal;
    return HoldEnd::kUnknown;
  }
  return HoldEnd::kCleanClose;  // no abnormal end was counted: the client closed its session
}

HoldEnd InferEnd(const Session& last_seen, double last_poll_now, double cur_poll_now,
                 double idle_in_transaction_timeout, double idle_session_timeout,
                 SessionEndDeltas* deltas, bool deltas_known) {
  const std::optional<HoldEnd> timeout = TimeoutMatch(
      last_seen, last_poll_now, cur_poll_now, idle_in_transaction_timeout, idle_session_timeout);
  // 12/13: without session counters only a timeout is a loss.
  if (!deltas_known) return timeout.value_or(HoldEnd::kCleanClose);
  return ClaimEnd(timeout, deltas);
}

HoldEnd ClaimEnd(SessionEndDeltas* deltas, bool deltas_known) {
  return deltas_known ? ClaimEnd(std::nullopt, deltas) : HoldEnd::kCleanClose;
}

std::optional<HoldEnd> TimeoutMatch(const Session& last_seen, double last_poll_now,
                                    double cur_poll_now, double idle_in_transaction_timeout,
                                    double idle_session_timeout) {
  // Idle time the session would have reached by the current poll had it stayed idle.
  if (!last_seen.state_change) return std::nullopt;
  const double idle_by_now = (last_poll_now - *last_seen.state_change) +
                             (cur_poll_now - last_poll_now) + kTimeoutSlackSeconds;
  if (last_seen.IdleInTransaction() && idle_in_transaction_timeout > 0 &&
      idle_by_now >= idle_in_transaction_timeout) {
    return HoldEnd::kIdleInTransactionTimeout;
  }
  if (last_seen.state == "idle" && idle_session_timeout > 0 &&
      idle_by_now >= idle_session_timeout) {
    return HoldEnd::kIdleSessionTimeout;
  }
  return std::nullopt;
}

std::optional<HoldEnd> TimeoutMatch(const SessionSighting& seen, double cur_poll_now,
                                    const PollData& poll) {
  Session last;
  last.state = seen.state;
  last.state_change = seen.state_change;
  const double iit = EffectiveTimeout("idle_in_transaction_session_timeout", seen.datid,
                                      seen.usesysid, poll.settings, poll.overrides);
  const double idle = EffectiveTimeout("idle_session_timeout", seen.datid, seen.usesysid,
                                       poll.settings, poll.overrides);
  return TimeoutMatch(last, seen.seen_at, cur_poll_now, iit, idle);
}

namespace {

SessionEndDeltas DeltasOf(const DatabaseStats& before, const DatabaseStats& after) {
  return {CounterDelta(before.sessions_fatal, after.sessions_fatal),
          CounterDelta(before.sessions_killed, after.sessions_killed),
          CounterDelta(before.sessions_abandoned, after.sessions_abandoned)};
}

// Deltas of the session end counters per database from the inventory `prev` to `cur`, less the
// ends that Settle() already gave to a holder judged at `prev`; empty before PostgreSQL 14.
std::map<uint32_t, SessionEndDeltas> EndDeltasSince(
    const PollData& prev, const PollData& cur,
    const std::map<uint32_t, SessionEndDeltas>& settled) {
  std::map<uint32_t, SessionEndDeltas> deltas;
  if (!cur.database_stats || !prev.database_stats) return deltas;
  std::map<uint32_t, const DatabaseStats*> before;
  for (const DatabaseStats& d : *prev.database_stats) before[d.datid] = &d;
  for (const DatabaseStats& d : *cur.database_stats) {
    const auto it = before.find(d.datid);
    const DatabaseStats p = it == before.end() ? d : *it->second;
    SessionEndDeltas delta = DeltasOf(p, d);
    // Ends that Settle() already gave to a holder judged at `prev` (unless the counters were
    // reset since: those ends are not in the delta then).
    if (const auto s = settled.find(d.datid); s != settled.end()) {
      const auto less = [](int64_t delta, int64_t given, bool reset) {
        return reset ? delta : std::max<int64_t>(0, delta - given);
      };
      delta.fatal = less(delta.fatal, s->second.fatal, d.sessions_fatal < p.sessions_fatal);
      delta.killed = less(delta.killed, s->second.killed, d.sessions_killed < p.sessions_killed);
      delta.abandoned =
          less(delta.abandoned, s->second.abandoned, d.sessions_abandoned < p.sessions_abandoned);
    }
    deltas[d.datid] = delta;
  }
  return deltas;
}

// The sessions that take part in explaining an interval's session ends.
struct EndParties {
  EndParties(const PollData& prev, const PollData& cur, const WaitingSessions& waiting)
      : deferred(waiting.all), awaited(waiting.awaited) {
    for (const Session& s : cur.sessions) alive.insert({s.pid, s.backend_start});
    const PollIndex prev_index(prev);
    std::optional<int> last_pid;  // a session's locks come in runs: one insert per run
    for (const AdvisoryLock& l : prev.locks) {
      if (!l.granted || last_pid == l.pid) continue;
      last_pid = l.pid;
      const Session* s = prev_index.Find(l.pid);
      holders.insert({l.pid, s != nullptr ? s->backend_start : 0});
    }
    holders.insert(deferred.begin(), deferred.end());
  }

  std::set<SessionId> alive;            // listed at `cur`
  std::set<SessionId> holders;          // held a lock at `prev`, or a hold waiting since
  const std::set<SessionId>& deferred;  // of the holds waiting since the last judgement
  const std::set<SessionId>& awaited;   // of those, waiting for their late end count
};

using Gone = std::vector<std::pair<const SessionId, SessionSighting>*>;

// Every session seen and gone at `cur`, in the order they claim the fatal ends: lock holders
// last, whether they wait for a late count or not: a holder that waits for its own count since an
// earlier inventory would otherwise take the count of a session reaped since (its own is counted
// before it leaves, not a poll later), and when a holder and a session holding nothing both match
// a timeout for one count, a clean close must not page. Within each, those that waited for a late
// count first.
Gone GoneInClaimOrder(const EndParties& parties, Sightings* sightings) {
  Gone gone;
  for (auto& entry : *sightings) {
    if (parties.alive.count(entry.first) == 0) gone.push_back(&entry);
  }
  const auto rank = [&](const auto* e) {
    return (parties.holders.count(e->first) != 0 ? 2 : 0) + (e->second.awaiting_end ? 0 : 1);
  };
  std::stable_sort(gone.begin(), gone.end(),
                   [&](const auto* a, const auto* b) { return rank(a) < rank(b); });
  return gone;
}

}  // namespace

std::map<uint32_t, SessionEndDeltas> EndDeltasBetween(const std::vector<DatabaseStats>& before,
                                                      const std::vector<DatabaseStats>& after) {
  std::map<uint32_t, SessionEndDeltas> late;
  std::map<uint32_t, const DatabaseStats*> base;
  for (const DatabaseStats& d : before) base[d.datid] = &d;
  for (const DatabaseStats& d : after) {
    const auto it = base.find(d.datid);
    if (it != base.end()) late[d.datid] = DeltasOf(*it->second, d);
  }
  return late;
}

bool TakeLoggedEnd(HoldEnd end, SessionEndDeltas* deltas) {
  int64_t* kind = nullptr;
  switch (end) {
    case HoldEnd::kTerminated:
      kind = &deltas->killed;
      break;
    case HoldEnd::kConnectionLost:
      kind = &deltas->abandoned;
      break;
    case HoldEnd::kIdleInTransactionTimeout:
    case HoldEnd::kIdleSessionTimeout:
    case HoldEnd::kTransactionTimeout:
    case HoldEnd::kUnknown:
      kind = &deltas->fatal;
      break;
    case HoldEnd::kStillConnected:
    case HoldEnd::kCleanClose:
    case HoldEnd::kServerRestart:
      return false;
  }
  if (*kind <= 0) return false;
  --*kind;
  return true;
}

EndJudgement EndCauses(const PollData& prev, const PollData& cur, const WaitingSessions& waiting,
                       const std::map<uint32_t, SessionEndDeltas>& settled, Sightings* sightings,
                       const SessionEndLog* log) {
  EndJudgement out;
  const EndParties parties(prev, cur, waiting);
  const bool deltas_known = cur.database_stats.has_value() && prev.database_stats.has_value();
  out.unlogged_evidence = deltas_known ? EndEvidence::kCounters : EndEvidence::kTiming;
  std::map<uint32_t, SessionEndDeltas> deltas = EndDeltasSince(prev, cur, settled);
  // Those whose idle time matches a timeout claim the 'fatal' deltas first, lock holders or not: a
  // server that reaps idle sessions counts a fatal end for each, and those must not be pinned on
  // a holder that closed its session cleanly.
  std::vector<std::pair<SessionId, uint32_t>> undecided;  // holders without a timeout match
  std::vector<SessionId> candidates;  // holders that match a timeout whose count is not seen yet
  std::map<uint32_t, SessionEndDeltas> counted_while_listed = waiting.counted_while_listed;
  for (auto* entry : GoneInClaimOrder(parties, sightings)) {
    const SessionId& sid = entry->first;
    SessionSighting& seen = entry->second;
    const std::optional<HoldEnd> timeout = TimeoutMatch(seen, cur.now, prev);
    const bool holder = parties.holders.count(sid) != 0;
    if (const std::optional<HoldEnd> logged = log ? log->EndOf(sid) : std::nullopt) {
      // The log's word; its counted end (one counted while it was listed first) is no longer
      // there to explain anyone else's.
      if (waiting.ending.count(sid) == 0 ||
          !TakeLoggedEnd(*logged, &counted_while_listed[seen.datid])) {
        TakeLoggedEnd(*logged, &deltas[seen.datid]);
      }
      seen.awaiting_end.reset();
      if (holder) {
        out.causes[sid] = *logged;
        out.logged.insert(sid);
      }
      continue;
    }
    if (waiting.ending.count(sid) != 0) {
      // Its own end when one was counted while it was still listed.
      const HoldEnd own = ClaimEnd(timeout, &counted_while_listed[seen.datid]);
      if (own != HoldEnd::kCleanClose) {
        seen.awaiting_end.reset();
        out.causes[sid] = own;
        continue;
      }
    }
    SessionEndDeltas& d = deltas[seen.datid];
    if (timeout && (!deltas_known || d.fatal > 0)) {
      if (deltas_known) --d.fatal;
      seen.awaiting_end.reset();
      if (holder) out.causes[sid] = *timeout;
    } else if (timeout) {
      if (!seen.awaiting_end) seen.awaiting_end = cur.now;
      if (parties.awaited.count(sid) != 0) {
        // Its count, awaited for an interval, never came: a clean close.
        out.causes[sid] = HoldEnd::kCleanClose;
      } else if (holder) {
        if (parties.deferred.count(sid) == 0) candidates.push_back(sid);
        undecided.emplace_back(sid, seen.datid);
      }
    } else if (holder) {
      undecided.emplace_back(sid, seen.datid);
    }
  }
  for (const auto& [sid, datid] : undecided) {
    out.causes[sid] = ClaimEnd(&deltas[datid], deltas_known);
  }
  for (const SessionId& sid : candidates) {
    // No other count explains its end.
    if (out.causes[sid] == HoldEnd::kCleanClose) out.pending.insert(sid);
  }
  // A holder never seen as a session has no evidence of an abnormal end: a clean close.
  for (const SessionId& sid : parties.holders) {
    if (parties.alive.count(sid) == 0) out.causes.emplace(sid, HoldEnd::kCleanClose);
  }
  out.unclaimed = std::move(deltas);
  return out;
}

}  // namespace pglock
