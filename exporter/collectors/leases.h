// Lease and lock tables ([[targets.leases]], queries/lease_table.sql): each configured table is
// read in a round trip of its own, so a missing table or column, a wrong type, a failing expression
// or a permission problem is that table's error (pglock_lease_table_up 0,
// pglock_collector_errors_total) and never fails the poll. On a standby only tables with
// read_on_standby are read. Before a table is first read on a
// connection, the type of each field is checked (queries/lease_table_check.sql,
// lease_table_column.sql) and a problem is reported with the config file, line and key. Identifiers
// are quoted by libpq; the operator's SQL expressions run inside the exporter's read-only,
// timeout-bounded transaction. The same round trip reads the table's write counters, which the
// event diff needs to tell a hand-over from an overlap. Also owns pglock_lease_transitions_total,
// which the event diff counts. A table with `database` lives in another database of the target's
// server: it is read through a session of that database (exporter/pg/session.h: the same session
// rules, the poll's deadline, a backoff of its own), after the target's own tables, and any
// failure of that session is only its tables' error. A row_lock table's read also returns each
// held row's xmax, matched against the live transaction ids of this poll (the granted transactionid
// locks of the inventory's one pg_locks read; in the polls that skip it, each session's top-level
// backend_xid and the subtransaction ids the last inventory saw under it): the row's holder is that
// session. Its per-target state (checked tables, when
// rows without taken_at were first seen held, the other databases' sessions) belongs to the
// poller thread. The statements are built in lease_sql.h; one table is checked, read and
// blamed in lease_read.h.
#pragma once

#include "exporter/collectors/collector.h"

namespace pglock {

class LeasesCollector : public Collector {
 public:
  const char* name() const override { return "leases"; }
  std::unique_ptr<CollectorState> NewState() const override;
  Status Collect(const PollContext& ctx, CollectorState* state, PollData* data) const override;
  bool Healthy(const PollData& data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
  void ExposeCounters(const TargetSnapshot& snap, Families* out) const override;
};

}  // namespace pglock
