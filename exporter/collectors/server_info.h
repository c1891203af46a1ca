// Server identity and clock (queries/server_info.sql): version, pg_postmaster_start_time() (a
// change means a restart: every lock seen before is gone) and now(), against which every age is
// computed. pg_is_in_recovery() gives the role: lease tables are read on a standby only when
// configured to. Emits pglock_postgres_info. Stateless; thread-safe.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

class ServerCollector : public Collector {
 public:
  const char* name() const override { return "server"; }
  std::vector<PreparedStatement> Prepared(int server_version_num) const override;
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
};

}  // namespace pglock
