#include "exporter/snapshot/timeouts.h"

namespace pglock {

double EffectiveTimeout(const std::string& name, uint32_t datid, uint32_t roleid,
                        const std::vector<ServerSetting>& settings,
                        const std::vector<SettingOverride>& overrides) {
  // Rank: 4 database+role, 3 role, 2 database, 1 all (ALTER ROLE ALL SET).
  int best_rank = 0;
  double best = 0;
  for (const SettingOverride& o : overrides) {
    if (o.name != name) continue;
    int rank = 0;
    if (o.datid == datid && o.roleid == roleid && datid != 0 && roleid != 0) {
      rank = 4;
    } else if (o.datid == 0 && o.roleid == roleid && roleid != 0) {
      rank = 3;
    } else if (o.datid == datid && o.roleid == 0 && datid != 0) {
      rank = 2;
    } else if (o.datid == 0 && o.roleid == 0) {
      rank = 1;
    }
    if (rank > best_rank) {
      best_rank = rank;
      best = o.seconds;
    }
  }
  if (best_rank > 0) return best;
  for (const ServerSetting& s : settings) {
    if (s.name == name) return s.seconds;
  }
  return 0;
}

}  // namespace pglock
