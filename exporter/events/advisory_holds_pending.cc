// What becomes of an advisory hold once it is no longer seen held (advisory_holds.h): the pure
// transition function NextHoldState and the states' names, the wait for the server's log
// (kAwaitingLog: AskLog, EndOrAwaitLog, JudgeAwaitingLog), and the settlement of kSettling holds
// against a later read of the session counters (Settle, ReserveOthersEnds). Thread-compatible,
// like the class: owned by one poller's EventTracker.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "exporter/events/advisory_holds.h"

namespace pglock {

const char* HoldStateName(HoldState s) {
  switch (s) {
    case HoldState::kHeld:
      return "held";
    case HoldState::kBackendEnding:
      return "backend_ending";
    case HoldState::kAwaitingEndCount:
      return "awaiting_end_count";
    case HoldState::kSettling:
      return "settling";
    case HoldState::kAwaitingLog:
      return "awaiting_log";
    case HoldState::kEnded:
      return "ended";
  }
  return "ended";
}

HoldTransition NextHoldState(HoldState from, const HoldEvidence& e) {
  const auto ended = [](HoldEnd end, EndEvidence evidence) {
    return HoldTransition{HoldState::kEnded, end, evidence};
  };
  const bool logged = e.evidence == EndEvidence::kLog && e.session_end.has_value();
  switch (from) {
    case HoldState::kHeld:
      if (e.restarted) return ended(HoldEnd::kServerRestart, EndEvidence::kRestart);
      if (e.still_held) return {HoldState::kHeld};
      if (logged) return ended(*e.session_end, EndEvidence::kLog);
      if (e.end_count_awaited) return {HoldState::kAwaitingEndCount};
      if (e.backend_ending) return {HoldState::kBackendEnding};
      break;
    case HoldState::kBackendEnding:
    case HoldState::kAwaitingEndCount:
      if (e.restarted) return ended(HoldEnd::kServerRestart, EndEvidence::kRestart);
      break;
    case HoldState::kSettling:
      if (!e.session_end) return ended(HoldEnd::kCleanClose, EndEvidence::kCounters);
      break;
    case HoldState::kAwaitingLog:
      if (logged) return ended(*e.session_end, EndEvidence::kLog);
      if (e.log_awaited) return {HoldState::kAwaitingLog};
      // The wait is over: the counters' word, kept when the wait started.
      return ended(e.session_end.value_or(HoldEnd::kCleanClose), e.evidence);
    case HoldState::kEnded:
      return {HoldState::kEnded};
  }
  const HoldEnd end = e.session_end.value_or(HoldEnd::kStillConnected);
  if (end == HoldEnd::kStillConnected) return ended(end, EndEvidence::kNone);
  if (logged) return ended(end, EndEvidence::kLog);
  // Closed with no end counted, yet: the count may be on its way.
  if (from != HoldState::kSettling && end == HoldEnd::kCleanClose && e.can_settle) {
    return {HoldState::kSettling};
  }
  if (e.log_awaited) return {HoldState::kAwaitingLog, end, e.evidence};
  return ended(end, e.evidence);
}

bool AdvisoryHolds::AskLog(const SessionId& session, HoldEvidence* e) const {
  if (log_ == nullptr) return false;
  const std::optional<HoldEnd> end = log_->EndOf(session);
  if (!end) return false;
  if (*end == HoldEnd::kCleanClose) {
    e->no_cause = true;
    return false;
  }
  e->session_end = end;
  e->evidence = EndEvidence::kLog;
  return true;
}

namespace {

// A hold waits for the log while it is readable, until it was read through twice since the wait
// began (once may have been under way then) and kMinLogWaitSeconds passed, for the logging
// collector to have written the line; kMaxLogWaitSeconds at most.
bool StillWaitForLog(const SessionEndLog& log, const PendingHold& d, double now) {
  const double waited = now - d.log_wait_since;
  const bool read_past =
      log.reads_through() >= d.log_reads_at_wait + 2 && waited >= kMinLogWaitSeconds;
  return log.readable() && !read_past && waited < kMaxLogWaitSeconds;
}

}  // namespace

std::optional<HoldTransition> AdvisoryHolds::NoCauseVerdict(const PendingHold& d,
                                                            double now) const {
  const auto ended = [](HoldEnd end, EndEvidence evidence) {
    return HoldTransition{HoldState::kEnded, end, evidence};
  };
  // Not gone in a judged interval (its line read while it was still listed): the counters' word.
  if (d.share == nullptr) return ended(d.counters_end, d.counters_evidence);
  AbandonedShare share = *d.share;
  share.abandoned += d.late_abandoned;
  // Before 14 the log's line alone: no count to ask.
  if (!share.counted) return ended(HoldEnd::kCleanClose, EndEvidence::kLog);
  if (share.abandoned <= 0) return ended(HoldEnd::kCleanClose, EndEvidence::kLogAndCounters);
  // The other ends of the interval, those of sessions no poll saw included, must be read first.
  if (StillWaitForLog(*log_, d, now)) {
    return std::nullopt;
  }
  return ended(JudgeNoCauseEnd(share, *log_), EndEvidence::kLogAndCounters);
}

void AdvisoryHolds::EndOrAwaitLog(PendingHold d, const HoldTransition& t, double now,
                                  const LockNames* names, Counters* counters,
                                  std::vector<Event>* events) {
  if (t.to != HoldState::kAwaitingLog) {
    CountEndedAfterWait(d, t, now, names, counters, events);
    return;
  }
  d.state = HoldState::kAwaitingLog;
  d.counters_end = t.end;
  d.counters_evidence = t.evidence;
  d.log_reads_at_wait = log_->reads_through();
  d.log_wait_since = now;
  HoldEvidence e;
  if (!AskLog(d.session, &e) && e.no_cause) {
    // No abandoned end to share: decided at once.
    if (const std::optional<HoldTransition> v = NoCauseVerdict(d, now)) {
      CountEndedAfterWait(d, *v, now, names, counters, events);
      return;
    }
  }
  pending_.push_back(std::move(d));
}

void AdvisoryHolds::JudgeAwaitingLog(double now, const LockNames* names, Counters* counters,
                                     std::vector<Event>* events) {
  if (std::none_of(pending_.begin(), pending_.end(),
                   [](const PendingHold& p) { return p.state == HoldState::kAwaitingLog; })) {
    return;
  }
  std::vector<PendingHold> rest;
  for (PendingHold& d : pending_) {
    if (d.state != HoldState::kAwaitingLog) {
      rest.push_back(std::move(d));
      continue;
    }
    HoldEvidence e;
    if (!AskLog(d.session, &e) && e.no_cause) {
      const std::optional<HoldTransition> v = NoCauseVerdict(d, now);
      if (v) {
        CountEndedAfterWait(d, *v, now, names, counters, events);
      } else {
        rest.push_back(std::move(d));
      }
      continue;
    }
    if (e.evidence != EndEvidence::kLog) {
      e.session_end = d.counters_end;
      e.evidence = d.counters_evidence;
      e.log_awaited = log_ != nullptr && StillWaitForLog(*log_, d, now);
    }
    const HoldTransition t = NextHoldState(HoldState::kAwaitingLog, e);
    if (t.to == HoldState::kAwaitingLog) {
      rest.push_back(std::move(d));
    } else {
      CountEndedAfterWait(d, t, now, names, counters, events);
    }
  }
  pending_ = std::move(rest);
}

void AdvisoryHolds::ReserveOthersEnds(const PollData& poll, const std::set<SessionId>& settling,
                                      double reservation_horizon,
                                      std::map<uint32_t, SessionEndDeltas>* late) const {
  std::set<SessionId> ending;
  std::map<uint32_t, SessionEndDeltas> counted = counted_while_listed_;
  for (const PendingHold& d : pending_) {
    if (d.state == HoldState::kBackendEnding && settling.count(d.session) == 0 &&
        ending.insert(d.session).second) {
      // One end, any kind: one already counted while it was listed, else one counted since.
      if (ClaimEnd(&counted[d.key.datid]) == HoldEnd::kCleanClose) ClaimEnd(&(*late)[d.key.datid]);
    }
  }
  for (const auto& [sid, seen] : sightings_) {
    if (settling.count(sid) != 0) continue;
    if (!TimeoutMatch(seen, reservation_horizon, poll)) continue;
    SessionEndDeltas& left = (*late)[seen.datid];
    if (left.fatal > 0) --left.fatal;
  }
}

void AdvisoryHolds::Settle(const std::optional<std::vector<DatabaseStats>>& later,
                           double seconds_after_poll, const LockNames* names, Counters* counters,
                           std::vector<Event>* events) {
  if (!settling()) return;
  std::vector<PendingHold> holds, rest;
  for (PendingHold& p : pending_) {
    (p.state == HoldState::kSettling ? holds : rest).push_back(std::move(p));
  }
  pending_ = std::move(rest);
  std::shared_ptr<const PollData> poll = std::move(settle_.poll);
  settle_.poll.reset();
  // Ends counted since the poll that judged these holds, per database.
  std::map<uint32_t, SessionEndDeltas> late;
  if (later) late = EndDeltasBetween(settle_.stats, *later);
  std::set<SessionId> sessions;
  for (const PendingHold& d : holds) sessions.insert(d.session);
  if (later && poll != nullptr) {
    ReserveOthersEnds(*poll, sessions, settle_.now + seconds_after_poll, &late);
  }
  // One cause per session, for all its locks; each end explains one session, the log's word first.
  std::map<SessionId, HoldEvidence> causes;
  for (const PendingHold& d : holds) {
    if (causes.count(d.session) != 0) continue;
    SessionEndDeltas& left = late[d.key.datid];
    const SessionEndDeltas before = left;
    HoldEvidence& e = causes[d.session];
    if (AskLog(d.session, &e)) {
      TakeLoggedEnd(*e.session_end, &left);
    } else {
      // No cause in the log: only an abandoned end can be its own.
      e.session_end = e.no_cause ? ClaimAbandoned(&left) : ClaimEnd(&left);
      e.evidence = EndEvidence::kCounters;
      e.log_awaited = log_ != nullptr && log_->readable();
    }
    SessionEndDeltas& claimed = settled_ends_[d.key.datid];
    claimed.fatal += before.fatal - left.fatal;
    claimed.killed += before.killed - left.killed;
    claimed.abandoned += before.abandoned - left.abandoned;
  }
  for (PendingHold& d : holds) {
    if (causes[d.session].session_end == HoldEnd::kConnectionLost) d.late_abandoned = 1;
    const HoldTransition t = NextHoldState(HoldState::kSettling, causes[d.session]);
    EndOrAwaitLog(std::move(d), t, settle_.now, names, counters, events);
  }
}

}  // namespace pglock
