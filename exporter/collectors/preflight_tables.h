// The tables of [[targets]] preflight_tables (docs/preflight.md): at each inventory poll, whether
// an ACCESS EXCLUSIVE lock on each would wait now, and for how long the oldest conflicting holder's
// transaction has been open, for dashboards. One read of the tables' relation locks
// (queries/preflight_tables.sql), in a round trip of its own; a failure is this collector's
// (pglock_collector_up 0), never the poll's. Stateless; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "exporter/collectors/collector.h"
#include "exporter/snapshot/preflight.h"

namespace pglock {

// What the read gave (PollData::parts), carried to the tiered polls after an inventory poll.
struct PreflightTablesReading {
  static constexpr bool kReadAtInventory = true;
  struct Table {
    std::string label;  // as configured
    bool found = false;
    std::vector<RelationLock> locks;
  };
  bool read = false;
  std::string error;  // "" when the last read succeeded
  std::vector<Table> tables;
  double now = 0;  // the server's clock at the read
};

// One watched table as the view shows it (TargetView::parts).
struct PreflightTablesView {
  struct Row {
    std::string table;
    bool would_wait = false;
    double conflict_age = 0;  // the oldest conflicting holder's open transaction, seconds
  };
  std::vector<Row> rows;
};

class PreflightTablesCollector : public Collector {
 public:
  const char* name() const override { return "preflight_tables"; }
  Status Collect(const PollContext& ctx, CollectorState* state, PollData* data) const override;
  bool Healthy(const PollData& data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
};

}  // namespace pglock
