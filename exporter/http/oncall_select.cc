#include "exporter/http/oncall_select.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "exporter/events/event_log.h"

namespace pglock {
namespace {

bool Match(const std::string& want, const std::string& have) {
  return want.empty() || want == have;
}

const char* LeaseState(const LeaseTableView& table, const LeaseView& l) {
  const double too_long = table.max_hold > 0 ? table.max_hold : kLeaseHeldTooLongSeconds;
  // A lease without an expiry (held_sql, row_lock) is held until its row says otherwise.
  if (!table.has_expiry || !l.expires_in)
    return l.held && l.age > too_long ? "held too long" : nullptr;
  if (!l.held || *l.expires_in <= 0) return "expired";
  if (*l.expires_in < kLeaseExpiringSeconds) return "expiring";
  if (l.age > too_long) return "held too long";
  return nullptr;
}

// The lock table of a target whose table is full (its polls fail with SQLSTATE 53200) or filling
// (kLockTableFillingRatio of its slots used), null otherwise.
const LockTableView* ShowLockTable(const TargetSnapshot& snap) {
  if (!snap.lock_table || !snap.lock_table->counted || !(snap.up || snap.lock_table_full))
    return nullptr;
  const LockTableView& v = *snap.lock_table;
  const bool filling = v.slots > 0 && static_cast<double>(v.entries) >=
                                          kLockTableFillingRatio * static_cast<double>(v.slots);
  return snap.lock_table_full || filling ? &v : nullptr;
}

TargetPart Select(const TargetSnapshot& snap, const LocksFilter& f) {
  TargetPart t;
  t.snap = &snap;
  t.lock_table = ShowLockTable(snap);
  if (snap.events) {
    for (const auto& e : *snap.events) {
      if (f.lock.empty() || e->lock == f.lock || e->lease == f.lock) t.events.push_back(e.get());
    }
  }
  if (!snap.view) return t;
  const TargetView& v = *snap.view;
  for (const auto& [db, agg] : v.databases) {
    t.waiters += agg.advisory_waiters;
    t.held_total += agg.advisory_locks_held;
  }
  for (const auto& [key, w] : v.lock_waits_by_type) t.lock_waiters += w.waiters;
  std::set<int> pids;  // sessions involved with the lock asked for
  for (const LockWaitEdge& w : v.lock_waits) {
    if (!f.lock.empty() && f.lock != w.lock && f.lock != w.relation) continue;
    t.waits.push_back(w);
    pids.insert(w.blocker.id.pid);
  }
  t.forest = BuildWaitForest(t.waits, v.blocking_roots);
  for (const HeldLock& h : v.held) {
    if (!Match(f.lock, h.lock)) continue;
    t.held.push_back(&h);
    pids.insert(h.holder.pid);
  }
  for (const RowLockHolder& r : v.row_locks) {
    if (!Match(f.lock, r.lease)) continue;
    t.row_locks.push_back(&r);
    pids.insert(r.holder.pid);
  }
  for (const IdleHolder& h : v.idle_holders) {
    if (f.lock.empty() || pids.count(h.holder.pid) != 0) t.idle.push_back(&h);
  }
  for (const PoolerView& p : v.poolers) {
    for (const PooledLockRow& l : p.locks) {
      if (Match(f.lock, l.lock)) t.pooled.push_back({p.name, &l});
    }
  }
  // Inherited first, then the longest held.
  t.pooled_total = t.pooled.size();
  std::stable_sort(t.pooled.begin(), t.pooled.end(), [](const auto& a, const auto& b) {
    if (a.second->inherited != b.second->inherited)
      return a.second->inherited > b.second->inherited;
    return a.second->seconds > b.second->seconds;
  });
  if (t.pooled.size() > kPagePooledLocks) t.pooled.resize(kPagePooledLocks);
  for (const LeaseTableView& table : v.leases) {
    for (const LeaseView& l : table.leases) {
      if (!Match(f.lock, l.lease)) continue;
      if (const char* state = LeaseState(table, l)) {
        t.leases.push_back({table.table, &l, state});
      } else {
        ++t.leases_fine;
      }
    }
  }
  // A job queue's thousands of expired rows must not make the page: the worst first.
  const auto rank = [](const LeaseItem& l) {
    return std::string_view(l.state) == "expired" ? 0 : l.state[0] == 'h' ? 1 : 2;
  };
  std::stable_sort(t.leases.begin(), t.leases.end(), [&](const LeaseItem& a, const LeaseItem& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a.lease->age > b.lease->age;
  });
  t.leases_total = t.leases.size();
  if (t.leases.size() > kPageLeases) t.leases.resize(kPageLeases);
  return t;
}

}  // namespace

std::vector<TargetPart> SelectTargetParts(const SnapshotList& snapshots, const LocksFilter& f) {
  std::vector<TargetPart> out;
  for (const auto& s : snapshots) {
    if (!s || !Match(f.target, s->target)) continue;
    out.push_back(Select(*s, f));
    out.back().index = out.size() - 1;
    out.back().filter = f;
  }
  return out;
}

std::pair<const SessionLockTableEntries*, int64_t> TopFiller(const LockTableView& v) {
  std::map<int, int64_t> by_pid;
  for (const SessionLockTableEntries& e : v.sessions) by_pid[e.session.pid] += e.entries;
  const SessionLockTableEntries* top = nullptr;
  for (const SessionLockTableEntries& e : v.sessions) {
    if (e.session.pid == 0) continue;
    if (top == nullptr || by_pid[e.session.pid] > by_pid[top->session.pid]) top = &e;
  }
  return {top, top == nullptr ? 0 : by_pid[top->session.pid]};
}

bool FromServerLog(const Event& e) {
  return e.evidence == EndEvidence::kLog &&
         (e.kind == EventKind::kLockWait || e.kind == EventKind::kLockTimeout ||
          e.kind == EventKind::kDeadlock);
}

std::vector<const Event*> LoggedEvents(const TargetPart& t) {
  std::vector<const Event*> out;
  for (auto it = t.events.rbegin(); it != t.events.rend() && out.size() < kPageLogged; ++it) {
    if (FromServerLog(**it)) out.push_back(*it);
  }
  return out;
}

}  // namespace pglock
