// Client sessions (queries/activity.sql over pg_stat_activity): who is connected, in which state,
// idle in transaction for how long, and which of those hold an advisory lock or block someone and
// how long before idle_in_transaction_session_timeout ends them (and drops their session locks).
// Also the clients whose every session sits on a lock (pool starvation) and the sessions
// the exporter's role cannot see. Stateless; thread-safe.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

class ActivityCollector : public Collector {
 public:
  const char* name() const override { return "activity"; }
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
};

}  // namespace pglock
