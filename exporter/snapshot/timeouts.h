// Effective per-session timeouts: the value a session of (database, role) gets from
// pg_db_role_setting with PostgreSQL's precedence (database+role, role, database, all) over the
// server value. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "exporter/snapshot/poll_data.h"

namespace pglock {

// Seconds; 0 when disabled. A session that ran SET itself is invisible to the exporter.
double EffectiveTimeout(const std::string& name, uint32_t datid, uint32_t roleid,
                        const std::vector<ServerSetting>& settings,
                        const std::vector<SettingOverride>& overrides);

}  // namespace pglock
