#include "exporter/collectors/lock_waits.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "exporter/collectors/verdict_series.h"
#include "exporter/events/blocking_episodes.h"
#include "exporter/pg/columns.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

using prometheus::MetricType;

const MetricDesc kWaiters{
    "pglock_lock_waiters",
    MetricType::Gauge,
    "Sessions waiting for a heavyweight lock of this type (exact; a parallel query counts once, "
    "under its leader). Present while someone waits.",
    {"target", "datname", "locktype"}};
const MetricDesc kWaitMax{"pglock_lock_wait_seconds_max", MetricType::Gauge,
                          "Longest current wait for a lock of this type.", kWaiters.labels};
const MetricDesc kWaitSeconds{
    "pglock_lock_wait_seconds",
    MetricType::Gauge,
    "How long a session has waited for a lock, one series per waiter->blocker edge (top_n by "
    "wait; from pg_locks.waitstart on 14+). The blocker holds the object waited for; a session "
    "queued behind a waiter whose request conflicts with its own (readers behind a waiting ALTER "
    "TABLE) points at that waiter. blocker_pid 0, blocker_state prepared: a prepared transaction. "
    "relation: schema.table in the polled database, else the OID, else empty.",
    {"target", "datname", "locktype", "mode", "relation", "waiter_pid", "waiter_application_name",
     "waiter_usename", "blocker_pid", "blocker_application_name", "blocker_usename",
     "blocker_client_addr", "blocker_state"}};
const MetricDesc kRootBlocked{
    "pglock_blocking_root_blocked_sessions",
    MetricType::Gauge,
    "Sessions blocked by a root blocker (a blocker that waits for nothing), directly or through a "
    "chain (top_n by count). root_state prepared, root_pid 0: a prepared transaction; a "
    "background process shows its backend_type as root_application_name.",
    {"target", "datname", "root_pid", "root_application_name", "root_usename", "root_client_addr",
     "root_state"}};
const MetricDesc kRootStateSeconds{
    "pglock_blocking_root_state_seconds", MetricType::Gauge,
    "How long a root blocker has been in its current state (since PREPARE TRANSACTION for a "
    "prepared one): an idle-in-transaction root blocking many is the classic pile-up.",
    kRootBlocked.labels};
const MetricDesc kQueueDepth{
    "pglock_lock_queue_depth_max",
    MetricType::Gauge,
    "Longest chain of lock waits starting in this database: 1 when sessions wait on holders, 2 "
    "when a DDL waits behind a transaction and readers queue behind the DDL; 0 when nobody waits.",
    {"target", "datname"}};

const MetricDesc kEpisodes{
    "pglock_blocking_episodes_total",
    MetricType::Counter,
    "Blocking episodes ended (a root blocker blocking at least one session, from the first poll "
    "that saw it to the first that saw it block none), by how: released (the root let go, still "
    "connected), root_ended (its session ended), waiters_left (they gave up while it held).",
    {"target", "datname", "outcome"}};
const MetricDesc kEpisodeSeconds{
    "pglock_blocking_episode_duration_seconds",
    MetricType::Histogram,
    "How long blocking episodes lasted, between the polls that saw them start and end.",
    {"target"}};
const MetricDesc kEpisodePeak{"pglock_blocking_episode_peak_blocked",
                              MetricType::Histogram,
                              "Peak sessions blocked per blocking episode.",
                              {"target"}};

constexpr const char* kPreparedType = "prepared transaction";
constexpr const char* kPreparedName = "lock_waits_gated";

// A node of the wait graph: a process's pid (> 0), or a negative id for a prepared transaction.
using NodeId = int;
constexpr NodeId kFirstUnnamedPrepared = -1'000'000;

// What a waiting process asks for.
struct Request {
  std::string locktype;
  std::string mode;
  std::string relation;
  std::string locktag;
  std::string transactionid;
  uint32_t datid = 0;
  std::optional<double> waitstart;
  std::optional<AdvisoryKey> key;  // advisory requests
};

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

// A process that waits on a lock, and the graph node it counts as (a parallel worker counts as
// its leader: on-call acts on the leader's session).
struct WaitingProcess {
  int pid = 0;
  NodeId node = 0;
  const std::vector<int>* blocked_by = nullptr;
  std::string datname;
  std::optional<double> started;  // fallback for the wait's start on 12/13
};

// One waiting node.
struct Waiting {
  std::string datname;
  Request request;
  double seconds = 0;
  std::vector<NodeId> blockers;  // the holders of what it waits for, else the waiters ahead
};

// The waits of one poll as a graph. Borrows the PollData and PollIndex.
class WaitGraph {
 public:
  WaitGraph(const PollData& data, const PollIndex& index);

  const std::map<NodeId, Waiting>& waiting() const { return waiting_; }
  LockParticipant Participant(NodeId id) const;
  // The longest chain of waits from `id`: 0 when it waits for nothing. A cycle (a deadlock the
  // server has not broken yet) ends the chain where it closes.
  int64_t Depth(NodeId id);
  // Every waiting node that reaches `root` through edges, sorted.
  std::vector<NodeId> BlockedThrough(NodeId root) const;
  // The closed chains of waits (deadlocks not broken yet), each once, as its nodes in wait order.
  std::vector<std::vector<NodeId>> Cycles() const;
  const Session* Find(NodeId id) const { return id > 0 ? index_.Find(id) : nullptr; }

 private:
  LockParticipant Party(NodeId id) const;  // Participant() without the time in state
  std::optional<double> StateSince(NodeId id) const;
  std::vector<WaitingProcess> WaitingProcesses() const;
  void AddWait(const WaitingProcess& p, const Request& r,
               const std::unordered_map<NodeId, std::set<std::string>>& queued_for);
  NodeId PreparedBlocker(const Request& r, const std::string& datname);
  std::string DatnameOf(uint32_t datid) const { return datid == 0 ? "" : index_.Datname(datid); }
  int64_t Depth(NodeId id, std::set<NodeId>* path);

  const PollData& data_;
  const PollIndex& index_;
  std::unordered_map<int, const LockParty*> others_;  // background processes by pid
  std::vector<const LockParty*> prepared_;            // node -1 - i
  std::map<NodeId, std::string> unnamed_prepared_;    // node -> database
  std::map<NodeId, Waiting> waiting_;
  std::map<NodeId, int64_t> depth_;
};

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

constexpr const char* kStrongModes[] = {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock",
                                        "AccessExclusiveLock"};

// The strong relation lock request waiting directly on `root` with the most sessions queued
// behind it (readers behind an ALTER TABLE), if any.
std::optional<StrongRequest> StrongRequestOn(const WaitGraph& graph, NodeId root) {
  std::optional<StrongRequest> best;
  for (const auto& [id, w] : graph.waiting()) {
    if (w.request.locktype != "relation" ||
        std::find(w.blockers.begin(), w.blockers.end(), root) == w.blockers.end() ||
        std::find(std::begin(kStrongModes), std::end(kStrongModes), w.request.mode) ==
            std::end(kStrongModes)) {
      continue;
    }
    const auto queued = static_cast<int64_t>(graph.BlockedThrough(id).size());
    if (queued == 0 || (best && best->queued_behind >= queued)) continue;
    StrongRequest r;
    r.waiter = graph.Participant(id);
    if (const Session* s = graph.Find(id)) {
      r.datid = s->datid;
      r.roleid = s->usesysid;
    }
    r.mode = w.request.mode;
    r.relation = w.request.relation;
    r.seconds = w.seconds;
    r.queued_behind = queued;
    best = std::move(r);
  }
  return best;
}

// Roots: blockers that wait for nothing, with what waits behind them.
void BuildRoots(WaitGraph& graph, TargetView* view) {
  std::set<NodeId> roots;
  for (const auto& [id, w] : graph.waiting()) {
    for (const NodeId b : w.blockers) {
      if (graph.waiting().count(b) == 0) roots.insert(b);
    }
  }
  for (const NodeId r : roots) {
    BlockingRoot root;
    root.root = graph.Participant(r);
    root.state_seconds = root.root.state_seconds.value_or(0);
    for (const NodeId n : graph.BlockedThrough(r)) {
      root.blocked_pids.push_back(n);
      root.depth = std::max(root.depth, graph.Depth(n));
      root.longest_wait = std::max(root.longest_wait, graph.waiting().at(n).seconds);
    }
    root.strong_request = StrongRequestOn(graph, r);
    view->blocking_roots.push_back(std::move(root));
  }
  view->all_blocking_roots = view->blocking_roots;
}

// The cycles of waits a poll sees, each edge as the wait forest shows it.
void BuildCycles(const WaitGraph& graph, const std::vector<LockWaitEdge>& edges, TargetView* view) {
  for (const std::vector<NodeId>& cycle : graph.Cycles()) {
    DeadlockCycle c;
    for (size_t i = 0; i < cycle.size(); ++i) {
      const NodeId waiter = cycle[i], blocker = cycle[(i + 1) % cycle.size()];
      for (const LockWaitEdge& e : edges) {
        if (e.waiter.id.pid == waiter && e.blocker.id.pid == blocker) c.edges.push_back(e);
      }
    }
    view->deadlock_cycles.push_back(std::move(c));
  }
}

// Client addresses mean something for client sessions only; "local" is a Unix socket.
std::string AddrOf(const LockParticipant& p) {
  return p.backend_type == "client backend" ? AddrLabel(p.id.client_addr) : p.id.client_addr;
}

}  // namespace

std::vector<PreparedStatement> LockWaitsCollector::Prepared(int server_version_num) const {
  const char* leader_pid = server_version_num >= 130000 ? "a.leader_pid" : "NULL::int";
  return {{kPreparedName, FillTemplate(queries::kLockWaits, {{"leader_pid", leader_pid}})}};
}

void LockWaitsCollector::Plan(const PollPlan&, StatementBatch* batch) const {
  batch->AddExecute(name(), kPreparedName);
}

namespace {

LockParty ParseParty(const PgResult& r, int i, const std::map<std::string, int>& c) {
  LockParty p;
  p.pid = static_cast<int>(r.Int(i, c.at("pid")).value_or(0));
  p.leader_pid = static_cast<int>(r.Int(i, c.at("leader_pid")).value_or(0));
  if (p.leader_pid == p.pid) p.leader_pid = 0;  // a leader names itself
  p.backend_type = r.String(i, c.at("backend_type"));
  p.datid = static_cast<uint32_t>(r.Int(i, c.at("datid")).value_or(0));
  p.usename = r.String(i, c.at("usename"));
  p.application_name = r.String(i, c.at("application_name"));
  p.client_addr = r.String(i, c.at("client_addr"));
  p.state = r.String(i, c.at("state"));
  p.since = r.Double(i, c.at("since"));
  p.waiting_on_lock = r.Bool(i, c.at("waiting"));
  if (const int b = c.at("blocked_by"); !r.IsNull(i, b)) p.blocked_by = ParsePidList(r.Text(i, b));
  p.gid = r.String(i, c.at("gid"));
  p.xid = r.String(i, c.at("xid"));
  p.query = r.String(i, c.at("query"));
  return p;
}

}  // namespace

Status LockWaitsCollector::Parse(const PollPlan&, const BatchResults& results,
                                 PollData* data) const {
  data->lock_parties.clear();
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::UnexpectedShape("lock_waits: no result");
  Columns columns(*r, "lock_waits");
  std::map<std::string, int> c;
  for (const char* n :
       {"pid", "leader_pid", "backend_type", "datid", "usename", "application_name", "client_addr",
        "state", "since", "waiting", "blocked_by", "gid", "xid", "query"}) {
    c[n] = columns[n];
  }
  if (Status s = columns.status(); !s.ok()) return s;
  for (int i = 0; i < r->Rows(); ++i) data->lock_parties.push_back(ParseParty(*r, i, c));
  return Status::Ok();
}

void LockWaitsCollector::BuildView(const PollData& data, const ViewContext& ctx,
                                   TargetView* view) const {
  WaitGraph graph(data, *ctx.index);
  for (const auto& [id, w] : graph.waiting()) {
    LockTypeWaits& t = view->lock_waits_by_type[{w.datname, w.request.locktype}];
    ++t.waiters;
    t.wait_max = std::max(t.wait_max, w.seconds);
    DatabaseAggregate& agg = view->databases[w.datname];
    agg.lock_queue_depth_max = std::max(agg.lock_queue_depth_max, graph.Depth(id));
    const LockParticipant waiter = graph.Participant(id);
    const std::string lock = w.request.key ? LockLabel(*w.request.key, ctx.options->names) : "";
    for (const NodeId b : w.blockers) {
      view->lock_waits.push_back({w.datname, w.request.locktype, w.request.mode, w.request.relation,
                                  lock, waiter, graph.Participant(b), w.seconds});
    }
  }
  BuildRoots(graph, view);
  BuildCycles(graph, view->lock_waits, view);
  (*ctx.dropped)[kWaitSeconds.name] =
      KeepTopN(&view->lock_waits, ctx.top_n,
               [](const LockWaitEdge& a, const LockWaitEdge& b) { return a.seconds > b.seconds; });
  (*ctx.dropped)[kRootBlocked.name] =
      KeepTopN(&view->blocking_roots, ctx.top_n, [](const BlockingRoot& a, const BlockingRoot& b) {
        if (a.blocked_pids.size() != b.blocked_pids.size()) {
          return a.blocked_pids.size() > b.blocked_pids.size();
        }
        return a.state_seconds > b.state_seconds;
      });
}

void LockWaitsCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                    Families* f) const {
  const std::string& tg = snap.target;
  for (const auto& [key, t] : v.lock_waits_by_type) {
    f->Add(kWaiters, {tg, key.first, key.second}, static_cast<double>(t.waiters));
    f->Add(kWaitMax, {tg, key.first, key.second}, t.wait_max);
  }
  for (const auto& [db, a] : v.databases) {
    f->Add(kQueueDepth, {tg, db}, static_cast<double>(a.lock_queue_depth_max));
  }
  for (const LockWaitEdge& e : v.lock_waits) {
    const Identity& w = e.waiter.id;
    const Identity& b = e.blocker.id;
    f->Add(kWaitSeconds,
           {tg, e.datname, e.locktype, e.mode, e.relation, std::to_string(w.pid),
            w.application_name, w.usename, std::to_string(b.pid), b.application_name, b.usename,
            AddrOf(e.blocker), StateLabel(b.state)},
           e.seconds);
  }
  for (const BlockingRoot& r : v.blocking_roots) {
    const Identity& id = r.root.id;
    const std::vector<std::string> labels = {
        tg,         r.root.datname, std::to_string(id.pid), id.application_name,
        id.usename, AddrOf(r.root), StateLabel(id.state)};
    f->Add(kRootBlocked, labels, static_cast<double>(r.blocked_pids.size()));
    f->Add(kRootStateSeconds, labels, r.state_seconds);
    AddVerdictSeries(tg, VerdictSubject::kBlockingRoot, r.root.datname, id.pid, r.verdict, f);
  }
}

namespace {

void AddHistogram(const MetricDesc& desc, const std::string& target, const CountHistogram& h,
                  const std::vector<double>& bounds, Families* f) {
  if (h.bounds.empty()) {
    f->AddHistogram(desc, {target}, bounds, std::vector<double>(bounds.size(), 0), 0, 0);
  } else {
    f->AddHistogram(desc, {target}, h.bounds, h.counts, h.sum, h.count);
  }
}

}  // namespace

void LockWaitsCollector::ExposeCounters(const TargetSnapshot& snap, Families* f) const {
  for (const auto& [k, n] : snap.counters.blocking_episodes) {
    f->Add(kEpisodes, {snap.target, std::get<0>(k), std::get<1>(k)}, n);
  }
  AddHistogram(kEpisodeSeconds, snap.target, snap.counters.episode_seconds, kEpisodeSecondsBuckets,
               f);
  AddHistogram(kEpisodePeak, snap.target, snap.counters.episode_peak_blocked, kEpisodePeakBuckets,
               f);
}

PGLOCK_REGISTER_COLLECTOR(LockWaitsCollector, 50);

}  // namespace pglock
