// Effective per-session timeouts: the value a session of (database, role) gets from
// pg_db_role_setting with PostgreSQL's precedence (database+role, role, database, all) over the
// server value. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "exporter/snapshot/poll_data.h"

namespace pglock {

// A setting's value for a session and where it comes from: "role app in database shop",
// "role app", "database shop", "all roles" (pg_db_role_setting) or "server".
struct SettingInForce {
  double seconds = 0;  // 0 when disabled
  std::string source;
};
SettingInForce SettingFor(const std::string& name, uint32_t datid, uint32_t roleid,
                          const std::vector<ServerSetting>& settings,
                          const std::vector<SettingOverride>& overrides);

// Seconds; 0 when disabled. A session that ran SET itself is invisible to the exporter.
double EffectiveTimeout(const std::string& name, uint32_t datid, uint32_t roleid,
                        const std::vector<ServerSetting>& settings,
                        const std::vector<SettingOverride>& overrides);

}  // namespace pglock
