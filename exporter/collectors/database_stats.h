// Session end counters of pg_stat_database (14+; queries/database_stats.sql): which kind of end
// explains a lost lock. Owns pglock_sessions_ended_total, which the event diff counts.
// Stateless; thread-safe.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

class DatabaseStatsCollector : public Collector {
 public:
  const char* name() const override { return "database_stats"; }
  std::vector<PreparedStatement> Prepared(int server_version_num) const override;
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void ExposeCounters(const TargetSnapshot& snap, Families* out) const override;
};

}  // namespace pglock
