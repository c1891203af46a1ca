// Waits on every kind of heavyweight lock: who waits for which object in which mode,
// behind whom, the root blockers (blockers that wait for nothing) with every session blocked
// through them, and the longest chain of waits per database. Cost is paid only when someone
// waits. The pending requests come from the poll's one read of pg_locks, which the advisory
// collector's statement makes (PollData::lock_waits for other lock types, PollData::locks for
// advisory ones): a second read would cost as much as the first. queries/lock_waits.sql, gated on
// pg_stat_activity and prepared once per connection, names the parties that are not client
// sessions (background processes, parallel workers' leaders, prepared transactions). Edges come
// from pg_blocking_pids() (Session::blocked_by), kept to the holders of the object waited for.
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
  // Blocking episodes (exporter/events/blocking_episodes.h): ended, by outcome; their durations
  // and peaks.
  void ExposeCounters(const TargetSnapshot& snap, Families* out) const override;
};

}  // namespace pglock
