#include "exporter/collectors/lock_waits.h"

#include <algorithm>
#include <map>
#include <set>

#include "exporter/collectors/verdict_series.h"
#include "exporter/collectors/wait_graph.h"
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

constexpr const char* kPreparedName = "lock_waits_gated";

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

// The statement's columns by index, looked up once a poll.
struct PartyColumns {
  int pid, leader_pid, backend_type, datid, usename, application_name, client_addr, state, since,
      waiting, blocked_by, gid, xid, query;
};

LockParty ParseParty(const PgResult& r, int i, const PartyColumns& c) {
  LockParty p;
  p.pid = static_cast<int>(r.Int(i, c.pid).value_or(0));
  p.leader_pid = static_cast<int>(r.Int(i, c.leader_pid).value_or(0));
  if (p.leader_pid == p.pid) p.leader_pid = 0;  // a leader names itself
  p.backend_type = r.String(i, c.backend_type);
  p.datid = static_cast<uint32_t>(r.Int(i, c.datid).value_or(0));
  p.usename = r.String(i, c.usename);
  p.application_name = r.String(i, c.application_name);
  p.client_addr = r.String(i, c.client_addr);
  p.state = r.String(i, c.state);
  p.since = r.Double(i, c.since);
  p.waiting_on_lock = r.Bool(i, c.waiting);
  if (!r.IsNull(i, c.blocked_by)) p.blocked_by = ParsePidList(r.Text(i, c.blocked_by));
  p.gid = r.String(i, c.gid);
  p.xid = r.String(i, c.xid);
  p.query = r.String(i, c.query);
  return p;
}

}  // namespace

Status LockWaitsCollector::Parse(const PollPlan&, const BatchResults& results,
                                 PollData* data) const {
  data->lock_parties.clear();
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::UnexpectedShape("lock_waits: no result");
  Columns columns(*r, "lock_waits");
  const PartyColumns c{columns["pid"],         columns["leader_pid"], columns["backend_type"],
                       columns["datid"],       columns["usename"],    columns["application_name"],
                       columns["client_addr"], columns["state"],      columns["since"],
                       columns["waiting"],     columns["blocked_by"], columns["gid"],
                       columns["xid"],         columns["query"]};
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
  for (const auto& [k, n] : snap.counters->blocking_episodes) {
    f->Add(kEpisodes, {snap.target, std::get<0>(k), std::get<1>(k)}, n);
  }
  AddHistogram(kEpisodeSeconds, snap.target, snap.counters->episode_seconds, kEpisodeSecondsBuckets,
               f);
  AddHistogram(kEpisodePeak, snap.target, snap.counters->episode_peak_blocked, kEpisodePeakBuckets,
               f);
}

PGLOCK_REGISTER_COLLECTOR(LockWaitsCollector, 50);

}  // namespace pglock
