#include "exporter/collect/core.h"

#include <charconv>

#include "exporter/config/duration.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

std::vector<int> ParsePidList(std::string_view text) {
  std::vector<int> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    int pid = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), pid);
    if (ec == std::errc() && end == part.data() + part.size()) out.push_back(pid);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

bool CheckColumns(const PgResult& r, int want, const char* what, std::string* error) {
  if (r.Columns() != want) {
    *error = std::string(what) + ": expected " + std::to_string(want) + " columns, got " +
             std::to_string(r.Columns());
    return false;
  }
  return true;
}

// The unit a setting is written in when it has none, for values in pg_db_role_setting.
PgBaseUnit BaseUnitOf(const std::string& name) {
  return name.rfind("tcp_keepalives_", 0) == 0 ? PgBaseUnit::kSeconds : PgBaseUnit::kMilliseconds;
}

}  // namespace

std::string FillTemplate(std::string sql,
                         const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values) {
    const std::string placeholder = "{" + key + "}";
    for (size_t pos = sql.find(placeholder); pos != std::string::npos;
         pos = sql.find(placeholder, pos + value.size())) {
      sql.replace(pos, placeholder.size(), value);
    }
  }
  return sql;
}

bool ParseServer(const PgResult& r, PollData* data, std::string* error) {
  if (!CheckColumns(r, 4, "server", error)) return false;
  if (r.Rows() != 1) {
    *error = "server: expected one row";
    return false;
  }
  data->server_version = r.String(0, 0);
  data->server_version_num = static_cast<int>(r.Int(0, 1).value_or(0));
  data->postmaster_start = r.Double(0, 2).value_or(0);
  data->now = r.Double(0, 3).value_or(0);
  return true;
}

bool ParseActivity(const PgResult& r, PollData* data, std::string* error) {
  if (!CheckColumns(r, 15, "activity", error)) return false;
  data->sessions.clear();
  data->sessions.reserve(static_cast<size_t>(r.Rows()));
  for (int i = 0; i < r.Rows(); ++i) {
    Session s;
    s.pid = static_cast<int>(r.Int(i, 0).value_or(0));
    s.datid = static_cast<uint32_t>(r.Int(i, 1).value_or(0));
    s.datname = r.String(i, 2);
    s.usesysid = static_cast<uint32_t>(r.Int(i, 3).value_or(0));
    s.usename = r.String(i, 4);
    s.application_name = r.String(i, 5);
    s.client_addr = r.String(i, 6);
    s.state = r.String(i, 7);
    s.backend_start = r.Double(i, 8).value_or(0);
    s.xact_start = r.Double(i, 9);
    s.state_change = r.Double(i, 10);
    s.query_start = r.Double(i, 11);
    s.waiting_on_lock = r.Bool(i, 12);
    s.advisory_wait = r.Bool(i, 13);
    if (!r.IsNull(i, 14)) s.blocked_by = ParsePidList(r.Text(i, 14));
    // Without pg_monitor (or superuser) another role's state and timings read as NULL.
    if (r.IsNull(i, 7)) data->full_visibility = false;
    data->sessions.push_back(std::move(s));
  }
  return true;
}

bool ParseAdvisoryLocks(const PgResult& r, PollData* data, std::string* error) {
  if (!CheckColumns(r, 8, "advisory_locks", error)) return false;
  data->locks.clear();
  data->locks.reserve(static_cast<size_t>(r.Rows()));
  for (int i = 0; i < r.Rows(); ++i) {
    AdvisoryLock l;
    l.pid = static_cast<int>(r.Int(i, 0).value_or(0));
    l.key.datid = static_cast<uint32_t>(r.Int(i, 1).value_or(0));
    l.key.classid = static_cast<uint32_t>(r.Int(i, 2).value_or(0));
    l.key.objid = static_cast<uint32_t>(r.Int(i, 3).value_or(0));
    l.key.objsubid = static_cast<int>(r.Int(i, 4).value_or(1));
    l.exclusive = r.Bool(i, 5);
    l.granted = r.Bool(i, 6);
    l.waitstart = r.Double(i, 7);
    data->locks.push_back(l);
  }
  return true;
}

bool ParseSettings(const PgResult& r, PollData* data, std::string* error) {
  if (!CheckColumns(r, 4, "settings", error)) return false;
  data->settings.clear();
  for (int i = 0; i < r.Rows(); ++i) {
    ServerSetting s;
    s.name = r.String(i, 0);
    const auto seconds = ParsePgTimeSetting(r.Text(i, 1), PgBaseUnitFromUnitColumn(r.Text(i, 2)));
    if (!seconds) continue;
    s.seconds = *seconds < 0 ? 0 : *seconds;
    s.source = r.String(i, 3);
    data->settings.push_back(std::move(s));
  }
  return true;
}

bool ParseSettingOverrides(const PgResult& r, PollData* data, std::string* error) {
  if (!CheckColumns(r, 6, "setting_overrides", error)) return false;
  data->overrides.clear();
  for (int i = 0; i < r.Rows(); ++i) {
    SettingOverride o;
    o.datid = static_cast<uint32_t>(r.Int(i, 0).value_or(0));
    o.roleid = static_cast<uint32_t>(r.Int(i, 1).value_or(0));
    o.database = r.String(i, 2);
    o.role = r.String(i, 3);
    o.name = r.String(i, 4);
    const auto seconds = ParsePgTimeSetting(r.Text(i, 5), BaseUnitOf(o.name));
    if (!seconds) continue;  // the server validated it on ALTER; an odd one is skipped, not fatal
    o.seconds = *seconds < 0 ? 0 : *seconds;
    data->overrides.push_back(std::move(o));
  }
  return true;
}

bool ParseDatabaseStats(const PgResult& r, PollData* data, std::string* error) {
  if (!CheckColumns(r, 5, "database_stats", error)) return false;
  std::vector<DatabaseStats> stats;
  for (int i = 0; i < r.Rows(); ++i) {
    DatabaseStats d;
    d.datid = static_cast<uint32_t>(r.Int(i, 0).value_or(0));
    d.datname = r.String(i, 1);
    d.sessions_fatal = r.Int(i, 2).value_or(0);
    d.sessions_killed = r.Int(i, 3).value_or(0);
    d.sessions_abandoned = r.Int(i, 4).value_or(0);
    stats.push_back(std::move(d));
  }
  data->database_stats = std::move(stats);
  return true;
}

bool CollectCore(PgConnection& conn, const CoreQueryOptions& options,
                 SteadyClock::time_point deadline, PollData* data, std::string* error) {
  const bool v14 = options.server_version_num >= 140000;
  const std::string timeouts = FillTemplate(
      queries::kPollTimeouts, {{"statement_ms", std::to_string(options.statement_timeout_ms)},
                               {"lock_ms", std::to_string(options.lock_timeout_ms)}});
  // Order matters: settings before the SET LOCALs (see queries/settings.sql).
  std::string sql = std::string(queries::kSettings) + ";\n" + timeouts + ";\n" + queries::kServer +
                    ";\n" + queries::kActivity + ";\n" + queries::kSettingOverrides + ";\n";
  if (v14) sql += std::string(queries::kDatabaseStats) + ";\n";
  if (options.inventory)
    sql += std::string(v14 ? queries::kAdvisoryLocks : queries::kAdvisoryLocksPg13) + ";\n";

  std::vector<PgResult> results;
  if (!conn.Exec(sql, {}, deadline, &results, error)) return false;
  // settings, SET, SET, server, activity, overrides, [stats], [locks]
  const size_t want = 6 + (v14 ? 1 : 0) + (options.inventory ? 1 : 0);
  if (results.size() != want) {
    *error = "core poll: expected " + std::to_string(want) + " results, got " +
             std::to_string(results.size());
    return false;
  }
  size_t i = 0;
  if (!ParseSettings(results[i++], data, error)) return false;
  i += 2;
  if (!ParseServer(results[i++], data, error)) return false;
  if (!ParseActivity(results[i++], data, error)) return false;
  if (!ParseSettingOverrides(results[i++], data, error)) return false;
  if (v14 && !ParseDatabaseStats(results[i++], data, error)) return false;
  data->inventory = options.inventory;
  if (options.inventory) return ParseAdvisoryLocks(results[i++], data, error);

  // Cheap tier: pg_locks only when a session waits on an advisory lock right now.
  data->locks.clear();
  bool anyone_waits = false;
  for (const Session& s : data->sessions) anyone_waits = anyone_waits || s.advisory_wait;
  if (!anyone_waits || !v14) return true;
  std::vector<PgResult> waiters;
  if (!conn.Exec(timeouts + ";\n" + queries::kAdvisoryWaiters, {}, deadline, &waiters, error)) {
    return false;
  }
  if (waiters.size() != 3) {
    *error = "advisory_waiters: unexpected results";
    return false;
  }
  return ParseAdvisoryLocks(waiters[2], data, error);
}

}  // namespace pglock
