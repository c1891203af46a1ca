// Server values of the timeouts that end sessions (queries/settings.sql over pg_settings), read
// before the poll's own SET LOCAL timeouts so they show what other sessions get.
// Stateless; thread-safe.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

class SettingsCollector : public Collector {
 public:
  const char* name() const override { return "settings"; }
  std::vector<PreparedStatement> Prepared(int server_version_num) const override;
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
};

}  // namespace pglock
