#include "exporter/collectors/registry.h"

#include "exporter/collectors/activity.h"
#include "exporter/collectors/advisory_locks.h"
#include "exporter/collectors/database_stats.h"
#include "exporter/collectors/leases.h"
#include "exporter/collectors/lock_waits.h"
#include "exporter/collectors/poolers.h"
#include "exporter/collectors/server.h"
#include "exporter/collectors/setting_overrides.h"
#include "exporter/collectors/settings.h"

namespace pglock {

const std::vector<const Collector*>& Collectors() {
  // Order: the batch collectors first, then those with round trips of their own. The batch is one
  // transaction, read in this order: server first (its now() is the poll's clock), then the session
  // end counters before pg_stat_activity: a backend that ends leaves pg_stat_activity before it
  // counts its end, so every end this poll counts belongs to a session already gone from its
  // pg_stat_activity (read the other way round, a session that ended between the two reads is
  // listed while its end is counted, and the count is pinned on someone else). Then pg_locks.
  static const ServerCollector server;
  static const ActivityCollector activity;
  static const AdvisoryLocksCollector advisory_locks;
  static const LockWaitsCollector lock_waits;
  static const SettingsCollector settings;
  static const SettingOverridesCollector setting_overrides;
  static const DatabaseStatsCollector database_stats;
  static const LeasesCollector leases;
  static const PoolersCollector poolers;
  static const std::vector<const Collector*> all = {
      &server,   &database_stats,    &activity, &advisory_locks, &lock_waits,
      &settings, &setting_overrides, &leases,   &poolers,
  };
  return all;
}

}  // namespace pglock
