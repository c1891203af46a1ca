// Waits on every kind of heavyweight lock (SPEC 4.8): who waits for which object in which mode,
// behind whom, the root blockers (blockers that wait for nothing) with every session blocked
// through them, and the longest chain of waits per database. Cost is paid only when someone
// waits: queries/lock_waits.sql is one statement whose parts are gated on pg_stat_activity; it
// reads the pending requests of pg_locks only for non-advisory waits (the advisory statement of
// the same poll already reads advisory waits) and names the blockers that are not client
// sessions (background processes, parallel workers' leaders, prepared transactions). The statement
// is prepared once per connection: planned at every poll, it cost more than its shut gates. Edges
// come from pg_blocking_pids() (Session::blocked_by), kept to the holders of the object waited for.
// Stateless; thread-safe.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

class LockWaitsCollector : public Collector {
 public:
  const char* name() const override { return "lock_waits"; }
  std::vector<PreparedStatement> Prepared(int server_version_num) const override;
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
};

}  // namespace pglock
