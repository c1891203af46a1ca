#include "exporter/events/events.h"

#include <algorithm>
#include <set>
#include <span>
#include <unordered_map>

#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/poll_index.h"
#include "exporter/snapshot/timeouts.h"

namespace pglock {

struct Hold {
  SessionId session;
  bool exclusive;
};

struct EndJudgement {
  std::map<SessionId, HoldEnd> causes;  // of the holders at `prev` gone at `cur`
  // Holders at `prev` that ended as a timeout would, their end not counted yet (not those deferred
  // already: a backend counts its end before it leaves, so one interval is enough).
  std::set<SessionId> pending;
};

// The granted advisory locks of a poll grouped by key, in flat sorted arrays: at 100k locks a
// std::map of vectors costs more than the rest of the poll.
class HoldIndex {
 public:
  explicit HoldIndex(const PollData& data) {
    std::unordered_map<int, double> backend_start;
    for (const Session& s : data.sessions) backend_start[s.pid] = s.backend_start;
    std::vector<std::pair<AdvisoryKey, Hold>> rows;
    rows.reserve(data.locks.size());
    for (const AdvisoryLock& l : data.locks) {
      if (!l.granted) continue;
      const auto it = backend_start.find(l.pid);
      rows.push_back({l.key, {{l.pid, it == backend_start.end() ? 0 : it->second}, l.exclusive}});
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    holds_.reserve(rows.size());
    for (const auto& [key, hold] : rows) {
      if (keys_.empty() || !(keys_.back() == key)) {
        keys_.push_back(key);
        starts_.push_back(holds_.size());
      }
      holds_.push_back(hold);
    }
    starts_.push_back(holds_.size());
  }

  size_t size() const { return keys_.size(); }
  const AdvisoryKey& key(size_t i) const { return keys_[i]; }
  std::span<const Hold> holds(size_t i) const {
    return {holds_.data() + starts_[i], starts_[i + 1] - starts_[i]};
  }
  // Holds of `key`; empty when nobody holds it.
  std::span<const Hold> Find(const AdvisoryKey& key) const {
    const auto it = std::lower_bound(keys_.begin(), keys_.end(), key);
    if (it == keys_.end() || !(*it == key)) return {};
    return holds(static_cast<size_t>(it - keys_.begin()));
  }

 private:
  std::vector<AdvisoryKey> keys_;  // sorted, unique
  std::vector<size_t> starts_;     // holds of keys_[i] are holds_[starts_[i] .. starts_[i+1])
  std::vector<Hold> holds_;
};

namespace {

std::string CounterLock(const AdvisoryKey& key, const LockNames* names) {
  if (names != nullptr && names->count({key.classid, key.objid, key.objsubid}) != 0) {
    return LockLabel(key, names);
  }
  return "unnamed";
}

int64_t CounterDelta(int64_t prev, int64_t cur) { return cur >= prev ? cur - prev : cur; }

// The cause of a session end that no timeout explains, consuming the delta that explains it
// (kCleanClose: none left).
HoldEnd ClaimEnd(SessionEndDeltas* deltas, bool deltas_known = true) {
  return InferLossCause(Session{}, 0, 0, 0, 0, deltas, deltas_known);
}

// PostgreSQL 14 reads pg_stat_database from the stats collector's file, which a backend accepts
// up to 500 ms old, while pg_stat_activity and pg_locks are current: a session that ended just
// before the poll is gone with its locks but its end is not counted yet, so a termination or a
// timeout would pass for a clean disconnect. True when that can be the case: the counters were
// written before `ended_by` and a session that held a lock in `prev` is gone in `cur`.
bool SessionCountersLag(const PollData& prev, const PollData& cur, double ended_by,
                        const std::vector<DeferredHold>& deferred) {
  if (!cur.database_stats_snapshot || *cur.database_stats_snapshot >= ended_by ||
      !prev.database_stats || prev.postmaster_start != cur.postmaster_start) {
    return false;
  }
  std::set<SessionId> alive;
  for (const Session& s : cur.sessions) alive.insert({s.pid, s.backend_start});
  std::unordered_map<int, double> backend_start;
  for (const Session& s : prev.sessions) backend_start[s.pid] = s.backend_start;
  return std::any_of(prev.locks.begin(), prev.locks.end(),
                     [&](const AdvisoryLock& l) {
                       const auto it = backend_start.find(l.pid);
                       return l.granted && it != backend_start.end() &&
                              alive.count({l.pid, it->second}) == 0;
                     }) ||
         std::any_of(deferred.begin(), deferred.end(),
                     [&](const DeferredHold& d) { return alive.count(d.session) == 0; });
}

}  // namespace

const char* HoldEndLabel(HoldEnd e) {
  switch (e) {
    case HoldEnd::kStillConnected:
      return "unlocked";
    case HoldEnd::kCleanClose:
      return "session_closed";
    case HoldEnd::kIdleInTransactionTimeout:
      return "idle_in_transaction_timeout";
    case HoldEnd::kIdleSessionTimeout:
      return "idle_session_timeout";
    case HoldEnd::kTerminated:
      return "terminated";
    case HoldEnd::kConnectionLost:
      return "connection_lost";
    case HoldEnd::kServerRestart:
      return "server_restart";
    case HoldEnd::kUnknown:
      return "unknown";
  }
  return "unknown";
}

HoldEnd InferLossCause(const Session& last_seen, double last_poll_now, double cur_poll_now,
                       double idle_in_transaction_timeout, double idle_session_timeout,
                       SessionEndDeltas* deltas, bool deltas_known) {
  const std::optional<HoldEnd> timeout = TimeoutMatch(
      last_seen, last_poll_now, cur_poll_now, idle_in_transaction_timeout, idle_session_timeout);
  // 12/13: without session counters only a timeout is a loss.
  if (!deltas_known) return timeout.value_or(HoldEnd::kCleanClose);
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

void EventTracker::Observe(std::shared_ptr<const PollData> cur,
                           std::shared_ptr<const PollData> last_inventory, const LockNames* names,
                           Counters* counters, std::vector<Event>* events) {
  Settle(std::nullopt, 0, names, counters, events);  // what the poller did not settle: clean closes
  SeedZeroCounters(*cur, names, counters);
  leases_.SeedZeroCounters(*cur, counters);
  SeeSessions(*cur);
  if (cur->inventory && last_inventory != nullptr) {
    const bool waiting = waiting_baseline_ != nullptr;
    std::shared_ptr<const PollData> baseline = waiting ? waiting_baseline_ : last_inventory;
    if (counter_waits_ >= kMaxCounterWaits ||
        !SessionCountersLag(*baseline, *cur, waiting ? waiting_since_ : cur->now, deferred_)) {
      CountLockEvents(baseline, cur, names, counters, events);
      if (!settling_.empty()) settle_poll_ = cur;
      waiting_baseline_.reset();
      counter_waits_ = 0;
      ForgetEndedSessions(*cur);
    } else {
      if (!waiting) waiting_since_ = cur->now;
      waiting_baseline_ = std::move(baseline);
      ++counter_waits_;
    }
  } else if (cur->inventory) {
    ForgetEndedSessions(*cur);  // the first inventory: nothing before it to explain
  }
  CountSessionsEnded(*cur, counters);
  leases_.Observe(*cur, counters, events);
  pooled_.Observe(*cur, names, counters, events);
}

void EventTracker::SeeSessions(const PollData& cur) {
  for (const Session& s : cur.sessions) {
    SessionSighting& seen = sightings_[{s.pid, s.backend_start}];
    seen.datid = s.datid;
    seen.usesysid = s.usesysid;
    if (seen.state != s.state) seen.state = s.state;
    seen.state_change = s.state_change;
    seen.seen_at = cur.now;
  }
}

void EventTracker::ForgetEndedSessions(const PollData& cur) {
  std::set<SessionId> alive;
  for (const Session& s : cur.sessions) alive.insert({s.pid, s.backend_start});
  for (auto it = sightings_.begin(); it != sightings_.end();) {
    const SessionSighting& seen = it->second;
    const bool deferred =
        std::any_of(deferred_.begin(), deferred_.end(),
                    [&](const DeferredHold& d) { return d.session == it->first; });
    const bool keep = alive.count(it->first) != 0 || deferred ||
                      (seen.awaiting_end && cur.now - *seen.awaiting_end <= kLateSessionEndSeconds);
    it = keep ? std::next(it) : sightings_.erase(it);
  }
}

void EventTracker::SeedZeroCounters(const PollData& cur, const LockNames* names,
                                    Counters* counters) {
  // Series that exist at 0 before the first event let increase()/rate() see that event. A lock
  // event needs a hold seen at an earlier poll, so the series of a database and lock name are
  // made when a lock is first seen held there: a database without lock activity adds none.
  // Bounded: databases x (configured names + "unnamed") x causes, and the leases of small tables.
  std::set<std::pair<uint32_t, std::string>> held;  // (datid, counter lock label)
  std::set<uint32_t> unnamed;
  for (const AdvisoryLock& l : cur.locks) {
    if (!l.granted) continue;
    if (names != nullptr && !names->empty() &&
        names->count({l.key.classid, l.key.objid, l.key.objsubid}) != 0) {
      held.emplace(l.key.datid, CounterLock(l.key, names));
    } else {
      unnamed.insert(l.key.datid);
    }
  }
  for (uint32_t datid : unnamed) held.emplace(datid, "unnamed");
  if (held.empty() && cur.leases.empty()) return;
  const PollIndex index(cur);
  for (const auto& [datid, lock] : held) {
    const std::string db = index.Datname(datid);
    if (counters->takeovers.count({db, lock}) != 0) continue;  // seeded before
    for (HoldEnd cause : kLossCauses) counters->losses[{db, lock, HoldEndLabel(cause)}] += 0;
    for (const char* reason : {"unlocked", "session_closed"}) {
      counters->releases[{db, lock, reason}] += 0;
    }
    counters->takeovers[{db, lock}] += 0;
    counters->handovers[{db, lock}] += 0;
  }
}

void EventTracker::CountSessionsEnded(const PollData& cur, Counters* counters) {
  if (!cur.database_stats) return;
  for (const DatabaseStats& d : *cur.database_stats) {
    const auto it = last_stats_.find(d.datid);
    const bool first_sight = it == last_stats_.end();
    const DatabaseStats prev = first_sight ? d : it->second;
    last_stats_[d.datid] = d;
    // The first sight is the baseline: the counters count the sessions that ended since the
    // exporter started watching, and a database where none did has no series. A decrease is a
    // reset (crash restart or pg_stat_reset): the new value counts from zero.
    if (first_sight) continue;
    const int64_t fatal = CounterDelta(prev.sessions_fatal, d.sessions_fatal);
    const int64_t killed = CounterDelta(prev.sessions_killed, d.sessions_killed);
    const int64_t abandoned = CounterDelta(prev.sessions_abandoned, d.sessions_abandoned);
    if (fatal + killed + abandoned == 0 &&
        counters->sessions_ended.count({d.datname, "fatal"}) == 0) {
      continue;
    }
    counters->sessions_ended[{d.datname, "fatal"}] += static_cast<double>(fatal);
    counters->sessions_ended[{d.datname, "killed"}] += static_cast<double>(killed);
    counters->sessions_ended[{d.datname, "abandoned"}] += static_cast<double>(abandoned);
  }
}

namespace {

using LostKeys = std::map<AdvisoryKey, LostKey>;

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
    SessionEndDeltas delta{CounterDelta(p.sessions_fatal, d.sessions_fatal),
                           CounterDelta(p.sessions_killed, d.sessions_killed),
                           CounterDelta(p.sessions_abandoned, d.sessions_abandoned)};
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
  EndParties(const PollData& prev, const PollData& cur, const std::vector<DeferredHold>& holds) {
    for (const Session& s : cur.sessions) alive.insert({s.pid, s.backend_start});
    const PollIndex prev_index(prev);
    for (const AdvisoryLock& l : prev.locks) {
      if (!l.granted) continue;
      const Session* s = prev_index.Find(l.pid);
      holders.insert({l.pid, s != nullptr ? s->backend_start : 0});
    }
    for (const DeferredHold& d : holds) {
      deferred.insert(d.session);
      if (d.awaiting_count) awaited.insert(d.session);
    }
    holders.insert(deferred.begin(), deferred.end());
  }

  std::set<SessionId> alive;     // listed at `cur`
  std::set<SessionId> holders;   // held a lock at `prev`, or a hold deferred since
  std::set<SessionId> deferred;  // of the holds deferred by the last judgement
  std::set<SessionId> awaited;   // of those, waiting for their late end count
};

// How each session that held a lock at `prev` and is gone at `cur` ended: kCleanClose, else the
// cause of the loss. `sightings` holds the last sight of every session seen since `prev`
// (and of those ended earlier that still wait for their end count); those that ended as a timeout
// would, but whose database shows no fatal end for them yet, are marked as waiting for it.
EndJudgement EndCauses(const PollData& prev, const PollData& cur,
                       const std::vector<DeferredHold>& deferred,
                       const std::map<uint32_t, SessionEndDeltas>& settled,
                       std::map<SessionId, SessionSighting>* sightings) {
  EndJudgement out;
  const EndParties parties(prev, cur, deferred);
  const std::set<SessionId>& alive = parties.alive;
  const std::set<SessionId>& holders = parties.holders;
  const std::set<SessionId>& deferred_sessions = parties.deferred;
  const std::set<SessionId>& awaited = parties.awaited;

  const bool deltas_known = cur.database_stats.has_value() && prev.database_stats.has_value();
  std::map<uint32_t, SessionEndDeltas> deltas = EndDeltasSince(prev, cur, settled);

  // Every session seen and gone now. Those whose idle time matches a timeout claim the 'fatal'
  // deltas first, lock holders or not, those that waited for a late count before the others: a
  // server that reaps idle sessions counts a fatal end for each, and those must not be pinned on
  // a holder that closed its session cleanly.
  std::vector<std::pair<SessionId, uint32_t>> undecided;  // holders without a timeout match
  std::vector<SessionId> candidates;  // holders that match a timeout whose count is not seen yet
  std::vector<std::pair<const SessionId, SessionSighting>*> gone;
  for (auto& entry : *sightings) {
    if (alive.count(entry.first) == 0) gone.push_back(&entry);
  }
  // Lock holders last, whether they wait for a late count or not: a holder that waits for its own
  // count since an earlier inventory would otherwise take the count of a session reaped since
  // (its own is counted before it leaves, not a poll later), and when a holder and a
  // session holding nothing both match a timeout for one count, a clean close must not page.
  const auto rank = [&](const auto* e) {
    return (holders.count(e->first) != 0 ? 2 : 0) + (e->second.awaiting_end ? 0 : 1);
  };
  std::stable_sort(gone.begin(), gone.end(),
                   [&](const auto* a, const auto* b) { return rank(a) < rank(b); });
  for (auto* entry : gone) {
    const SessionId& sid = entry->first;
    SessionSighting& seen = entry->second;
    const double iit = EffectiveTimeout("idle_in_transaction_session_timeout", seen.datid,
                                        seen.usesysid, prev.settings, prev.overrides);
    const double idle = EffectiveTimeout("idle_session_timeout", seen.datid, seen.usesysid,
                                         prev.settings, prev.overrides);
    Session last;
    last.state = seen.state;
    last.state_change = seen.state_change;
    const std::optional<HoldEnd> timeout = TimeoutMatch(last, seen.seen_at, cur.now, iit, idle);
    const bool holder = holders.count(sid) != 0;
    SessionEndDeltas& d = deltas[seen.datid];
    if (timeout && (!deltas_known || d.fatal > 0)) {
      if (deltas_known) --d.fatal;
      seen.awaiting_end.reset();
      if (holder) out.causes[sid] = *timeout;
    } else if (timeout) {
      if (!seen.awaiting_end) seen.awaiting_end = cur.now;
      if (awaited.count(sid) != 0) {
        // Its count, awaited for an interval, never came: a clean close.
        out.causes[sid] = HoldEnd::kCleanClose;
      } else if (holder) {
        if (deferred_sessions.count(sid) == 0) candidates.push_back(sid);
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
  for (const SessionId& sid : holders) {
    if (alive.count(sid) == 0) out.causes.emplace(sid, HoldEnd::kCleanClose);
  }
  return out;
}

// True when a lock held at the previous inventory is gone now while its session is still listed and
// ran no statement in between (same state, same state_change): nothing the client sent released it,
// so the backend is ending (it releases its locks before it counts its end and leaves
// pg_stat_activity), and the next inventory tells how.
std::set<SessionId> HoldersEnding(const HoldIndex& prev_holds, const HoldIndex& cur_holds,
                                  const PollIndex& prev_index, const PollIndex& cur_index) {
  std::set<SessionId> out;
  for (size_t i = 0; i < prev_holds.size(); ++i) {
    const auto now_held = cur_holds.Find(prev_holds.key(i));
    for (const Hold& h : prev_holds.holds(i)) {
      if (std::any_of(now_held.begin(), now_held.end(),
                      [&](const Hold& c) { return c.session == h.session; })) {
        continue;
      }
      const Session* before = prev_index.Find(h.session.first);
      const Session* after = cur_index.Find(h.session.first);
      if (before == nullptr || after == nullptr || after->backend_start != h.session.second ||
          !before->state_change || before->state_change != after->state_change ||
          before->state != after->state) {
        continue;
      }
      out.insert(h.session);
    }
  }
  return out;
}

// Changes of exclusive holder between prev and cur: a takeover when the key was lost (in this
// interval, or within the takeover window), else a hand-over.
void CountHolderChanges(const HoldIndex& prev_holds, const HoldIndex& cur_holds,
                        const PollIndex& prev_index, const PollIndex& cur_index, double now,
                        const LockNames* names, const std::set<AdvisoryKey>& deferred_keys,
                        LostKeys* lost_keys, Counters* counters, std::vector<Event>* events) {
  for (size_t i = 0; i < cur_holds.size(); ++i) {
    const AdvisoryKey& key = cur_holds.key(i);
    const auto now_held = cur_holds.holds(i);
    const auto before = prev_holds.Find(key);
    // Usually one holder on each side: compare in place, without allocating.
    bool held_now = false, held_before = false, same_holder = false;
    const Hold* previous = nullptr;
    const Hold* current = nullptr;
    for (const Hold& b : before) {
      if (b.exclusive && previous == nullptr) previous = &b;
      held_before = held_before || b.exclusive;
    }
    for (const Hold& h : now_held) {
      if (!h.exclusive) continue;
      held_now = true;
      if (current == nullptr) current = &h;
      for (const Hold& b : before)
        same_holder = same_holder || (b.exclusive && b.session == h.session);
    }
    if (!held_now || same_holder) continue;
    // Its holder's backend may be ending: judged at the next judgement, with how it ended.
    if (previous != nullptr && deferred_keys.count(key) != 0) continue;
    Event e;
    e.time = now;
    e.datname = cur_index.Datname(key.datid);
    e.lock = LockLabel(key, names);
    e.current = IdentityOf(cur_index.Find(current->session.first), current->session.first);
    if (const auto lost = lost_keys->find(key); lost != lost_keys->end()) {
      counters->takeovers[{e.datname, CounterLock(key, names)}] += 1;
      e.kind = "lock_takeover";
      e.previous = lost->second.holder;
      lost_keys->erase(lost);  // one takeover per loss
    } else if (held_before) {
      counters->handovers[{e.datname, CounterLock(key, names)}] += 1;
      e.kind = "lock_handover";
      e.previous = IdentityOf(prev_index.Find(previous->session.first), previous->session.first);
    } else {
      continue;
    }
    if (events != nullptr) events->push_back(std::move(e));
  }
}

}  // namespace

// One interval of lock events: the two inventories it lies between, indexed.
struct JudgedInterval {
  JudgedInterval(const PollData& p, const PollData& c, std::shared_ptr<const HoldIndex> ph,
                 std::shared_ptr<const HoldIndex> ch)
      : prev(p),
        cur(c),
        prev_holds_owner(std::move(ph)),
        cur_holds_owner(std::move(ch)),
        prev_holds(*prev_holds_owner),
        cur_holds(*cur_holds_owner),
        prev_index(p),
        cur_index(c),
        restarted(p.postmaster_start != c.postmaster_start),
        // Not before 14 (no session counters), and not at a restart (everything is lost then).
        settle(!restarted && c.database_stats.has_value() && p.database_stats.has_value()) {}

  // The key's exclusive holder at `cur` other than `d`'s session, into d->taken_by/taker.
  void NoteTaker(DeferredHold* d) const {
    if (!d->exclusive || d->taken_by) return;
    for (const Hold& c : cur_holds.Find(d->key)) {
      if (!c.exclusive || c.session == d->session) continue;
      d->taken_by = c.session;
      d->taker = IdentityOf(cur_index.Find(c.session.first), c.session.first);
      break;
    }
  }

  // A hold of `prev` whose judgement waits (deferred or settling).
  DeferredHold Waiting(const AdvisoryKey& key, const Hold& h) const {
    DeferredHold d;
    d.key = key;
    d.session = h.session;
    d.exclusive = h.exclusive;
    d.held_at = prev.now;
    d.db = prev_index.Datname(key.datid);
    d.holder = IdentityOf(prev_index.Find(h.session.first), h.session.first);
    return d;
  }

  const PollData& prev;
  const PollData& cur;
  const std::shared_ptr<const HoldIndex> prev_holds_owner;
  const std::shared_ptr<const HoldIndex> cur_holds_owner;
  const HoldIndex& prev_holds;
  const HoldIndex& cur_holds;
  const PollIndex prev_index;
  const PollIndex cur_index;
  const bool restarted;
  // A holder whose session closed with no end counted waits for Settle(): its count may be on
  // its way.
  const bool settle;
};

std::shared_ptr<const HoldIndex> EventTracker::HoldsOf(
    const std::shared_ptr<const PollData>& poll) {
  if (poll == indexed_poll_ && indexed_holds_ != nullptr) return indexed_holds_;
  return std::make_shared<const HoldIndex>(*poll);
}

void EventTracker::CountLockEvents(const std::shared_ptr<const PollData>& prev_poll,
                                   const std::shared_ptr<const PollData>& cur_poll,
                                   const LockNames* names, Counters* counters,
                                   std::vector<Event>* events) {
  const PollData& prev = *prev_poll;
  const PollData& cur = *cur_poll;
  const JudgedInterval in(prev, cur, HoldsOf(prev_poll), HoldsOf(cur_poll));
  // The next judgement's baseline is this one's `cur`: its holds are indexed once.
  indexed_poll_ = cur_poll;
  indexed_holds_ = in.cur_holds_owner;
  // A restart ends every session: every lock held before is lost, and the next run that takes
  // one of them may overlap a run that still believes it holds it.
  if (in.restarted) {
    sightings_.clear();
    SeeSessions(cur);
  }
  const EndJudgement ended =
      in.restarted ? EndJudgement{} : EndCauses(prev, cur, deferred_, settled_ends_, &sightings_);
  settled_ends_.clear();
  settle_base_ = cur.database_stats.value_or(std::vector<DatabaseStats>{});
  settle_now_ = cur.now;
  ResolveDeferredHolds(in, ended, names, counters, events);
  // Keys whose change of holder is judged later, with how their holder's session ended.
  std::set<AdvisoryKey> deferred_keys;
  JudgeGoneHolds(in, ended, names, counters, events, &deferred_keys);
  // Forget losses older than the takeover window: a key taken that much later is a new run.
  for (auto it = lost_keys_.begin(); it != lost_keys_.end();) {
    it = cur.now - it->second.lost_at > takeover_window_seconds_ ? lost_keys_.erase(it) : ++it;
  }
  const HoldIndex nothing_held{PollData{}};
  CountHolderChanges(in.restarted ? nothing_held : in.prev_holds, in.cur_holds, in.prev_index,
                     in.cur_index, cur.now, names, deferred_keys, &lost_keys_, counters, events);
  while (lost_keys_.size() > kMaxLostKeys) {
    auto oldest = std::min_element(
        lost_keys_.begin(), lost_keys_.end(),
        [](const auto& a, const auto& b) { return a.second.lost_at < b.second.lost_at; });
    lost_keys_.erase(oldest);
  }
}

void EventTracker::ResolveDeferredHolds(const JudgedInterval& in, const EndJudgement& ended,
                                        const LockNames* names, Counters* counters,
                                        std::vector<Event>* events) {
  for (const DeferredHold& deferred : deferred_) {
    DeferredHold d = deferred;
    const Session* s = in.cur_index.Find(d.session.first);
    const bool alive = s != nullptr && s->backend_start == d.session.second;
    HoldEnd end = HoldEnd::kStillConnected;
    if (in.restarted) {
      end = HoldEnd::kServerRestart;
    } else if (!alive) {
      const auto it = ended.causes.find(d.session);
      end = it == ended.causes.end() ? HoldEnd::kCleanClose : it->second;
    }
    // The key's next holder: who had it when the hold was deferred, else who has it now.
    if (!in.restarted) in.NoteTaker(&d);
    if (in.settle && end == HoldEnd::kCleanClose) {
      settling_.push_back(std::move(d));  // its key was not held by it at `prev`
      continue;
    }
    // Everything is lost at a restart; the key's next holder is judged as after any restart.
    ResolveHold(d, end, in.cur.now, d.taken_by ? std::optional<Identity>(d.taker) : std::nullopt,
                names, counters, events);
  }
  deferred_.clear();
}

void EventTracker::JudgeGoneHolds(const JudgedInterval& in, const EndJudgement& ended,
                                  const LockNames* names, Counters* counters,
                                  std::vector<Event>* events,
                                  std::set<AdvisoryKey>* deferred_keys) {
  // A lock gone from a session still listed that ran nothing since: judged at the next judgement.
  const std::set<SessionId> ending =
      in.restarted ? std::set<SessionId>{}
                   : HoldersEnding(in.prev_holds, in.cur_holds, in.prev_index, in.cur_index);
  for (size_t i = 0; i < in.prev_holds.size(); ++i) {
    const AdvisoryKey& key = in.prev_holds.key(i);
    const auto now_held = in.restarted ? std::span<const Hold>{} : in.cur_holds.Find(key);
    for (const Hold& h : in.prev_holds.holds(i)) {
      if (std::any_of(now_held.begin(), now_held.end(),
                      [&](const Hold& c) { return c.session == h.session; })) {
        continue;  // still held
      }
      const bool awaiting_count = ended.pending.count(h.session) != 0;
      if (ending.count(h.session) != 0 || awaiting_count) {
        DeferredHold d = in.Waiting(key, h);
        d.awaiting_count = awaiting_count;
        in.NoteTaker(&d);
        if (h.exclusive) deferred_keys->insert(key);
        deferred_.push_back(std::move(d));
        continue;
      }
      const auto it = ended.causes.find(h.session);
      const HoldEnd end = in.restarted               ? HoldEnd::kServerRestart
                          : it == ended.causes.end() ? HoldEnd::kStillConnected
                                                     : it->second;
      if (in.settle && end == HoldEnd::kCleanClose) {  // closed with no end counted, yet
        DeferredHold d = in.Waiting(key, h);
        in.NoteTaker(&d);
        if (h.exclusive) deferred_keys->insert(key);
        settling_.push_back(std::move(d));
        continue;
      }
      CountGoneHold(in, key, h, end, names, counters, events);
    }
  }
}

void EventTracker::CountGoneHold(const JudgedInterval& in, const AdvisoryKey& key, const Hold& h,
                                 HoldEnd end, const LockNames* names, Counters* counters,
                                 std::vector<Event>* events) {
  // Labels only for the few locks that changed.
  const std::string db = in.prev_index.Datname(key.datid), lock = CounterLock(key, names);
  if (end == HoldEnd::kStillConnected) {
    counters->releases[{db, lock, HoldEndLabel(end)}] += 1;
    return;  // routine: no event
  }
  Event e;
  e.time = in.cur.now;
  e.datname = db;
  e.lock = LockLabel(key, names);
  e.previous = IdentityOf(in.prev_index.Find(h.session.first), h.session.first);
  e.cause = HoldEndLabel(end);
  if (end == HoldEnd::kCleanClose) {
    counters->releases[{db, lock, e.cause}] += 1;
    e.kind = "lock_released";
  } else {
    counters->losses[{db, lock, e.cause}] += 1;
    e.kind = "lock_lost";
    if (h.exclusive) lost_keys_[key] = {h.session.first, h.session.second, in.prev.now, e.previous};
  }
  if (events != nullptr) events->push_back(std::move(e));
}

void EventTracker::ResolveHold(const DeferredHold& d, HoldEnd end, double now,
                               const std::optional<Identity>& next, const LockNames* names,
                               Counters* counters, std::vector<Event>* events) {
  const std::string lock = CounterLock(d.key, names);
  Event e;
  e.time = now;
  e.datname = d.db;
  e.lock = LockLabel(d.key, names);
  e.previous = d.holder;
  const bool lost = IsLoss(end);
  if (end == HoldEnd::kStillConnected) {
    counters->releases[{d.db, lock, HoldEndLabel(end)}] += 1;
  } else {
    e.cause = HoldEndLabel(end);
    e.kind = lost ? "lock_lost" : "lock_released";
    (lost ? counters->losses : counters->releases)[{d.db, lock, e.cause}] += 1;
    if (events != nullptr) events->push_back(e);
  }
  if (!d.exclusive) return;
  if (!next) {
    if (lost) lost_keys_[d.key] = {d.session.first, d.session.second, d.held_at, d.holder};
    return;
  }
  e.kind = lost ? "lock_takeover" : "lock_handover";
  e.cause.clear();
  e.current = *next;
  (lost ? counters->takeovers : counters->handovers)[{d.db, lock}] += 1;
  if (events != nullptr) events->push_back(std::move(e));
}

void EventTracker::ReserveOthersEnds(const PollData& poll,
                                     const std::vector<DeferredHold>& settling,
                                     double reservation_horizon,
                                     std::map<uint32_t, SessionEndDeltas>* late) const {
  std::set<SessionId> settling_sessions;
  for (const DeferredHold& d : settling) settling_sessions.insert(d.session);
  std::set<SessionId> ending;
  for (const DeferredHold& d : deferred_) {
    if (!d.awaiting_count && settling_sessions.count(d.session) == 0 &&
        ending.insert(d.session).second) {
      ClaimEnd(&(*late)[d.key.datid]);  // one end, any kind
    }
  }
  for (const auto& [sid, seen] : sightings_) {
    if (settling_sessions.count(sid) != 0) continue;
    Session last;
    last.state = seen.state;
    last.state_change = seen.state_change;
    const double iit = EffectiveTimeout("idle_in_transaction_session_timeout", seen.datid,
                                        seen.usesysid, poll.settings, poll.overrides);
    const double idle = EffectiveTimeout("idle_session_timeout", seen.datid, seen.usesysid,
                                         poll.settings, poll.overrides);
    if (!TimeoutMatch(last, seen.seen_at, reservation_horizon, iit, idle)) continue;
    SessionEndDeltas& left = (*late)[seen.datid];
    if (left.fatal > 0) --left.fatal;
  }
}

void EventTracker::Settle(const std::optional<std::vector<DatabaseStats>>& later,
                          double seconds_after_poll, const LockNames* names, Counters* counters,
                          std::vector<Event>* events) {
  if (settling_.empty()) return;
  // Ends counted since the poll that judged these holds, per database.
  std::map<uint32_t, SessionEndDeltas> late;
  if (later) {
    std::map<uint32_t, const DatabaseStats*> base;
    for (const DatabaseStats& d : settle_base_) base[d.datid] = &d;
    for (const DatabaseStats& d : *later) {
      const auto it = base.find(d.datid);
      if (it == base.end()) continue;
      late[d.datid] = {CounterDelta(it->second->sessions_fatal, d.sessions_fatal),
                       CounterDelta(it->second->sessions_killed, d.sessions_killed),
                       CounterDelta(it->second->sessions_abandoned, d.sessions_abandoned)};
    }
  }
  // One cause per session, for all its locks; each end explains one session.
  std::map<SessionId, HoldEnd> causes;
  const std::vector<DeferredHold> holds = std::move(settling_);
  settling_.clear();
  std::shared_ptr<const PollData> poll = std::move(settle_poll_);
  settle_poll_.reset();
  if (later && poll != nullptr) {
    ReserveOthersEnds(*poll, holds, settle_now_ + seconds_after_poll, &late);
  }
  for (const DeferredHold& d : holds) {
    if (causes.count(d.session) != 0) continue;
    SessionEndDeltas& left = late[d.key.datid];
    const SessionEndDeltas before = left;
    causes[d.session] = ClaimEnd(&left);
    SessionEndDeltas& claimed = settled_ends_[d.key.datid];
    claimed.fatal += before.fatal - left.fatal;
    claimed.killed += before.killed - left.killed;
    claimed.abandoned += before.abandoned - left.abandoned;
  }
  for (const DeferredHold& d : holds) {
    ResolveHold(d, causes[d.session], settle_now_,
                d.taken_by ? std::optional<Identity>(d.taker) : std::nullopt, names, counters,
                events);
  }
}

}  // namespace pglock
