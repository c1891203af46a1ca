#include "exporter/events/pooled_locks.h"

#include <optional>
#include <set>
#include <unordered_map>

#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/poll_index.h"

namespace pglock {
namespace {

std::string ClientLabel(const std::string& application_name, const std::string& linked) {
  if (linked.empty()) return application_name;
  return application_name.empty() ? linked : application_name + " (" + linked + ")";
}

Event InheritedEvent(const PollData& data, const PooledLock& lock, const Session& s,
                     const std::string& client, const LockNames* names) {
  Event e;
  e.time = data.now;
  e.kind = EventKind::kPooledLockInherited;
  e.datname = lock.database;
  e.lock = LockLabel(lock.key, names);
  e.pooler = lock.pooler;
  Identity previous = IdentityOf(&s, lock.pid);
  previous.application_name = lock.last_application_name;
  previous.query.clear();
  e.previous = previous;
  e.current = IdentityOf(&s, lock.pid);
  e.previous_holder = lock.current_client;
  e.current_holder = client;
  return e;
}

}  // namespace

void PooledLockTracker::Restore(const std::vector<PooledLock>& locks) {
  for (const PooledLock& l : locks) locks_[{l.pooler, l.pid, l.backend_start, l.key}] = l;
}

void PooledLockTracker::Observe(const PollData& data, const LockNames* names, Counters* counters,
                                std::vector<Event>* events) {
  if (data.inventory) Judge(data, names, counters, events);
  if (counters == nullptr) return;
  for (const PoolerData& p : data.poolers) {
    for (const PooledServer& s : p.servers)
      counters->pooled_inherited[{p.name, s.database, s.user}];
  }
}

void PooledLockTracker::Judge(const PollData& data, const LockNames* names, Counters* counters,
                              std::vector<Event>* events) {
  std::optional<PollIndex> built;
  const PollIndex& index = IndexOf(data, &built);
  std::set<Id> seen;
  std::set<std::string> readable;  // poolers read at this poll
  // Connections that served another client at this poll: one inheritance each, however many
  // session locks they hold.
  std::set<std::pair<int, double>> served_another;
  for (const PoolerData& p : data.poolers) {
    if (!p.ok) continue;
    readable.insert(p.name);
    std::unordered_map<int, const PooledServer*> servers;
    for (const PooledServer& s : p.servers) servers[s.remote_pid] = &s;
    for (const AdvisoryLock& l : data.locks) {
      if (!l.granted) continue;
      const auto it = servers.find(l.pid);
      const Session* s = index.Find(l.pid);
      if (it == servers.end() || s == nullptr) continue;
      const PooledServer& server = *it->second;
      const Id id{p.name, l.pid, s->backend_start, l.key};
      seen.insert(id);
      const std::string client = ClientLabel(s->application_name, server.linked_client);
      auto [entry, added] = locks_.try_emplace(id);
      PooledLock& lock = entry->second;
      if (added) {
        lock.pooler = p.name;
        lock.database = server.database;
        lock.user = server.user;
        lock.pid = l.pid;
        lock.backend_start = s->backend_start;
        lock.key = l.key;
        lock.first_client = client;
        lock.current_client = client;
        lock.last_application_name = s->application_name;
        lock.last_linked_client = server.linked_client;
        lock.first_seen = data.now;
      }
      // The only proof of a session lock: held across the whole pg_locks read while the
      // connection stayed outside any transaction (AdvisoryLock::outside_transaction).
      if (l.outside_transaction) lock.state = PooledLockState::kSessionLock;
      const bool other_app = s->application_name != lock.last_application_name;
      const bool other_link = !server.linked_client.empty() && !lock.last_linked_client.empty() &&
                              server.linked_client != lock.last_linked_client;
      if (lock.state == PooledLockState::kSessionLock && (other_app || other_link)) {
        ++lock.inherited;
        if (counters != nullptr && served_another.insert({l.pid, s->backend_start}).second) {
          counters->pooled_inherited[{p.name, lock.database, lock.user}] += 1;
        }
        if (events != nullptr) events->push_back(InheritedEvent(data, lock, *s, client, names));
      }
      if (!server.linked_client.empty()) lock.last_linked_client = server.linked_client;
      lock.last_application_name = s->application_name;
      if (other_app || !server.linked_client.empty()) lock.current_client = client;
    }
  }
  // Released: gone from a complete read of its pooler and of pg_locks.
  for (auto it = locks_.begin(); it != locks_.end();) {
    const bool judged = readable.count(std::get<0>(it->first)) != 0;
    it = judged && seen.count(it->first) == 0 ? locks_.erase(it) : ++it;
  }
}

std::vector<const PooledLock*> PooledLockTracker::Locks() const {
  std::vector<const PooledLock*> out;
  out.reserve(locks_.size());
  for (const auto& [id, lock] : locks_) out.push_back(&lock);
  return out;
}

}  // namespace pglock
