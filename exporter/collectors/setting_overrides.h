// Per-role and per-database values of the same timeouts (queries/setting_overrides.sql over
// pg_db_role_setting), normalised to seconds; they apply to sessions started after the change.
// Stateless; thread-safe.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

class SettingOverridesCollector : public Collector {
 public:
  const char* name() const override { return "setting_overrides"; }
  std::vector<PreparedStatement> Prepared(int server_version_num) const override;
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
};

}  // namespace pglock
