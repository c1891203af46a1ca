// PgBouncer poolers ([[targets.poolers]]): reads each admin console (SHOW POOLS, SHOW SERVERS) over
// a connection of its own, kept between polls and reopened after an error, to find the server
// connections of pools in transaction or statement mode. A session advisory lock held by one of
// them outlives the client that took it and passes to the pool's next client. A pooler that fails
// is pglock_pooler_up 0 and never fails the poll. Stateless; the admin connections are per-target
// CollectorState.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

// Parses SHOW POOLS + SHOW SERVERS + SHOW CLIENTS results (exposed for tests).
Status ParsePgbouncer(const PgResult& pools, const PgResult& servers, const PgResult& clients,
                      PoolerData* data);

class PoolersCollector : public Collector {
 public:
  const char* name() const override { return "poolers"; }
  std::unique_ptr<CollectorState> NewState() const override;
  Status Collect(const PollContext& ctx, CollectorState* state, PollData* data) const override;
  bool Healthy(const PollData& data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
  void ExposeCounters(const TargetSnapshot& snap, Families* out) const override;
};

}  // namespace pglock
