#include "exporter/collectors/poolers.h"

#include <set>
#include <unordered_map>
#include <utility>

#include "exporter/events/pooled_locks.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

using prometheus::MetricType;

const MetricDesc kPoolerUp{"pglock_pooler_up",
                           MetricType::Gauge,
                           "1 if the pooler's admin console answered at the last poll.",
                           {"target", "pooler"}};
const MetricDesc kPooledLocks{
    "pglock_pooled_session_advisory_locks",
    MetricType::Gauge,
    "Session advisory locks held by server connections of a transaction- or statement-mode "
    "PgBouncer pool: known session-scoped from the first poll that saw one held while its "
    "connection stayed outside any transaction across the whole read of pg_locks, until "
    "released.",
    {"target", "pooler", "database", "user"}};
const MetricDesc kInherited{
    "pglock_pooled_session_lock_inherited_total",
    MetricType::Counter,
    "A pooled server connection holding a session advisory lock served another client, which now "
    "holds the lock without having taken it (its own lock calls succeed re-entrantly).",
    {"target", "pooler", "database", "user"}};

// The admin connection of each pooler, by pooler name.
struct PoolerConnections : CollectorState {
  std::map<std::string, std::unique_ptr<PgConnection>> by_name;
};

PoolerData ReadPooler(const PoolerConfig& pooler, std::unique_ptr<PgConnection>* conn,
                      const PollContext& ctx) {
  PoolerData data;
  data.name = pooler.name;
  if (*conn && (*conn)->Broken()) conn->reset();
  if (!*conn) {
    const Status s = PgConnection::Connect(
        pooler.admin_dsn, {{"application_name", "pglock_exporter"}}, ctx.deadline, conn, ctx.abort);
    if (!s.ok()) {
      data.error = s.message();
      return data;
    }
  }
  // The admin console speaks only the simple protocol and one statement per query.
  std::optional<PgResult> pools, servers, clients;
  Status s = (*conn)->ExecOne(queries::kPgbouncerPools, {}, ctx.deadline, &pools);
  if (s.ok()) s = (*conn)->ExecOne(queries::kPgbouncerServers, {}, ctx.deadline, &servers);
  if (s.ok()) s = (*conn)->ExecOne(queries::kPgbouncerClients, {}, ctx.deadline, &clients);
  if (!s.ok()) {
    data.error = s.message();
    conn->reset();
    return data;
  }
  if (s = ParsePgbouncer(*pools, *servers, *clients, &data); !s.ok()) {
    data.error = s.message();
    return data;
  }
  data.ok = true;
  return data;
}

}  // namespace

Status ParsePgbouncer(const PgResult& pools, const PgResult& servers, const PgResult& clients,
                      PoolerData* data) {
  const int p_db = pools.Column("database"), p_user = pools.Column("user"),
            p_mode = pools.Column("pool_mode");
  const int s_db = servers.Column("database"), s_user = servers.Column("user"),
            s_pid = servers.Column("remote_pid"), s_link = servers.Column("link");
  const int c_ptr = clients.Column("ptr"), c_addr = clients.Column("addr"),
            c_port = clients.Column("port");
  if (p_db < 0 || p_user < 0 || p_mode < 0 || s_db < 0 || s_user < 0 || s_pid < 0 || s_link < 0 ||
      c_ptr < 0 || c_addr < 0 || c_port < 0) {
    return Status::UnexpectedShape(
        "PgBouncer too old: SHOW POOLS needs pool_mode, SHOW SERVERS remote_pid and link, SHOW "
        "CLIENTS ptr (1.18+)");
  }
  // The client each server connection serves right now: SHOW SERVERS.link = SHOW CLIENTS.ptr.
  std::map<std::string, std::string, std::less<>> client_by_ptr;
  for (int i = 0; i < clients.Rows(); ++i) {
    client_by_ptr[clients.String(i, c_ptr)] =
        clients.String(i, c_addr) + ":" + clients.String(i, c_port);
  }
  std::set<std::pair<std::string, std::string>> transaction_pools;
  for (int i = 0; i < pools.Rows(); ++i) {
    const std::string_view mode = pools.Text(i, p_mode);
    if (mode == "transaction" || mode == "statement") {
      transaction_pools.emplace(pools.String(i, p_db), pools.String(i, p_user));
    }
  }
  for (int i = 0; i < servers.Rows(); ++i) {
    PooledServer s;
    s.database = servers.String(i, s_db);
    s.user = servers.String(i, s_user);
    s.remote_pid = static_cast<int>(servers.Int(i, s_pid).value_or(0));
    if (const auto it = client_by_ptr.find(servers.Text(i, s_link)); it != client_by_ptr.end()) {
      s.linked_client = it->second;
    }
    if (s.remote_pid != 0 && transaction_pools.count({s.database, s.user}) != 0) {
      data->servers.push_back(std::move(s));
    }
  }
  return Status::Ok();
}

std::unique_ptr<CollectorState> PoolersCollector::NewState() const {
  return std::make_unique<PoolerConnections>();
}

Status PoolersCollector::Collect(const PollContext& ctx, CollectorState* state,
                                 PollData* data) const {
  auto& conns = static_cast<PoolerConnections*>(state)->by_name;
  for (const PoolerConfig& p : ctx.target->poolers) {
    data->poolers.push_back(ReadPooler(p, &conns[p.name], ctx));
  }
  return Status::Ok();
}

bool PoolersCollector::Healthy(const PollData& data) const {
  for (const PoolerData& p : data.poolers) {
    if (!p.ok) return false;
  }
  return true;
}

void PoolersCollector::BuildView(const PollData& data, const ViewContext& ctx,
                                 TargetView* view) const {
  PooledLockTracker this_poll_only;
  const PooledLockTracker* tracker = ctx.options->pooled;
  if (tracker == nullptr) {
    this_poll_only.Observe(data, nullptr, nullptr);
    tracker = &this_poll_only;
  }
  const auto locks = tracker->Locks();
  for (const PoolerData& p : data.poolers) {
    PoolerView pv;
    pv.name = p.name;
    pv.ok = p.ok;
    for (const PooledServer& s : p.servers) pv.session_locks[{s.database, s.user}];
    for (const PooledLock* l : locks) {
      if (l->pooler != p.name || l->state != PooledLockState::kSessionLock) continue;
      ++pv.session_locks[{l->database, l->user}];
      pv.locks.push_back({l->database, l->user, LockLabel(l->key, ctx.options->names), l->pid,
                          l->first_client, l->current_client,
                          std::max(0.0, data.now - l->first_seen), l->inherited});
    }
    view->poolers.push_back(std::move(pv));
  }
}

void PoolersCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                  Families* f) const {
  for (const PoolerView& p : v.poolers) {
    f->Add(kPoolerUp, {snap.target, p.name}, p.ok ? 1 : 0);
    for (const auto& [key, n] : p.session_locks) {
      f->Add(kPooledLocks, {snap.target, p.name, key.first, key.second}, static_cast<double>(n));
    }
  }
}

void PoolersCollector::ExposeCounters(const TargetSnapshot& snap, Families* f) const {
  for (const auto& [k, n] : snap.counters->pooled_inherited) {
    f->Add(kInherited, {snap.target, std::get<0>(k), std::get<1>(k), std::get<2>(k)}, n);
  }
}

PGLOCK_REGISTER_COLLECTOR(PoolersCollector, 100);

}  // namespace pglock
