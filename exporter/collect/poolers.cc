#include "exporter/collect/poolers.h"

#include <set>
#include <utility>

#include "exporter/queries.h"

namespace pglock {

bool ParsePgbouncer(const PgResult& pools, const PgResult& servers, PoolerData* data,
                    std::string* error) {
  const int p_db = pools.Column("database"), p_user = pools.Column("user"),
            p_mode = pools.Column("pool_mode");
  const int s_db = servers.Column("database"), s_user = servers.Column("user"),
            s_pid = servers.Column("remote_pid");
  if (p_db < 0 || p_user < 0 || p_mode < 0 || s_db < 0 || s_user < 0 || s_pid < 0) {
    *error = "PgBouncer too old: SHOW POOLS needs pool_mode and SHOW SERVERS remote_pid (1.18+)";
    return false;
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
    if (s.remote_pid != 0 && transaction_pools.count({s.database, s.user}) != 0) {
      data->servers.push_back(std::move(s));
    }
  }
  return true;
}

PoolerData CollectPooler(const PoolerConfig& pooler, std::unique_ptr<PgConnection>* conn,
                         SteadyClock::time_point deadline, const std::atomic<bool>* abort) {
  PoolerData data;
  data.name = pooler.name;
  std::string error;
  if (*conn && (*conn)->Broken()) conn->reset();
  if (!*conn) {
    *conn = PgConnection::Connect(pooler.admin_dsn, {{"application_name", "pglock_exporter"}},
                                  deadline, &error, abort);
    if (!*conn) {
      data.error = error;
      return data;
    }
  }
  // The admin console speaks only the simple protocol and one statement per query.
  std::optional<PgResult> pools, servers;
  if (!(*conn)->ExecOne(queries::kPgbouncerPools, {}, deadline, &pools, &error) ||
      !(*conn)->ExecOne(queries::kPgbouncerServers, {}, deadline, &servers, &error)) {
    data.error = error;
    conn->reset();
    return data;
  }
  if (!ParsePgbouncer(*pools, *servers, &data, &error)) {
    data.error = error;
    return data;
  }
  data.ok = true;
  return data;
}

}  // namespace pglock
