#include "exporter/collectors/wait_graph.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace pglock {
namespace {

constexpr const char* kPreparedType = "prepared transaction";

// Nodes of prepared transactions pg_blocking_pids() leaves unnamed count down from here.
constexpr NodeId kFirstUnnamedPrepared = -1'000'000;

// Every pending request by pid, from the poll's one read of pg_locks (the advisory statement).
std::unordered_map<int, Request> Requests(const PollData& data) {
  std::unordered_map<int, Request> out;
  for (const LockWaitRow& r : data.lock_waits) {
    out[r.pid] = {r.locktype,      r.mode,  r.relation,  r.locktag,
                  r.transactionid, r.datid, r.waitstart, std::nullopt};
  }
  for (const AdvisoryLock& l : data.locks) {
    if (l.granted) continue;
    const std::string tag = "advisory:" + std::to_string(l.key.datid) + ":" +
                            std::to_string(l.key.objsubid) + ":" + RenderAdvisoryKey(l.key);
    out[l.pid] = {"advisory",  l.exclusive ? "ExclusiveLock" : "ShareLock",
                  "",          tag,
                  "",          l.key.datid,
                  l.waitstart, l.key};
  }
  return out;
}

}  // namespace

WaitGraph::WaitGraph(const PollData& data, const PollIndex& index) : data_(data), index_(index) {
  for (const LockParty& p : data.lock_parties) {
    if (p.pid == 0) {
      prepared_.push_back(&p);
    } else {
      others_[p.pid] = &p;
    }
  }
  const std::unordered_map<int, Request> requests = Requests(data);
  const std::vector<WaitingProcess> processes = WaitingProcesses();
  // What each node waits for: a blocker queued for the same object does not hold it.
  std::unordered_map<NodeId, std::set<std::string>> queued_for;
  for (const WaitingProcess& p : processes) {
    if (const auto it = requests.find(p.pid); it != requests.end()) {
      queued_for[p.node].insert(it->second.locktag);
    }
  }
  for (const WaitingProcess& p : processes) {
    // No pending request: its wait ended between the activity read and the pg_locks read.
    if (const auto it = requests.find(p.pid); it != requests.end())
      AddWait(p, it->second, queued_for);
  }
}

std::vector<WaitingProcess> WaitGraph::WaitingProcesses() const {
  std::vector<WaitingProcess> out;
  for (const Session& s : data_.sessions) {
    if (s.waiting_on_lock) out.push_back({s.pid, s.pid, &s.blocked_by, s.datname, s.query_start});
  }
  for (const auto& [pid, p] : others_) {
    if (!p->waiting_on_lock) continue;
    const NodeId node = p->leader_pid > 0 ? p->leader_pid : pid;
    out.push_back({pid, node, &p->blocked_by, DatnameOf(p->datid), p->since});
  }
  return out;
}

void WaitGraph::AddWait(const WaitingProcess& p, const Request& r,
                        const std::unordered_map<NodeId, std::set<std::string>>& queued_for) {
  const std::string datname =
      !p.datname.empty() || r.datid == 0 ? p.datname : index_.Datname(r.datid);
  // pg_blocking_pids() also names the waiters queued ahead whose requests conflict. On-call acts
  // on holders, so edges go to the blockers that do not wait for this same object; when all of
  // them do (readers behind a waiting ALTER TABLE) the waiters ahead are what blocks it.
  std::vector<NodeId> all, holders;
  for (const int pid : *p.blocked_by) {
    const NodeId b = pid == 0 ? PreparedBlocker(r, datname) : pid;
    if (b == p.node || std::find(all.begin(), all.end(), b) != all.end()) continue;
    all.push_back(b);
    const auto q = queued_for.find(b);
    if (q == queued_for.end() || q->second.count(r.locktag) == 0) holders.push_back(b);
  }
  double seconds = 0;
  if (r.waitstart) {
    seconds = data_.now - *r.waitstart;
  } else if (data_.server_version_num < 140000 && p.started) {
    seconds = data_.now - *p.started;
  }
  seconds = std::max(seconds, 0.0);
  Waiting& w = waiting_[p.node];
  if (w.request.locktype.empty() || seconds > w.seconds) {
    w.datname = datname;
    w.request = r;
    w.seconds = seconds;
  }
  for (const NodeId b : holders.empty() ? all : holders) {
    if (std::find(w.blockers.begin(), w.blockers.end(), b) == w.blockers.end()) {
      w.blockers.push_back(b);
    }
  }
}

NodeId WaitGraph::PreparedBlocker(const Request& r, const std::string& datname) {
  // pg_blocking_pids() says 0, not which one: the one whose transaction is waited for, else the
  // only one in the waiter's database (or on the server), else an unnamed one of that database.
  std::vector<size_t> in_database;
  for (size_t i = 0; i < prepared_.size(); ++i) {
    if (!r.transactionid.empty() && prepared_[i]->xid == r.transactionid) {
      return -1 - static_cast<NodeId>(i);
    }
    if (DatnameOf(prepared_[i]->datid) == datname) in_database.push_back(i);
  }
  if (in_database.size() == 1) return -1 - static_cast<NodeId>(in_database[0]);
  if (prepared_.size() == 1) return -1;
  for (const auto& [node, db] : unnamed_prepared_) {
    if (db == datname) return node;
  }
  const NodeId node = kFirstUnnamedPrepared - static_cast<NodeId>(unnamed_prepared_.size());
  unnamed_prepared_[node] = datname;
  return node;
}

LockParticipant WaitGraph::Participant(NodeId id) const {
  LockParticipant p = Party(id);
  if (const std::optional<double> since = StateSince(id)) {
    p.state_seconds = std::max(0.0, data_.now - *since);
  }
  return p;
}

LockParticipant WaitGraph::Party(NodeId id) const {
  LockParticipant p;
  if (id <= 0) {
    p.backend_type = kPreparedType;
    p.id.state = "prepared";
    const auto i = static_cast<size_t>(-1 - id);
    if (id > kFirstUnnamedPrepared && i < prepared_.size()) {
      p.datname = DatnameOf(prepared_[i]->datid);
      p.id.usename = prepared_[i]->usename;
      p.gid = prepared_[i]->gid;
    } else if (const auto it = unnamed_prepared_.find(id); it != unnamed_prepared_.end()) {
      p.datname = it->second;
    }
    return p;
  }
  p.id.pid = id;
  if (const Session* s = index_.Find(id)) {
    p.id = IdentityOf(s, id);
    p.datname = s->datname;
  } else if (const auto it = others_.find(id); it != others_.end()) {
    const LockParty& o = *it->second;
    p.backend_type = o.backend_type;
    // Background processes mostly have no application_name: their backend_type says what they are.
    p.id = {id,
            o.application_name.empty() ? o.backend_type : o.application_name,
            o.client_addr,
            o.usename,
            o.state,
            ""};
    p.datname = DatnameOf(o.datid);
  } else {
    p.backend_type.clear();  // ended since, or not visible to the exporter's role
  }
  return p;
}

std::optional<double> WaitGraph::StateSince(NodeId id) const {
  if (id <= 0) {
    const auto i = static_cast<size_t>(-1 - id);
    if (id > kFirstUnnamedPrepared && i < prepared_.size()) return prepared_[i]->since;
    return std::nullopt;
  }
  if (const Session* s = index_.Find(id)) return s->state_change;
  if (const auto it = others_.find(id); it != others_.end()) return it->second->since;
  return std::nullopt;
}

int64_t WaitGraph::Depth(NodeId id) {
  std::set<NodeId> path;
  return Depth(id, &path);
}

int64_t WaitGraph::Depth(NodeId id, std::set<NodeId>* path) {
  const auto w = waiting_.find(id);
  if (w == waiting_.end()) return 0;
  if (const auto known = depth_.find(id); known != depth_.end()) return known->second;
  if (!path->insert(id).second) return 0;  // the chain closed on itself
  int64_t deepest = 0;
  for (const NodeId b : w->second.blockers) deepest = std::max(deepest, Depth(b, path));
  path->erase(id);
  depth_[id] = deepest + 1;
  return deepest + 1;
}

std::vector<NodeId> WaitGraph::BlockedThrough(NodeId root) const {
  std::map<NodeId, std::vector<NodeId>> waiting_on;  // blocker -> its waiters
  for (const auto& [id, w] : waiting_) {
    for (const NodeId b : w.blockers) waiting_on[b].push_back(id);
  }
  std::set<NodeId> seen;
  std::vector<NodeId> todo = {root};
  while (!todo.empty()) {
    const NodeId n = todo.back();
    todo.pop_back();
    const auto it = waiting_on.find(n);
    if (it == waiting_on.end()) continue;
    for (const NodeId w : it->second) {
      if (w != root && seen.insert(w).second) todo.push_back(w);
    }
  }
  return {seen.begin(), seen.end()};
}

std::vector<std::vector<NodeId>> WaitGraph::Cycles() const {
  std::vector<std::vector<NodeId>> out;
  std::set<std::set<NodeId>> seen;
  std::set<NodeId> done;
  // Depth-first from every waiting node; a blocker already on the path closes a cycle.
  std::vector<NodeId> path;
  std::function<void(NodeId)> visit = [&](NodeId n) {
    const auto w = waiting_.find(n);
    if (w == waiting_.end() || done.count(n) != 0) return;
    path.push_back(n);
    for (const NodeId b : w->second.blockers) {
      const auto on = std::find(path.begin(), path.end(), b);
      if (on != path.end()) {
        std::vector<NodeId> cycle(on, path.end());
        if (seen.insert({cycle.begin(), cycle.end()}).second) out.push_back(std::move(cycle));
      } else {
        visit(b);
      }
    }
    path.pop_back();
    done.insert(n);
  };
  for (const auto& [id, w] : waiting_) visit(id);
  return out;
}

}  // namespace pglock
