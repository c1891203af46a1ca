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
  // Order: the batch collectors first (server before the rest: its now() is the poll's clock),
  // then those with round trips of their own.
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
      &server,         &activity,          &advisory_locks, &lock_waits, &settings,
      &database_stats, &setting_overrides, &leases,         &poolers,
  };
  return all;
}

}  // namespace pglock
