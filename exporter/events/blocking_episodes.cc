#include "exporter/events/blocking_episodes.h"

#include <algorithm>

#include "exporter/events/events.h"
#include "exporter/snapshot/timeouts.h"

namespace pglock {
namespace {

const Session* FindSession(const PollData& data, int pid) {
  for (const Session& s : data.sessions) {
    if (s.pid == pid) return &s;
  }
  return nullptr;
}

const LockParty* FindParty(const PollData& data, int pid, const std::string& gid) {
  for (const LockParty& p : data.lock_parties) {
    if (p.pid == pid && p.gid == gid) return &p;
  }
  return nullptr;
}

// "pid 12 waits for ShareLock on transactionid (pid 13); ...": the sessions and locks of a cycle.
std::string CycleText(const DeadlockCycle& c) {
  std::string o;
  for (const LockWaitEdge& e : c.edges) {
    if (!o.empty()) o += "; ";
    o += "pid " + std::to_string(e.waiter.id.pid) + " (" + e.waiter.id.application_name +
         ") waits for " + e.mode + " on " + e.locktype;
    if (!e.relation.empty()) o += " " + e.relation;
    if (!e.lock.empty()) o += " " + e.lock;
    o += " held by pid " + std::to_string(e.blocker.id.pid);
  }
  return o;
}

// The lock a root's waiters wait for, from the first edge out of it among the view's waits.
std::string RootLock(const TargetView& view, const LockParticipant& root) {
  for (const LockWaitEdge& w : view.lock_waits) {
    if (w.blocker.id.pid != root.id.pid || w.blocker.gid != root.gid) continue;
    if (w.locktype == "advisory" && !w.lock.empty()) return w.lock;
    return w.relation.empty() ? w.locktype : w.relation;
  }
  return "";
}

}  // namespace

void BlockingEpisodeTracker::Observe(const PollData& data, const TargetView& view,
                                     Counters* counters, std::vector<Event>* events) {
  CountDeadlocks(data, counters);
  std::set<RootKey> blocking;
  for (const BlockingRoot& r : view.all_blocking_roots) {
    if (r.blocked_pids.empty()) continue;
    const Session* s = r.root.id.pid > 0 ? FindSession(data, r.root.id.pid) : nullptr;
    const RootKey key{r.root.id.pid, s != nullptr ? s->backend_start : 0.0, r.root.gid};
    blocking.insert(key);
    See(data, r, key);
    if (std::string lock = RootLock(view, r.root); !lock.empty()) episodes_[key].lock = lock;
  }
  Judge(data, blocking, counters, events);
  SeeCycles(data, view, events);
  postmaster_start_ = data.postmaster_start;
}

EpisodeTrackerSaved BlockingEpisodeTracker::Save() const {
  EpisodeTrackerSaved s;
  for (const auto& [key, e] : episodes_) {
    s.episodes.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), e});
  }
  for (const auto& [datid, stats] : last_stats_) s.last_stats.push_back(stats);
  s.postmaster_start = postmaster_start_;
  for (const std::set<int>& c : cycles_) s.cycles.emplace_back(c.begin(), c.end());
  return s;
}

void BlockingEpisodeTracker::Restore(const EpisodeTrackerSaved& saved) {
  episodes_.clear();
  for (const SavedEpisode& e : saved.episodes) {
    episodes_[{e.pid, e.backend_start, e.gid}] = e.episode;
  }
  last_stats_.clear();
  for (const DatabaseStats& d : saved.last_stats) last_stats_[d.datid] = d;
  deltas_.clear();
  postmaster_start_ = saved.postmaster_start;
  cycles_.clear();
  for (const std::vector<int>& c : saved.cycles) cycles_.emplace(c.begin(), c.end());
}

void BlockingEpisodeTracker::See(const PollData& data, const BlockingRoot& r, const RootKey& key) {
  auto [it, fresh] = episodes_.try_emplace(key);
  Episode& e = it->second;
  if (fresh) e.started = data.now;
  e.state = EpisodeState::kBlocking;
  e.counters_end.reset();
  e.root = r.root;
  e.peak_blocked = std::max(e.peak_blocked, static_cast<int64_t>(r.blocked_pids.size()));
  e.longest_wait = std::max(e.longest_wait, r.longest_wait);
  e.last_seen_at = data.now;
  e.last_seen.reset();
  e.party_since.reset();
  if (const Session* s = r.root.id.pid > 0 ? FindSession(data, r.root.id.pid) : nullptr) {
    e.last_seen = *s;
  } else if (const LockParty* p = FindParty(data, r.root.id.pid, r.root.gid)) {
    e.party_since = p->since;
  }
}

void BlockingEpisodeTracker::Judge(const PollData& data, const std::set<RootKey>& blocking,
                                   Counters* counters, std::vector<Event>* events) {
  for (auto it = episodes_.begin(); it != episodes_.end();) {
    if (blocking.count(it->first) != 0) {
      ++it;
      continue;
    }
    const auto outcome = Outcome(data, &it->second);
    if (!outcome) {
      ++it;
      continue;
    }
    End(data, it->second, *outcome, counters, events);
    it = episodes_.erase(it);
  }
}

std::optional<EpisodeEnd> BlockingEpisodeTracker::Outcome(const PollData& data, Episode* e) {
  const bool restarted = postmaster_start_ != 0 && data.postmaster_start != postmaster_start_;
  if (restarted) {
    return EpisodeEnd{EventOutcome::kRootEnded, CauseOf(HoldEnd::kServerRestart),
                      EndEvidence::kRestart};
  }
  if (!e->last_seen) {
    // A prepared transaction or a background process: still listed with the same state since
    // means it let nothing go.
    const LockParty* p = FindParty(data, e->root.id.pid, e->root.gid);
    if (p != nullptr && e->party_since && p->since == e->party_since) {
      return EpisodeEnd{EventOutcome::kWaitersLeft, EventCause::kNone, EndEvidence::kNone};
    }
    return EpisodeEnd{EventOutcome::kReleased, EventCause::kNone, EndEvidence::kNone};
  }
  const Session& last = *e->last_seen;
  const Session* now = FindSession(data, last.pid);
  if (now != nullptr && now->backend_start == last.backend_start) {
    const bool same = now->xact_start == last.xact_start && now->state_change == last.state_change;
    return EpisodeEnd{same ? EventOutcome::kWaitersLeft : EventOutcome::kReleased,
                      EventCause::kNone, EndEvidence::kNone};
  }
  return RootEnded(data, e);
}

std::optional<EpisodeEnd> BlockingEpisodeTracker::RootEnded(const PollData& data, Episode* e) {
  const Session& last = *e->last_seen;
  SessionEndDeltas d;
  const auto delta = deltas_.find(last.datid);
  if (delta != deltas_.end()) {
    d = {delta->second.sessions_fatal, delta->second.sessions_killed,
         delta->second.sessions_abandoned};
  }
  const auto keep_rest = [&] {
    if (delta == deltas_.end()) return;
    delta->second.sessions_fatal = d.fatal;
    delta->second.sessions_killed = d.killed;
    delta->second.sessions_abandoned = d.abandoned;
  };
  if (log_ != nullptr && !e->share) {
    AbandonedShare share;
    share.datid = last.datid;
    share.datname = last.datname;
    share.from = e->last_seen_at;
    share.counted = data.database_stats.has_value();
    share.abandoned = d.abandoned;
    share.gone = {{last.pid, last.backend_start}};
    e->share = std::move(share);
  }
  // The server's log first: the root's own end, with its SQLSTATE.
  const auto logged = log_ ? log_->EndOf({last.pid, last.backend_start}) : std::nullopt;
  if (logged == HoldEnd::kCleanClose) {
    std::optional<EpisodeEnd> end = NoCauseRootEnded(data, e, &d);
    keep_rest();
    return end;
  }
  if (logged) {
    TakeLoggedEnd(*logged, &d);
    keep_rest();
    return EpisodeEnd{EventOutcome::kRootEnded, CauseOf(*logged), EndEvidence::kLog};
  }
  const bool counted = data.database_stats.has_value();
  const EndEvidence evidence = counted ? EndEvidence::kCounters : EndEvidence::kTiming;
  if (e->state == EpisodeState::kEnding && e->counters_end) {
    return EpisodeEnd{EventOutcome::kRootEnded, CauseOf(*e->counters_end), evidence};
  }
  // By how, from this poll's counted ends in its database.
  const double iitt = EffectiveTimeout("idle_in_transaction_session_timeout", last.datid,
                                       last.usesysid, data.settings, data.overrides);
  const double ist = EffectiveTimeout("idle_session_timeout", last.datid, last.usesysid,
                                      data.settings, data.overrides);
  const HoldEnd end = InferEnd(last, e->last_seen_at, data.now, iitt, ist, &d, counted);
  keep_rest();
  if (e->state == EpisodeState::kBlocking) {
    // An ending backend counts its end before it leaves pg_stat_activity: a poll between the two
    // reads sees it gone with nothing counted, and its count shows at the next poll. A log that
    // is read may show the end by then, whatever the counters say now.
    const bool log_awaited = log_ != nullptr && log_->readable();
    if (log_awaited || (end == HoldEnd::kCleanClose && counted)) {
      e->state = EpisodeState::kEnding;
      if (end != HoldEnd::kCleanClose) e->counters_end = end;
      return std::nullopt;
    }
  }
  return EpisodeEnd{EventOutcome::kRootEnded, CauseOf(end), evidence};
}

std::optional<EpisodeEnd> BlockingEpisodeTracker::NoCauseRootEnded(const PollData& data, Episode* e,
                                                                   SessionEndDeltas* d) {
  AbandonedShare& share = *e->share;
  share.to = data.now;
  // A poll on, so that a count that came after the first poll's read, and the lines of the
  // interval's other ends, are in.
  if (e->state == EpisodeState::kBlocking) {
    e->state = EpisodeState::kEnding;
    return std::nullopt;
  }
  share.abandoned += d->abandoned;
  const HoldEnd end = JudgeNoCauseEnd(share, *log_);
  if (end == HoldEnd::kConnectionLost) ClaimAbandoned(d);
  const EndEvidence evidence = share.counted ? EndEvidence::kLogAndCounters : EndEvidence::kLog;
  return EpisodeEnd{EventOutcome::kRootEnded, CauseOf(end), evidence};
}

void BlockingEpisodeTracker::End(const PollData& data, const Episode& e, const EpisodeEnd& end,
                                 Counters* counters, std::vector<Event>* events) const {
  const EventOutcome outcome = end.outcome;
  const double duration = std::max(0.0, data.now - e.started);
  const std::string db = e.root.datname;
  // A database's outcomes appear with its first ended episode, all three at once: increase() then
  // sees the first of each other outcome (it cannot see this one, which appears at 1).
  if (counters->blocking_episodes.count({db, EventOutcomeName(outcome)}) == 0) {
    for (const EventOutcome o : kEpisodeOutcomes) {
      counters->blocking_episodes[{db, EventOutcomeName(o)}] += 0;
    }
  }
  counters->blocking_episodes[{db, EventOutcomeName(outcome)}] += 1;
  counters->episode_seconds.Observe(duration, kEpisodeSecondsBuckets);
  counters->episode_peak_blocked.Observe(static_cast<double>(e.peak_blocked), kEpisodePeakBuckets);
  if (events == nullptr) return;
  Event ev;
  ev.time = data.now;
  ev.kind = EventKind::kBlockingEpisode;
  ev.outcome = outcome;
  ev.cause = end.cause;
  ev.evidence = end.evidence;
  ev.datname = db;
  ev.lock = e.lock;
  ev.previous = e.root.id;
  if (e.root.id.pid == 0) ev.previous_holder = "prepared transaction " + e.root.gid;
  if (e.root.backend_type != "client backend" && e.root.id.pid != 0) {
    ev.previous_holder = e.root.backend_type;
  }
  ev.started = e.started;
  ev.duration = duration;
  ev.peak_blocked = e.peak_blocked;
  ev.longest_wait = e.longest_wait;
  events->push_back(std::move(ev));
}

void BlockingEpisodeTracker::CountDeadlocks(const PollData& data, Counters* counters) {
  deltas_.clear();
  if (!data.database_stats) return;
  const bool restarted = postmaster_start_ != 0 && data.postmaster_start != postmaster_start_;
  for (const DatabaseStats& d : *data.database_stats) {
    const auto it = last_stats_.find(d.datid);
    if (it != last_stats_.end()) {
      // Counters reset with a restart (or pg_stat_reset): what is there now is new.
      const bool reset = restarted || d.deadlocks < it->second.deadlocks;
      const int64_t n = reset ? d.deadlocks : d.deadlocks - it->second.deadlocks;
      // A database's series appears with its first deadlock: an idle database adds none.
      if (n > 0) counters->deadlocks[d.datname] += static_cast<double>(n);
      DatabaseStats delta = d;
      const auto since = [&](int64_t now, int64_t before) {
        return reset || now < before ? now : now - before;
      };
      delta.sessions_fatal = since(d.sessions_fatal, it->second.sessions_fatal);
      delta.sessions_killed = since(d.sessions_killed, it->second.sessions_killed);
      delta.sessions_abandoned = since(d.sessions_abandoned, it->second.sessions_abandoned);
      deltas_[d.datid] = delta;
    }
    last_stats_[d.datid] = d;
  }
}

void BlockingEpisodeTracker::SeeCycles(const PollData& data, const TargetView& view,
                                       std::vector<Event>* events) {
  std::set<std::set<int>> now;
  for (const DeadlockCycle& c : view.deadlock_cycles) {
    if (c.edges.empty()) continue;
    std::set<int> pids;
    for (const LockWaitEdge& e : c.edges) pids.insert(e.waiter.id.pid);
    // With the server's log read, its 40P01 line makes the deadlock's event, with every process
    // and query: a cycle a poll caught in deadlock_timeout is not a second one.
    const bool logged = log_ != nullptr && log_->readable();
    if (cycles_.count(pids) == 0 && events != nullptr && !logged) {
      Event ev;
      ev.time = data.now;
      ev.kind = EventKind::kDeadlock;
      ev.datname = c.edges.front().datname;
      ev.previous = c.edges.front().waiter.id;
      ev.current = c.edges.front().blocker.id;
      ev.detail = CycleText(c);
      events->push_back(std::move(ev));
    }
    now.insert(std::move(pids));
  }
  cycles_ = std::move(now);
}

}  // namespace pglock
