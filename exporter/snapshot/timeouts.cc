#include "exporter/snapshot/timeouts.h"

namespace pglock {

SettingInForce SettingFor(const std::string& name, uint32_t datid, uint32_t roleid,
                          const std::vector<ServerSetting>& settings,
                          const std::vector<SettingOverride>& overrides) {
  // Rank: 4 database+role, 3 role, 2 database, 1 all (ALTER ROLE ALL SET).
  int best_rank = 0;
  SettingInForce best;
  for (const SettingOverride& o : overrides) {
    if (o.name != name) continue;
    int rank = 0;
    std::string source;
    if (o.datid == datid && o.roleid == roleid && datid != 0 && roleid != 0) {
      rank = 4;
      source = "role " + o.role + " in database " + o.database;
    } else if (o.datid == 0 && o.roleid == roleid && roleid != 0) {
      rank = 3;
      source = "role " + o.role;
    } else if (o.datid == datid && o.roleid == 0 && datid != 0) {
      rank = 2;
      source = "database " + o.database;
    } else if (o.datid == 0 && o.roleid == 0) {
      rank = 1;
      source = "all roles";
    }
    if (rank > best_rank) {
      best_rank = rank;
      best = {o.seconds, std::move(source)};
    }
  }
  if (best_rank > 0) return best;
  for (const ServerSetting& s : settings) {
    if (s.name == name) return {s.seconds, "server"};
  }
  return {};
}

double EffectiveTimeout(const std::string& name, uint32_t datid, uint32_t roleid,
                        const std::vector<ServerSetting>& settings,
                        const std::vector<SettingOverride>& overrides) {
  return SettingFor(name, datid, roleid, settings, overrides).seconds;
}

}  // namespace pglock
