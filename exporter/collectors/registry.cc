#include "exporter/collectors/registry.h"

#include <chrono>

#include "exporter/collectors/activity.h"
#include "exporter/collectors/advisory_locks.h"
#include "exporter/collectors/database_stats.h"
#include "exporter/collectors/leases.h"
#include "exporter/collectors/lock_table.h"
#include "exporter/collectors/lock_waits.h"
#include "exporter/collectors/poolers.h"
#include "exporter/collectors/server.h"
#include "exporter/collectors/setting_overrides.h"
#include "exporter/collectors/settings.h"
#include "exporter/snapshot/verdict.h"

namespace pglock {
namespace {

// Made on first use, whatever the order of static initialisation.
struct Instances {
  ServerCollector server;
  ActivityCollector activity;
  AdvisoryLocksCollector advisory_locks;
  LockWaitsCollector lock_waits;
  LockTableCollector lock_table;
  SettingsCollector settings;
  SettingOverridesCollector setting_overrides;
  DatabaseStatsCollector database_stats;
  LeasesCollector leases;
  PoolersCollector poolers;
};

const Instances& Get() {
  static const Instances instances;
  return instances;
}

}  // namespace

const Collector& SessionEndCountersCollector() { return Get().database_stats; }

const std::vector<const Collector*>& Collectors() {
  // Order: the batch collectors first, then those with round trips of their own. The batch is one
  // transaction, read in this order: server first (its now() is the poll's clock), then the session
  // end counters, pg_stat_activity and pg_locks. An ending backend releases its locks, counts its
  // end, then leaves pg_stat_activity (measured on 15 to 18): read in this order, an end the
  // poll counts belongs to a session gone from its pg_stat_activity unless that exit spanned the
  // two adjacent reads. Read with pg_locks and pg_stat_activity first, a backend that had released
  // its lock and counted its end but was still listed was common, and its end was explained by no
  // one (or pinned on someone else). A session that counted its end and left between the first two
  // reads is gone with no end counted: EventTracker::Settle reads the counters again for it.
  // The lock table parses after the advisory collector, whose pg_locks rows it counts.
  const Instances& c = Get();
  static const std::vector<const Collector*> all = {
      &c.server,     &c.database_stats, &c.activity,          &c.advisory_locks, &c.lock_waits,
      &c.lock_table, &c.settings,       &c.setting_overrides, &c.leases,         &c.poolers,
  };
  return all;
}

TargetView Analyze(const PollData& data, const AnalyzeOptions& options, HoldHistory* history,
                   std::map<std::string, int64_t>* dropped, std::vector<double>* build_seconds) {
  TargetView view;
  view.inventory = data.inventory;
  const PollIndex index(data);
  const ViewContext ctx{&options, &index, static_cast<size_t>(std::max(options.top_n, 1)), history,
                        dropped};
  if (build_seconds != nullptr) build_seconds->clear();
  for (const Collector* c : Collectors()) {
    const auto started = std::chrono::steady_clock::now();
    c->BuildView(data, ctx, &view);
    if (build_seconds != nullptr) {
      build_seconds->push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
  }
  // Verdicts need every part of the view (pooled locks come last).
  MarkPooledLockTableSessions(&view);
  AttachVerdicts(data, index, options.names, &view);
  return view;
}

}  // namespace pglock
