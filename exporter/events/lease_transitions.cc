#include "exporter/events/lease_transitions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "exporter/snapshot/poll_index.h"

namespace pglock {
namespace {

// Counts lease transitions of one table; names beyond kMaxLeaseCounterNames count as "other", and
// every row of a queue (a table of work: docs/lease-tables.md) counts under "" (the table as a
// whole). Every transition but a renewal (routine, once per poll per lease) is also an event,
// naming the sessions whose transactions held a row_lock table's row (LeaseRow::pid; 0: none).
class LeaseCounter {
 public:
  // `sessions` (may be null) name the pids; it must outlive the counter.
  LeaseCounter(std::string table, bool queue, Counters* counters, std::vector<Event>* events,
               double now, const std::vector<Session>* sessions = nullptr)
      : table_(std::move(table)),
        queue_(queue),
        counters_(counters),
        events_(events),
        now_(now),
        sessions_(sessions) {}

  void operator()(const std::string& lease, LeaseTransition transition,
                  const std::string& previous_holder = "", const std::string& current_holder = "",
                  int previous_pid = 0, int current_pid = 0) {
    const char* kind = LeaseTransitionLabel(transition);
    const std::optional<EventKind> event_kind = EventOf(transition);
    if (events_ != nullptr && event_kind) {  // a renewal is routine: no event
      Event e;
      e.time = now_;
      e.kind = *event_kind;
      e.table = table_;
      e.lease = lease;
      e.previous_holder = previous_holder;
      e.current_holder = current_holder;
      if (previous_pid != 0) e.previous = Who(previous_pid);
      if (current_pid != 0) e.current = Who(current_pid);
      events_->push_back(std::move(e));
    }
    if (queue_) {
      counters_->lease_transitions[{table_, "", kind}] += 1;
      return;
    }
    std::string label = lease;
    if (!Known(lease)) {
      if (!names_) names_ = CountNames();  // only when a new name comes: most polls count none
      if (*names_ >= kMaxLeaseCounterNames) {
        label = "other";
      } else {
        ++*names_;
      }
    }
    counters_->lease_transitions[{table_, label, kind}] += 1;
  }

 private:
  // Events are few: a scan per event costs less than an index per poll.
  Identity Who(int pid) const {
    const Session* found = nullptr;
    if (sessions_ != nullptr) {
      for (const Session& s : *sessions_) {
        if (s.pid == pid) found = &s;
      }
    }
    return IdentityOf(found, pid);
  }

  const std::string table_;
  const bool queue_;
  Counters* const counters_;
  std::vector<Event>* const events_;  // may be null
  const double now_;
  const std::vector<Session>* const sessions_;  // may be null
  std::optional<size_t> names_;  // distinct names counted for this table, once needed

  // The counters are ordered by table, then name: a name has counters when the first key at or
  // after (table, name, "") has both.
  bool Known(const std::string& lease) const {
    const auto it = counters_->lease_transitions.lower_bound({table_, lease, ""});
    return it != counters_->lease_transitions.end() && std::get<0>(it->first) == table_ &&
           std::get<1>(it->first) == lease;
  }
  size_t CountNames() const {
    size_t n = 0;
    const std::string* last = nullptr;
    for (auto it = counters_->lease_transitions.lower_bound({table_, "", ""});
         it != counters_->lease_transitions.end() && std::get<0>(it->first) == table_; ++it) {
      if (last == nullptr || *last != std::get<1>(it->first)) ++n;
      last = &std::get<1>(it->first);
    }
    return n;
  }
};

// A row whose holder did not change: given back (its expiry moved to the past), renewed, or as
// it was. Each write it explains is counted in *mark.
LeaseState JudgeSameHolder(const LeaseRow& row, const LeaseTransitions::LeaseSeen& before,
                           const LeaseTableData& t, double prev_now,
                           LeaseTransitions::LeaseWriteMark* mark, LeaseCounter& count) {
  const LeaseRow& old = before.row;
  const bool moved_back =
      row.expires_at < old.expires_at && row.expires_at <= t.now && old.expires_at > prev_now;
  if (moved_back) {
    count(row.name, LeaseTransition::kReleased, old.holder, "",
          old.pid);  // given back by moving its expiry to the past
    mark->explained.updated += 1;
    return LeaseState::kGivenBack;
  }
  if (row.expires_at != old.expires_at || (t.has_taken_at && row.taken_at != old.taken_at)) {
    count(row.name, LeaseTransition::kRenewed);
    mark->explained.updated += 1;
    return before.state == LeaseState::kGivenBack && row.expires_at <= t.now
               ? LeaseState::kGivenBack
               : LeaseState::kHeld;
  }
  return before.state;
}

}  // namespace

void LeaseTransitions::SeedZeroCounters(const PollData& cur, Counters* counters) {
  for (const LeaseTableData& t : cur.leases) {
    if (t.ok && (t.queue || detected_.count(t.table) != 0)) {
      for (const LeaseTransition kind : kLeaseTransitions) {
        counters->lease_transitions[{t.table, "", LeaseTransitionLabel(kind)}] += 0;
      }
      continue;
    }
    if (!t.ok || t.rows.size() > kMaxSeededLeases) continue;
    size_t& seeded = seeded_names_[t.table];
    const std::string acquired = LeaseTransitionLabel(LeaseTransition::kAcquired);
    for (const LeaseRow& r : t.rows) {
      if (counters->lease_transitions.count({t.table, r.name, acquired}) != 0) continue;
      if (seeded >= kMaxSeededLeases) break;
      ++seeded;
      for (const LeaseTransition kind : kLeaseTransitions) {
        counters->lease_transitions[{t.table, r.name, LeaseTransitionLabel(kind)}] += 0;
      }
    }
  }
}

void LeaseTransitions::Observe(const PollData& cur, Counters* counters,
                               std::vector<Event>* events) {
  for (const LeaseTableData& t : cur.leases) {
    if (!t.ok) continue;  // keep the last good read; compare against it next time
    LeaseTableState& st = tables_[t.table];
    if (t.queue_detectable && !st.marks.empty()) DetectQueue(t, &st, counters);
    st.queue = t.queue || detected_.count(t.table) != 0;
    LeaseWriteMark mark{st.next_seq++, t.now, t.writes, {}};
    CompareLeaseRows(t, cur.sessions, &st, &mark, counters, events);
    st.marks.push_back(mark);
    ResolveHolderChanges(t.table, &st, counters, events);
    // Keep the marks that pending changes are judged against, and the last one as the next base.
    uint64_t keep_from = st.marks.back().seq;
    for (const PendingHolderChange& p : st.pending) keep_from = std::min(keep_from, p.base_seq);
    while (st.marks.front().seq < keep_from) st.marks.pop_front();
  }
}

void LeaseTransitions::DetectQueue(const LeaseTableData& t, LeaseTableState* st,
                                   Counters* counters) {
  if (!st->detecting) return;
  // The names read now, each once (views of the rows: nothing copied per row).
  std::vector<const std::string*> now;
  now.reserve(t.rows.size());
  for (const LeaseRow& row : t.rows) now.push_back(&row.name.str());
  const auto less = [](const std::string* a, const std::string* b) { return *a < *b; };
  std::sort(now.begin(), now.end(), less);
  now.erase(std::unique(now.begin(), now.end(),
                        [](const std::string* a, const std::string* b) { return *a == *b; }),
            now.end());
  for (const std::string* name : now) {
    if (st->leases.count(*name) != 0) continue;
    if (st->gone.erase(*name) != 0) {
      ++st->returned;
    } else {
      ++st->new_names;
    }
  }
  for (const auto& [name, seen] : st->leases) {
    if (!std::binary_search(now.begin(), now.end(), &name, less)) st->gone.insert(name);
  }
  if (st->returned * 100 > kQueueDetectNames * kQueueDetectReturns) {  // names come back: leases
    st->detecting = false;
    st->gone.clear();
    return;
  }
  if (st->new_names < kQueueDetectNames) return;
  st->detecting = false;
  st->gone.clear();
  detected_.insert(t.table);
  // Its counters so far become the table's.
  for (auto it = counters->lease_transitions.begin(); it != counters->lease_transitions.end();) {
    const auto& [table, lease, kind] = it->first;
    if (table != t.table || lease.empty()) {
      ++it;
      continue;
    }
    counters->lease_transitions[{table, "", kind}] += it->second;
    it = counters->lease_transitions.erase(it);
  }
  spdlog::info(
      "lease table {}: {} names appeared, {} of them seen before: a queue (a table of work), "
      "exported per table from now on; set queue = true or false on its [[targets.leases]] to "
      "decide it",
      t.table, st->new_names + st->returned, st->returned);
}

void LeaseTransitions::CompareLeaseRows(const LeaseTableData& t,
                                        const std::vector<Session>& sessions_now,
                                        LeaseTableState* st, LeaseWriteMark* mark,
                                        Counters* counters, std::vector<Event>* events) {
  const bool complete = static_cast<int64_t>(t.rows.size()) >= t.total;
  // Each read updates the last one's entries in place: a lease read again as it was costs no
  // allocation. `read` tells the entries this read showed from those it did not. A name twice in
  // one read (a name_sql that gives two rows one name) is judged by its first row alone: judging
  // each against the last read would count a change of holder at every read that shows both.
  const uint64_t read = ++st->reads;
  if (st->marks.empty()) {  // the first good read: nothing to compare with
    st->leases.clear();
    for (const LeaseRow& row : t.rows) {
      st->leases.try_emplace(row.name.str(), LeaseSeen{row, LeaseState::kHeld, read});
    }
    st->complete = complete;
    return;
  }
  const double prev_now = st->marks.back().now;
  const uint64_t base_seq = st->marks.back().seq;
  const bool both_complete = complete && st->complete;
  LeaseCounter count(t.table, st->queue, counters, events, t.now, &sessions_now);
  for (const LeaseRow& row : t.rows) {
    const auto [p, added] = st->leases.try_emplace(row.name.str());
    LeaseSeen& seen = p->second;
    if (added) {
      seen = {row, LeaseState::kHeld, read};
      if (both_complete) count(row.name, LeaseTransition::kAcquired, "", row.holder, 0, row.pid);
      continue;
    }
    if (seen.read == read) continue;  // a name twice in one read: its first row stands
    const LeaseRow& old = seen.row;
    LeaseState state = LeaseState::kHeld;
    // Judged by the database's own timestamps, never the exporter's clock.
    if (row.holder == old.holder) {
      state = JudgeSameHolder(row, seen, t, prev_now, mark, count);
    } else if (seen.state == LeaseState::kGivenBack || row.row_locked || old.row_locked) {
      // A row lock changes hands only when its transaction ends: the server itself keeps two
      // sessions from holding it at once.
      count(row.name, LeaseTransition::kHandover, old.holder, row.holder, old.pid, row.pid);
    } else if (t.has_expiry &&
               (t.has_taken_at ? row.taken_at >= old.expires_at : old.expires_at <= t.now)) {
      // Without taken_at, an old lease expired by now may have expired before the take.
      count(row.name, LeaseTransition::kExpiredTakeover, old.holder, row.holder);
    } else if (t.has_taken_at && row.taken_at == old.taken_at) {
      // Edited in place, not taken (a take writes taken_at): no give-back can explain it.
      count(row.name,
            !t.has_expiry || old.expires_at > t.now ? LeaseTransition::kOverlap
                                                    : LeaseTransition::kExpiredTakeover,
            old.holder, row.holder);
    } else {
      st->pending.push_back({row.name, base_seq, mark->seq, old.holder, row.holder});
    }
    seen.row = row;  // its texts are shared: the copy only changes their counts
    seen.state = state;
    seen.read = read;
  }
  for (auto it = st->leases.begin(); it != st->leases.end();) {
    if (it->second.read == read) {
      ++it;
      continue;
    }
    if (both_complete) {
      count(it->first, LeaseTransition::kReleased, it->second.row.holder, "", it->second.row.pid);
      // A row leaves a filtered table's read by an UPDATE as well as by a DELETE: claim neither,
      // which can only turn a later overlap into a hand-over, never the reverse.
      if (!t.filtered) mark->explained.deleted += 1;
    }
    it = st->leases.erase(it);
  }
  st->complete = complete;
}

void LeaseTransitions::ResolveHolderChanges(const std::string& table, LeaseTableState* st,
                                            Counters* counters, std::vector<Event>* events) {
  if (st->pending.empty()) return;
  const LeaseWriteMark& cur = st->marks.back();
  LeaseCounter count(table, st->queue, counters, events, cur.now);
  auto find = [&](uint64_t seq) {
    return std::find_if(st->marks.begin(), st->marks.end(),
                        [&](const LeaseWriteMark& m) { return m.seq == seq; });
  };
  std::vector<PendingHolderChange> still;
  for (const PendingHolderChange& p : st->pending) {
    const auto base = find(p.base_seq);
    const auto seen = find(p.seen_seq);
    // Without counters on both sides, or across a counter reset, nothing shows an overlap.
    if (!base->writes || !cur.writes || cur.writes->updated < base->writes->updated ||
        cur.writes->deleted < base->writes->deleted) {
      count(p.lease, LeaseTransition::kHandover, p.previous_holder, p.current_holder);
      continue;
    }
    // Writes since the read before the change that nothing seen since accounts for.
    int64_t deleted = cur.writes->deleted - base->writes->deleted;
    int64_t updated = cur.writes->updated - base->writes->updated;
    for (auto m = std::next(base); m != st->marks.end(); ++m) {
      deleted -= m->explained.deleted;
      updated -= m->explained.updated;
    }
    if (deleted >= 1) {  // deleted, then inserted by the next holder
      seen->explained.deleted += 1;
      count(p.lease, LeaseTransition::kHandover, p.previous_holder, p.current_holder);
    } else if (updated >= 2) {  // expiry moved to the past, then taken by an upsert
      seen->explained.updated += 2;
      count(p.lease, LeaseTransition::kHandover, p.previous_holder, p.current_holder);
    } else if (cur.now - seen->now >= kLeaseWritesDelaySeconds) {
      count(p.lease, LeaseTransition::kOverlap, p.previous_holder, p.current_holder);
    } else {
      still.push_back(p);
    }
  }
  st->pending = std::move(still);
}

}  // namespace pglock
