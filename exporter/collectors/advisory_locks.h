// Advisory locks (queries/advisory_locks.sql over pg_locks, filtered in the server): who holds
// which key since when (observed) and in which scope, who waits for whom and how long, with edges
// pointing at the holders. Also owns the families of the lock events that the event diff counts
// (releases, losses, hand-overs, takeovers). On a tiered poll only waiters' locks are read
// (InventoryTier). Its statement is the poll's one read of pg_locks: it also brings the pending
// requests of every other lock type, which it parses into PollData::lock_waits for the lock-wait
// collector (lock_waits.h) rather than let that one pay a second read, and on an inventory the
// other rows outside the fast path, into PollData::counted_locks for the lock-table collector
// (lock_table.h). Stateless; thread-safe.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

class AdvisoryLocksCollector : public Collector {
 public:
  const char* name() const override { return "advisory_locks"; }
  std::vector<PreparedStatement> Prepared(int server_version_num) const override;
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
  void ExposeCounters(const TargetSnapshot& snap, Families* out) const override;
};

}  // namespace pglock
