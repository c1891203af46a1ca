#include "exporter/snapshot/analyze.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "exporter/snapshot/timeouts.h"

namespace pglock {
namespace {

Identity IdentityOf(const Session* s, int pid) {
  Identity id;
  id.pid = pid;
  if (s != nullptr) {
    id.application_name = s->application_name;
    id.client_addr = s->client_addr;
    id.usename = s->usename;
    id.state = s->state;
  }
  return id;
}

class Index {
 public:
  explicit Index(const PollData& data) {
    for (const Session& s : data.sessions) {
      by_pid_[s.pid] = &s;
      if (!s.datname.empty()) datnames_[s.datid] = s.datname;
    }
    if (data.database_stats) {
      for (const DatabaseStats& d : *data.database_stats) datnames_[d.datid] = d.datname;
    }
  }

  const Session* Find(int pid) const {
    const auto it = by_pid_.find(pid);
    return it == by_pid_.end() ? nullptr : it->second;
  }

  std::string Datname(uint32_t datid) const {
    const auto it = datnames_.find(datid);
    return it == datnames_.end() ? std::to_string(datid) : it->second;
  }

 private:
  std::unordered_map<int, const Session*> by_pid_;
  std::unordered_map<uint32_t, std::string> datnames_;
};

}  // namespace

std::string LockLabel(const AdvisoryKey& key, const LockNames* names) {
  if (names != nullptr) {
    const auto it = names->find({key.classid, key.objid, key.objsubid});
    if (it != names->end()) return it->second;
  }
  return RenderAdvisoryKey(key);
}

TargetView Analyze(const PollData& data, const AnalyzeOptions& options, HoldHistory* history,
                   std::map<std::string, int64_t>* dropped) {
  TargetView view;
  view.inventory = data.inventory;
  const Index index(data);
  const size_t top_n = static_cast<size_t>(std::max(options.top_n, 1));

  // Every database with a client session gets its aggregates, zero or not, so alerts on them
  // see 0 rather than an absent series on a quiet server.
  for (const Session& s : data.sessions) {
    if (!s.datname.empty()) view.databases[s.datname];
  }

  std::unordered_set<int> advisory_holders;  // pids holding at least one granted advisory lock
  std::set<int> blockers;                    // pids that block some waiting session
  for (const Session& s : data.sessions) blockers.insert(s.blocked_by.begin(), s.blocked_by.end());

  // Advisory locks, first pass: exact per-database counts and the age of every held lock, with
  // no strings built, since there can be 100k of them; labels are made for the top_n only.
  struct HeldCandidate {
    double seconds;
    const AdvisoryLock* lock;
    const Session* session;
  };
  std::vector<HeldCandidate> held;
  held.reserve(data.locks.size());
  std::unordered_map<uint32_t, DatabaseAggregate> by_datid;
  std::vector<const AdvisoryLock*> waiting;
  std::vector<HoldHistory::Entry> next_history;
  next_history.reserve(data.locks.size());
  const auto& history_entries = history->first_seen;
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted) {
      waiting.push_back(&l);
      continue;
    }
    ++by_datid[l.key.datid].advisory_locks_held;
    advisory_holders.insert(l.pid);
    const Session* s = index.Find(l.pid);
    HoldHistory::Entry entry{l.pid, s != nullptr ? s->backend_start : 0, l.key, data.now};
    const auto it = std::lower_bound(
        history_entries.begin(), history_entries.end(), entry,
        [](const HoldHistory::Entry& a, const HoldHistory::Entry& b) { return a.Id() < b.Id(); });
    if (it != history_entries.end() && it->Id() == entry.Id()) {
      entry.first_seen = it->first_seen;
    } else if (s != nullptr && s->NotRunning() && s->state_change) {
      // Not running a statement: the lock was taken no later than the last state change.
      entry.first_seen = std::min(*s->state_change, data.now);
    }
    double since = entry.first_seen;
    if (s != nullptr && s->xact_start) since = std::max(since, *s->xact_start);
    held.push_back({std::max(0.0, data.now - since), &l, s});
    next_history.push_back(entry);
  }
  if (data.inventory) {
    std::sort(
        next_history.begin(), next_history.end(),
        [](const HoldHistory::Entry& a, const HoldHistory::Entry& b) { return a.Id() < b.Id(); });
    history->first_seen = std::move(next_history);
  }

  // Waits, with the holders of the keys waited for.
  std::map<AdvisoryKey, std::set<int>> granted;  // only keys somebody waits for
  for (const AdvisoryLock* w : waiting) granted[w->key];
  if (!waiting.empty()) {
    for (const AdvisoryLock& l : data.locks) {
      if (!l.granted) continue;
      if (const auto it = granted.find(l.key); it != granted.end()) it->second.insert(l.pid);
    }
  }
  for (const AdvisoryLock* w : waiting) {
    const AdvisoryLock& l = *w;
    const Session* s = index.Find(l.pid);
    DatabaseAggregate& agg = by_datid[l.key.datid];
    double waited = 0;
    if (l.waitstart) {
      waited = data.now - *l.waitstart;
    } else if (data.server_version_num < 140000 && s != nullptr && s->query_start) {
      waited = data.now - *s->query_start;
    }
    waited = std::max(waited, 0.0);
    ++agg.advisory_waiters;
    agg.advisory_wait_max = std::max(agg.advisory_wait_max, waited);
    if (s == nullptr) continue;
    // pg_blocking_pids() also names sessions queued ahead for the same lock. On-call needs the
    // holders (the pids to act on), so edges go to the sessions that hold this key; only when
    // none of the blockers holds it (a queue of waiters) are they all kept.
    std::vector<int> edges;
    const std::set<int>& holders = granted[l.key];
    for (int pid : s->blocked_by) {
      if (holders.count(pid) != 0) edges.push_back(pid);
    }
    if (edges.empty()) edges = s->blocked_by;
    const std::string datname = index.Datname(l.key.datid);
    const std::string lock = LockLabel(l.key, options.names);
    for (int blocker_pid : edges) {
      view.waits.push_back({datname, lock, IdentityOf(s, l.pid),
                            IdentityOf(index.Find(blocker_pid), blocker_pid), waited});
    }
  }
  for (const auto& [datid, counts] : by_datid) {
    DatabaseAggregate& agg = view.databases[index.Datname(datid)];
    agg.advisory_locks_held += counts.advisory_locks_held;
    agg.advisory_waiters += counts.advisory_waiters;
    agg.advisory_wait_max = std::max(agg.advisory_wait_max, counts.advisory_wait_max);
  }

  // Held locks: the top_n oldest get their labels.
  const size_t keep = std::min(held.size(), top_n);
  std::partial_sort(
      held.begin(), held.begin() + static_cast<std::ptrdiff_t>(keep), held.end(),
      [](const HeldCandidate& a, const HeldCandidate& b) { return a.seconds > b.seconds; });
  (*dropped)["pglock_advisory_lock_held_seconds"] = static_cast<int64_t>(held.size() - keep);
  for (size_t i = 0; i < keep; ++i) {
    const HeldCandidate& h = held[i];
    const bool session_scope =
        h.session != nullptr && !h.session->state.empty() && !h.session->xact_start;
    view.held.push_back({index.Datname(h.lock->key.datid), LockLabel(h.lock->key, options.names),
                         IdentityOf(h.session, h.lock->pid), session_scope ? "session" : "unknown",
                         h.seconds});
  }

  // Idle in transaction, and which of those sessions hold something others need.
  for (const Session& s : data.sessions) {
    if (s.state.empty()) ++view.hidden_sessions;
    if (!s.IdleInTransaction()) continue;
    DatabaseAggregate& agg = view.databases[s.datname];
    const double idle = s.state_change ? std::max(0.0, data.now - *s.state_change) : 0;
    ++agg.idle_in_transaction;
    agg.idle_in_transaction_max = std::max(agg.idle_in_transaction_max, idle);
    const bool holds = advisory_holders.count(s.pid) != 0;
    const bool blocks = blockers.count(s.pid) != 0;
    if (!holds && !blocks) continue;
    ++agg.idle_in_transaction_holders;
    IdleHolder h;
    h.datname = s.datname;
    h.holder = IdentityOf(&s, s.pid);
    h.holds = holds && blocks ? "advisory,blocking" : holds ? "advisory" : "blocking";
    h.seconds = idle;
    const double timeout = EffectiveTimeout("idle_in_transaction_session_timeout", s.datid,
                                            s.usesysid, data.settings, data.overrides);
    if (timeout > 0) h.remaining = timeout - idle;
    view.idle_holders.push_back(std::move(h));
  }

  // Clients: who connects, in which state, and how many of their sessions sit on a lock.
  std::map<ClientKey, ClientRow> clients;
  for (const Session& s : data.sessions) {
    ClientKey key{s.datname, s.application_name, s.client_addr, s.usename};
    ClientRow& row = clients[key];
    row.key = key;
    ++row.sessions_by_state[s.state.empty() ? "unknown" : s.state];
    ++row.total;
    if (s.NotRunning() && advisory_holders.count(s.pid) != 0) ++row.idle_lock_holders;
  }
  for (auto& [key, row] : clients) view.clients.push_back(std::move(row));

  (*dropped)["pglock_advisory_lock_wait_seconds"] =
      KeepTopN(&view.waits, top_n,
               [](const WaitEdge& a, const WaitEdge& b) { return a.seconds > b.seconds; });
  (*dropped)["pglock_idle_in_transaction_holder_seconds"] =
      KeepTopN(&view.idle_holders, top_n, [](const IdleHolder& a, const IdleHolder& b) {
        if (a.remaining.has_value() != b.remaining.has_value()) return a.remaining.has_value();
        if (a.remaining && *a.remaining != *b.remaining) return *a.remaining < *b.remaining;
        return a.seconds > b.seconds;
      });
  (*dropped)["pglock_client_sessions"] =
      KeepTopN(&view.clients, top_n, [](const ClientRow& a, const ClientRow& b) {
        if (a.idle_lock_holders != b.idle_lock_holders) {
          return a.idle_lock_holders > b.idle_lock_holders;
        }
        return a.total > b.total;
      });

  view.settings = data.settings;
  view.overrides = data.overrides;

  // Leases.
  for (const LeaseTableData& t : data.leases) {
    LeaseTableView tv;
    tv.table = t.table;
    tv.ok = t.ok;
    tv.held = t.held;
    tv.expired = t.expired;
    const LeaseTableRules* rules = nullptr;
    for (const LeaseTableRules& r : options.lease_rules) {
      if (r.table == t.table) rules = &r;
    }
    const bool split = rules != nullptr && rules->matcher && !rules->holder_labels.empty();
    if (split) tv.holder_labels = rules->holder_labels;
    for (const LeaseRow& row : t.rows) {
      LeaseView lv;
      lv.lease = row.name;
      lv.holder = row.holder;
      lv.held = row.expires_at > t.now;
      lv.age = t.now - row.taken_at;
      lv.expires_in = row.expires_at - t.now;
      if (split) {
        auto parts = rules->matcher->Match(row.holder);
        lv.holder_parts =
            parts ? std::move(*parts) : std::vector<std::string>(rules->holder_labels.size());
      }
      tv.leases.push_back(std::move(lv));
    }
    view.leases.push_back(std::move(tv));
  }

  // Session advisory locks held by server connections of transaction-mode pools.
  for (const PoolerData& p : data.poolers) {
    PoolerView pv;
    pv.name = p.name;
    pv.ok = p.ok;
    std::unordered_map<int, const PooledServer*> servers;
    for (const PooledServer& s : p.servers) {
      servers[s.remote_pid] = &s;
      pv.session_locks[{s.database, s.user}];
    }
    for (const AdvisoryLock& l : data.locks) {
      if (!l.granted) continue;
      const auto it = servers.find(l.pid);
      if (it == servers.end()) continue;
      const Session* s = index.Find(l.pid);
      // Outside a transaction only a session lock can be held: it has outlived its client.
      if (s != nullptr && !s->xact_start) {
        ++pv.session_locks[{it->second->database, it->second->user}];
      }
    }
    view.poolers.push_back(std::move(pv));
  }
  return view;
}

}  // namespace pglock
