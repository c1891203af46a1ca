#include "exporter/events/session_ends.h"

#include <algorithm>
#include <cmath>
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
  EndParties(const PollData& prev, const PollData& cur, const PendingSessions& pending)
      : deferred(pending.all), awaited(pending.awaited) {
    for (const Session& s : cur.sessions) alive.insert({s.pid, s.backend_start});
    std::optional<PollIndex> built;
    const PollIndex& prev_index = IndexOf(prev, &built);
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
  std::set<SessionId> holders;          // held a lock at `prev`, or a hold pending since
  const std::set<SessionId>& deferred;  // of the holds pending since the last judgement
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

// Per database with a session gone in the interval, what JudgeNoCauseEnd needs: the abandoned
// ends counted in it (less those settled before; plus those counted while an ending session was
// still listed, kept for it) and every session a poll saw go.
std::map<uint32_t, std::shared_ptr<const AbandonedShare>> SharesOf(
    const PollData& prev, const PollData& cur, const Gone& gone, bool deltas_known,
    const std::map<uint32_t, SessionEndDeltas>& deltas,
    const std::map<uint32_t, SessionEndDeltas>& counted_while_listed) {
  std::map<uint32_t, AbandonedShare> shares;
  std::optional<PollIndex> cur_built, prev_built;
  const PollIndex& cur_index = IndexOf(cur, &cur_built);
  const PollIndex& prev_index = IndexOf(prev, &prev_built);
  for (const auto* entry : gone) {
    const uint32_t datid = entry->second.datid;
    auto [it, added] = shares.try_emplace(datid);
    AbandonedShare& share = it->second;
    share.gone.push_back(entry->first);
    if (!added) continue;
    share.datid = datid;
    share.datname = cur_index.Datname(datid);
    if (share.datname.empty()) share.datname = prev_index.Datname(datid);
    share.from = prev.now;
    share.to = cur.now;
    share.counted = deltas_known;
    if (const auto d = deltas.find(datid); d != deltas.end()) share.abandoned = d->second.abandoned;
    if (const auto k = counted_while_listed.find(datid); k != counted_while_listed.end()) {
      share.abandoned += k->second.abandoned;
    }
  }
  std::map<uint32_t, std::shared_ptr<const AbandonedShare>> out;
  for (auto& [datid, share] : shares) {
    out[datid] = std::make_shared<const AbandonedShare>(std::move(share));
  }
  return out;
}

// The log's session key: pid and backend start in whole seconds.
std::pair<int, int64_t> LogKey(const SessionId& s) {
  return {s.first, static_cast<int64_t>(std::floor(s.second))};
}

}  // namespace

HoldEnd ClaimAbandoned(SessionEndDeltas* deltas, bool deltas_known) {
  if (!deltas_known || deltas->abandoned <= 0) return HoldEnd::kCleanClose;
  --deltas->abandoned;
  return HoldEnd::kConnectionLost;
}

HoldEnd DecideNoCauseEnd(int64_t abandoned, int64_t lost_logged, int64_t no_cause) {
  const int64_t left = abandoned - lost_logged;
  if (left <= 0) return HoldEnd::kCleanClose;
  if (left == no_cause) return HoldEnd::kConnectionLost;
  return HoldEnd::kUndetermined;
}

HoldEnd JudgeNoCauseEnd(const AbandonedShare& share, const SessionEndLog& log) {
  if (!share.counted || share.abandoned <= 0) return HoldEnd::kCleanClose;
  // Each session once: those a poll saw by what the log shows of them now (nothing yet counts as
  // no cause: it may be the vanished one), then those only the log shows.
  std::map<std::pair<int, int64_t>, std::optional<HoldEnd>> ended;
  for (const SessionId& s : share.gone) ended[LogKey(s)] = log.EndOf(s);
  for (const LoggedSessionEnd& e :
       log.EndsLoggedBetween(share.datname, share.from - kLogTimeResolutionSeconds,
                             share.to + kNoCauseLogSlackSeconds)) {
    ended[LogKey(e.session)] = e.end;
  }
  int64_t lost_logged = 0, no_cause = 0;
  for (const auto& [key, end] : ended) {
    if (!end || *end == HoldEnd::kCleanClose) {
      ++no_cause;
    } else if (*end == HoldEnd::kConnectionLost) {
      ++lost_logged;
    }
  }
  return DecideNoCauseEnd(share.abandoned, lost_logged, no_cause);
}

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
    case HoldEnd::kUndetermined:  // never the log's word
      return false;
  }
  if (*kind <= 0) return false;
  --*kind;
  return true;
}

namespace {

// The log's word on a gone session: a cause takes its counted end (one counted while it was
// listed, `listed`, first), so that the counters explain the other sessions only. No cause (its
// disconnection line alone): a clean close or a vanished client; a holder takes an abandoned end
// for now, and JudgeNoCauseEnd decides against its database's share.
void TakeLogsWord(HoldEnd logged, const SessionId& sid, bool holder, bool ending, bool deltas_known,
                  SessionEndDeltas* listed, SessionEndDeltas* deltas, EndJudgement* out) {
  if (logged == HoldEnd::kCleanClose) {
    if (!holder) return;
    out->causes[sid] =
        ClaimAbandoned(ending && listed->abandoned > 0 ? listed : deltas, deltas_known);
    out->no_cause.insert(sid);
    return;
  }
  if (!ending || !TakeLoggedEnd(logged, listed)) TakeLoggedEnd(logged, deltas);
  if (holder) {
    out->causes[sid] = logged;
    out->logged.insert(sid);
  }
}

}  // namespace

EndJudgement EndCauses(const PollData& prev, const PollData& cur, const PendingSessions& pending,
                       const std::map<uint32_t, SessionEndDeltas>& settled, Sightings* sightings,
                       const SessionEndLog* log) {
  EndJudgement out;
  const EndParties parties(prev, cur, pending);
  const bool deltas_known = cur.database_stats.has_value() && prev.database_stats.has_value();
  out.unlogged_evidence = deltas_known ? EndEvidence::kCounters : EndEvidence::kTiming;
  std::map<uint32_t, SessionEndDeltas> deltas = EndDeltasSince(prev, cur, settled);
  const Gone gone = GoneInClaimOrder(parties, sightings);
  if (log != nullptr) {
    out.shares = SharesOf(prev, cur, gone, deltas_known, deltas, pending.counted_while_listed);
  }
  // Those whose idle time matches a timeout claim the 'fatal' deltas first, lock holders or not: a
  // server that reaps idle sessions counts a fatal end for each, and those must not be pinned on
  // a holder that closed its session cleanly.
  std::vector<std::pair<SessionId, uint32_t>> undecided;  // holders without a timeout match
  std::vector<SessionId> candidates;  // holders that match a timeout whose count is not seen yet
  std::map<uint32_t, SessionEndDeltas> counted_while_listed = pending.counted_while_listed;
  for (auto* entry : gone) {
    const SessionId& sid = entry->first;
    SessionSighting& seen = entry->second;
    const std::optional<HoldEnd> timeout = TimeoutMatch(seen, cur.now, prev);
    const bool holder = parties.holders.count(sid) != 0;
    if (const std::optional<HoldEnd> logged = log ? log->EndOf(sid) : std::nullopt) {
      seen.awaiting_end.reset();
      TakeLogsWord(*logged, sid, holder, pending.ending.count(sid) != 0, deltas_known,
                   &counted_while_listed[seen.datid], &deltas[seen.datid], &out);
      continue;
    }
    if (pending.ending.count(sid) != 0) {
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
