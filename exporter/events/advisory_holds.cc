#include "exporter/events/advisory_holds.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "exporter/events/hold_index.h"
#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/poll_index.h"

namespace pglock {

namespace {

// PostgreSQL 14 reads pg_stat_database from the stats collector's file, which a backend accepts
// up to 500 ms old, while pg_stat_activity and pg_locks are current: a session that ended just
// before the poll is gone with its locks but its end is not counted yet, so a termination or a
// timeout would pass for a clean disconnect. True when that can be the case: the counters were
// written before `ended_by` and a session that held a lock in `prev` (or whose hold is pending) is
// gone in `cur`.
bool SessionCountersLag(const PollData& prev, const PollData& cur, double ended_by,
                        const std::set<SessionId>& pending) {
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
         std::any_of(pending.begin(), pending.end(),
                     [&](const SessionId& sid) { return alive.count(sid) == 0; });
}

using LostKeys = std::map<AdvisoryKey, LostKey>;

// The share of `datid` in the interval `ended` judged (null: none, the log is not read).
std::shared_ptr<const AbandonedShare> ShareOf(const EndJudgement& ended, uint32_t datid) {
  const auto it = ended.shares.find(datid);
  return it == ended.shares.end() ? nullptr : it->second;
}

// True when `session`, whose lock held at the previous inventory is gone now, is still listed and
// ran no statement in between (same state, same state_change): nothing the client sent released
// the lock, so the backend is ending (it releases its locks before it counts its end and leaves
// pg_stat_activity), and the next inventory tells how.
bool BackendEnding(const SessionId& session, const PollIndex& prev_index,
                   const PollIndex& cur_index) {
  const Session* before = prev_index.Find(session.first);
  const Session* after = cur_index.Find(session.first);
  return before != nullptr && after != nullptr && after->backend_start == session.second &&
         before->state_change && before->state_change == after->state_change &&
         before->state == after->state;
}

// The one place that decides what a key's next holder is, whichever path its previous hold took
// to its end (judged at once: CountHolderChanges; after a wait: CountEndedAfterWait): a takeover
// when that hold was lost, else a hand-over. `e` names the lock, the previous and the next holder.
void CountNextHolder(bool lost, Event e, const std::string& counter_lock, Counters* counters,
                     std::vector<Event>* events) {
  e.kind = lost ? EventKind::kLockTakeover : EventKind::kLockHandover;
  e.cause = EventCause::kNone;
  e.evidence = EndEvidence::kNone;
  (lost ? counters->takeovers : counters->handovers)[{e.datname, counter_lock}] += 1;
  if (events != nullptr) events->push_back(std::move(e));
}

// Changes of exclusive holder between prev and cur, for the holds that ended without a wait: the
// key was lost (in this interval, or within the takeover window: a remembered loss), or its
// holder changed with no loss (CountNextHolder decides).
void CountHolderChanges(const HoldIndex& prev_holds, const HoldIndex& cur_holds,
                        const PollIndex& prev_index, const PollIndex& cur_index, double now,
                        const LockNames* names, const std::set<AdvisoryKey>& pending_keys,
                        LostKeys* lost_keys, Counters* counters, std::vector<Event>* events) {
  ForEachKey(
      prev_holds, cur_holds,
      [&](const AdvisoryKey& key, std::span<const Hold> before, std::span<const Hold> now_held) {
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
        if (!held_now || same_holder) return;
        // Its holder's judgement waits: the change of holder is judged with how it ended.
        if (previous != nullptr && pending_keys.count(key) != 0) return;
        Event e;
        e.time = now;
        e.datname = cur_index.Datname(key.datid);
        e.lock = LockLabel(key, names);
        e.current = IdentityOf(cur_index.Find(current->session.first), current->session.first);
        const auto lost = lost_keys->find(key);
        if (lost != lost_keys->end()) {
          e.previous = lost->second.holder;
          lost_keys->erase(lost);  // one takeover per loss
          CountNextHolder(true, std::move(e), CounterLockLabel(key, names), counters, events);
        } else if (held_before) {
          e.previous =
              IdentityOf(prev_index.Find(previous->session.first), previous->session.first);
          CountNextHolder(false, std::move(e), CounterLockLabel(key, names), counters, events);
        }
      });
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
        prev_index(IndexOf(p, &prev_built)),
        cur_index(IndexOf(c, &cur_built)),
        restarted(p.postmaster_start != c.postmaster_start),
        // Not before 14 (no session counters), and not at a restart (everything is lost then).
        settle(!restarted && c.database_stats.has_value() && p.database_stats.has_value()) {}

  // The key's exclusive holder at `cur` other than `d`'s session, into d->taken_by/taker.
  void NoteTaker(PendingHold* d) const {
    if (!d->exclusive || d->taken_by) return;
    for (const Hold& c : cur_holds.Find(d->key)) {
      if (!c.exclusive || c.session == d->session) continue;
      d->taken_by = c.session;
      d->taker = IdentityOf(cur_index.Find(c.session.first), c.session.first);
      break;
    }
  }

  // A hold of `prev` whose judgement waits, in `state`.
  PendingHold Waiting(const AdvisoryKey& key, const Hold& h, HoldState state) const {
    PendingHold d;
    d.state = state;
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
  std::optional<PollIndex> prev_built, cur_built;  // for polls that were not indexed
  const PollIndex& prev_index;
  const PollIndex& cur_index;
  const bool restarted;
  // A holder whose session closed with no end counted waits for Settle(): its count may be on
  // its way.
  const bool settle;
};

std::shared_ptr<const HoldIndex> AdvisoryHolds::HoldsOf(
    const std::shared_ptr<const PollData>& poll) {
  if (poll == indexed_poll_ && indexed_holds_ != nullptr) return indexed_holds_;
  // Nothing taken or let go since the last judgement (the rows keep their order): no new sort.
  if (indexed_holds_ != nullptr && SameHoldRows(*poll, indexed_holds_->rows())) {
    return indexed_holds_;
  }
  return std::make_shared<const HoldIndex>(HoldRowsOf(*poll));
}

bool AdvisoryHolds::settling() const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [](const PendingHold& p) { return p.state == HoldState::kSettling; });
}

PendingSessions AdvisoryHolds::Pending() const {
  PendingSessions out;
  for (const PendingHold& p : pending_) {
    if (p.state == HoldState::kSettling || p.state == HoldState::kAwaitingLog) continue;
    out.all.insert(p.session);
    if (p.state == HoldState::kAwaitingEndCount) out.awaited.insert(p.session);
    if (p.state == HoldState::kBackendEnding) out.ending.insert(p.session);
  }
  out.counted_while_listed = counted_while_listed_;
  return out;
}

void AdvisoryHolds::KeepEndsCountedWhileListed(const EndJudgement& ended) {
  counted_while_listed_.clear();
  std::map<uint32_t, std::set<SessionId>> ending;  // per database
  for (const PendingHold& p : pending_) {
    if (p.state == HoldState::kBackendEnding) ending[p.key.datid].insert(p.session);
  }
  for (const auto& [datid, sessions] : ending) {
    const auto it = ended.unclaimed.find(datid);
    if (it == ended.unclaimed.end()) continue;
    const auto n = static_cast<int64_t>(sessions.size());
    const SessionEndDeltas kept{std::min(n, it->second.fatal), std::min(n, it->second.killed),
                                std::min(n, it->second.abandoned)};
    if (kept.fatal + kept.killed + kept.abandoned > 0) counted_while_listed_[datid] = kept;
  }
}

std::optional<HoldState> AdvisoryHolds::StateOf(const AdvisoryKey& key,
                                                const SessionId& session) const {
  for (const PendingHold& p : pending_) {
    if (p.key == key && p.session == session) return p.state;
  }
  if (indexed_holds_ == nullptr) return std::nullopt;
  for (const Hold& h : indexed_holds_->Find(key)) {
    if (h.session == session) return HoldState::kHeld;
  }
  return std::nullopt;
}

void AdvisoryHolds::Observe(const std::shared_ptr<const PollData>& cur,
                            const std::shared_ptr<const PollData>& last_inventory,
                            const LockNames* names, Counters* counters,
                            std::vector<Event>* events) {
  Settle(std::nullopt, 0, names, counters, events);  // what the poller did not settle: clean closes
  JudgeAwaitingLog(cur->now, names, counters, events);
  SeedZeroCounters(*cur, names, counters);
  SeeSessions(*cur);
  if (!cur->inventory) return;
  if (last_inventory == nullptr) {
    ForgetEndedSessions(*cur);  // the first inventory: nothing before it to explain
    return;
  }
  const bool waiting = counter_wait_.baseline != nullptr;
  std::shared_ptr<const PollData> baseline = waiting ? counter_wait_.baseline : last_inventory;
  if (counter_wait_.waits < kMaxCounterWaits &&
      SessionCountersLag(*baseline, *cur, waiting ? counter_wait_.since : cur->now,
                         Pending().all)) {
    if (!waiting) counter_wait_.since = cur->now;
    counter_wait_.baseline = std::move(baseline);
    ++counter_wait_.waits;
    return;
  }
  JudgeInterval(baseline, cur, names, counters, events);
  if (settling()) settle_.poll = cur;
  counter_wait_ = {};
  ForgetEndedSessions(*cur);
}

void AdvisoryHolds::SeeSessions(const PollData& cur) {
  for (const Session& s : cur.sessions) {
    SessionSighting& seen = sightings_[{s.pid, s.backend_start}];
    seen.datid = s.datid;
    seen.usesysid = s.usesysid;
    if (seen.state != s.state) seen.state = s.state;
    seen.state_change = s.state_change;
    seen.seen_at = cur.now;
  }
}

void AdvisoryHolds::ForgetEndedSessions(const PollData& cur) {
  std::set<SessionId> alive;
  for (const Session& s : cur.sessions) alive.insert({s.pid, s.backend_start});
  const std::set<SessionId> pending = Pending().all;
  for (auto it = sightings_.begin(); it != sightings_.end();) {
    const SessionSighting& seen = it->second;
    const bool keep = alive.count(it->first) != 0 || pending.count(it->first) != 0 ||
                      (seen.awaiting_end && cur.now - *seen.awaiting_end <= kLateSessionEndSeconds);
    it = keep ? std::next(it) : sightings_.erase(it);
  }
}

void AdvisoryHolds::SeedZeroCounters(const PollData& cur, const LockNames* names,
                                     Counters* counters) {
  // Series that exist at 0 before the first event let increase()/rate() see that event. A lock
  // event needs a hold seen at an earlier poll, so the series of a database and lock name are
  // made when a lock is first seen held there: a database without lock activity adds none.
  // Bounded: databases x (configured names + "unnamed") x causes, and the leases of small tables.
  std::set<std::pair<uint32_t, std::string>> held;  // (datid, counter lock label)
  std::set<uint32_t> unnamed;
  std::optional<uint32_t> last_unnamed;  // a database's locks come in runs: one insert per run
  for (const AdvisoryLock& l : cur.locks) {
    if (!l.granted) continue;
    if (names != nullptr && !names->empty() &&
        names->count({l.key.classid, l.key.objid, l.key.objsubid}) != 0) {
      held.emplace(l.key.datid, CounterLockLabel(l.key, names));
    } else if (last_unnamed != l.key.datid) {
      unnamed.insert(l.key.datid);
      last_unnamed = l.key.datid;
    }
  }
  for (uint32_t datid : unnamed) held.emplace(datid, "unnamed");
  if (held.empty() && cur.leases.empty()) return;
  std::optional<PollIndex> built;
  const PollIndex& index = IndexOf(cur, &built);
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

void AdvisoryHolds::JudgeInterval(const std::shared_ptr<const PollData>& prev_poll,
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
      in.restarted ? EndJudgement{}
                   : EndCauses(prev, cur, Pending(), settled_ends_, &sightings_, log_.get());
  settled_ends_.clear();
  settle_.stats = cur.database_stats.value_or(std::vector<DatabaseStats>{});
  settle_.now = cur.now;
  std::vector<PendingHold> pending = std::move(pending_);
  pending_.clear();
  JudgePendingHolds(in, ended, std::move(pending), names, counters, events);
  // Keys whose change of holder is judged later, with how their holder's session ended.
  std::set<AdvisoryKey> pending_keys;
  // The same holds at both ends: every hold stays kHeld and no key changes holder.
  const bool unchanged = !in.restarted && &in.prev_holds == &in.cur_holds;
  if (!unchanged) JudgeHeldHolds(in, ended, names, counters, events, &pending_keys);
  KeepEndsCountedWhileListed(ended);
  // Forget losses older than the takeover window: a key taken that much later is a new run.
  for (auto it = lost_keys_.begin(); it != lost_keys_.end();) {
    it = cur.now - it->second.lost_at > takeover_window_seconds_ ? lost_keys_.erase(it) : ++it;
  }
  const HoldIndex nothing_held{HoldRows{}};
  if (!unchanged) {
    CountHolderChanges(in.restarted ? nothing_held : in.prev_holds, in.cur_holds, in.prev_index,
                       in.cur_index, cur.now, names, pending_keys, &lost_keys_, counters, events);
  }
  while (lost_keys_.size() > kMaxLostKeys) {
    auto oldest = std::min_element(
        lost_keys_.begin(), lost_keys_.end(),
        [](const auto& a, const auto& b) { return a.second.lost_at < b.second.lost_at; });
    lost_keys_.erase(oldest);
  }
}

void AdvisoryHolds::JudgePendingHolds(const JudgedInterval& in, const EndJudgement& ended,
                                      std::vector<PendingHold> pending, const LockNames* names,
                                      Counters* counters, std::vector<Event>* events) {
  for (PendingHold& d : pending) {
    if (d.state == HoldState::kAwaitingLog) {
      pending_.push_back(std::move(d));  // judged by JudgeAwaitingLog at every poll
      continue;
    }
    const Session* s = in.cur_index.Find(d.session.first);
    HoldEvidence e;
    e.restarted = in.restarted;
    e.can_settle = in.settle;
    if (s == nullptr || s->backend_start != d.session.second) {
      const auto it = ended.causes.find(d.session);
      e.session_end = it == ended.causes.end() ? HoldEnd::kCleanClose : it->second;
      e.evidence = ended.logged.count(d.session) != 0 ? EndEvidence::kLog : ended.unlogged_evidence;
      e.log_awaited = e.evidence != EndEvidence::kLog && log_ != nullptr && log_->readable();
      d.share = ShareOf(ended, d.key.datid);
    } else if (!AskLog(d.session, &e) && e.no_cause && d.state == HoldState::kBackendEnding &&
               in.cur.now - d.held_at < kMaxLogWaitSeconds) {
      // Still listed though its disconnection line is read (the poll's snapshot came first): it
      // is gone by the next judgement, which shares out its database's abandoned ends.
      pending_.push_back(std::move(d));
      continue;
    }
    // The key's next holder: who had it when the hold started to wait, else who has it now.
    if (!in.restarted) in.NoteTaker(&d);
    const HoldTransition t = NextHoldState(d.state, e);
    if (t.to == HoldState::kSettling) {
      d.state = HoldState::kSettling;
      pending_.push_back(std::move(d));  // its key was not held by it at `prev`
      continue;
    }
    // Everything is lost at a restart; the key's next holder is judged as after any restart.
    EndOrAwaitLog(std::move(d), t, in.cur.now, names, counters, events);
  }
}

void AdvisoryHolds::JudgeHeldHolds(const JudgedInterval& in, const EndJudgement& ended,
                                   const LockNames* names, Counters* counters,
                                   std::vector<Event>* events,
                                   std::set<AdvisoryKey>* pending_keys) {
  const HoldIndex nothing_held{HoldRows{}};
  // Everything is lost at a restart: nothing is still held.
  ForEachKey(
      in.prev_holds, in.restarted ? nothing_held : in.cur_holds,
      [&](const AdvisoryKey& key, std::span<const Hold> before, std::span<const Hold> now_held) {
        for (const Hold& h : before)
          JudgeHeldHold(in, ended, key, h, now_held, names, counters, events, pending_keys);
      });
}

void AdvisoryHolds::JudgeHeldHold(const JudgedInterval& in, const EndJudgement& ended,
                                  const AdvisoryKey& key, const Hold& h,
                                  std::span<const Hold> now_held, const LockNames* names,
                                  Counters* counters, std::vector<Event>* events,
                                  std::set<AdvisoryKey>* pending_keys) {
  HoldEvidence e;
  e.still_held = std::any_of(now_held.begin(), now_held.end(),
                             [&](const Hold& c) { return c.session == h.session; });
  if (e.still_held) return;  // kHeld stays kHeld: the common case, without the lookups
  e.restarted = in.restarted;
  e.can_settle = in.settle;
  e.backend_ending = !in.restarted && BackendEnding(h.session, in.prev_index, in.cur_index);
  e.end_count_awaited = ended.pending.count(h.session) != 0;
  if (const auto it = ended.causes.find(h.session); it != ended.causes.end()) {
    e.session_end = it->second;
    e.evidence = ended.logged.count(h.session) != 0 ? EndEvidence::kLog : ended.unlogged_evidence;
    e.log_awaited = e.evidence != EndEvidence::kLog && log_ != nullptr && log_->readable();
  } else if (!in.restarted) {
    AskLog(h.session, &e);  // still listed: the log may show that it is ending
  }
  const HoldTransition t = NextHoldState(HoldState::kHeld, e);
  if (t.to == HoldState::kEnded) {
    CountEnded(in, key, h, t, names, counters, events);
    return;
  }
  PendingHold d = in.Waiting(key, h, t.to);
  if (ended.causes.count(h.session) != 0) d.share = ShareOf(ended, key.datid);
  in.NoteTaker(&d);
  if (h.exclusive) pending_keys->insert(key);
  if (t.to == HoldState::kAwaitingLog) {
    EndOrAwaitLog(std::move(d), t, in.cur.now, names, counters, events);
    return;
  }
  pending_.push_back(std::move(d));
}

void AdvisoryHolds::CountEnded(const JudgedInterval& in, const AdvisoryKey& key, const Hold& h,
                               const HoldTransition& t, const LockNames* names, Counters* counters,
                               std::vector<Event>* events) {
  const HoldEnd end = t.end;
  // Labels only for the few locks that changed.
  const std::string db = in.prev_index.Datname(key.datid), lock = CounterLockLabel(key, names);
  if (end == HoldEnd::kStillConnected) {
    counters->releases[{db, lock, HoldEndLabel(end)}] += 1;
    return;  // routine: no event
  }
  Event e;
  e.time = in.cur.now;
  e.datname = db;
  e.lock = LockLabel(key, names);
  e.previous = IdentityOf(in.prev_index.Find(h.session.first), h.session.first);
  e.cause = CauseOf(end);
  e.evidence = t.evidence;
  if (end == HoldEnd::kCleanClose) {
    counters->releases[{db, lock, HoldEndLabel(end)}] += 1;
    e.kind = EventKind::kLockReleased;
  } else {
    counters->losses[{db, lock, HoldEndLabel(end)}] += 1;
    e.kind = EventKind::kLockLost;
    if (h.exclusive && MakesTakeover(end))
      lost_keys_[key] = {h.session.first, h.session.second, in.prev.now, e.previous};
  }
  if (events != nullptr) events->push_back(std::move(e));
}

void AdvisoryHolds::CountEndedAfterWait(const PendingHold& d, const HoldTransition& t, double now,
                                        const LockNames* names, Counters* counters,
                                        std::vector<Event>* events) {
  const HoldEnd end = t.end;
  const std::optional<Identity> next = d.taken_by ? std::optional<Identity>(d.taker) : std::nullopt;
  const std::string lock = CounterLockLabel(d.key, names);
  Event e;
  e.time = now;
  e.datname = d.db;
  e.lock = LockLabel(d.key, names);
  e.previous = d.holder;
  const bool lost = IsLoss(end);
  if (end == HoldEnd::kStillConnected) {
    counters->releases[{d.db, lock, HoldEndLabel(end)}] += 1;
  } else {
    e.cause = CauseOf(end);
    e.evidence = t.evidence;
    e.kind = lost ? EventKind::kLockLost : EventKind::kLockReleased;
    (lost ? counters->losses : counters->releases)[{d.db, lock, HoldEndLabel(end)}] += 1;
    if (events != nullptr) events->push_back(e);
  }
  if (!d.exclusive) return;
  if (!next) {
    if (MakesTakeover(end))
      lost_keys_[d.key] = {d.session.first, d.session.second, d.held_at, d.holder};
    return;
  }
  e.current = *next;
  CountNextHolder(MakesTakeover(end), std::move(e), lock, counters, events);
}

}  // namespace pglock
