// Reads one configured lease table (name, holder, taken_at, expires_at by default). Identifiers are
// quoted by libpq; a missing table or column, a wrong type or a permission problem is returned as
// the table's own error and never fails the rest of the poll. Thread-compatible.
#pragma once

#include "exporter/config/config.h"
#include "exporter/pg/connection.h"
#include "exporter/snapshot/poll_data.h"

namespace pglock {

// The SQL for one table; "" when an identifier cannot be quoted (connection gone).
std::string LeaseTableSql(const PgConnection& conn, const LeaseTableConfig& table, int limit,
                          int statement_timeout_ms, int lock_timeout_ms);

// Reads the table. Returns the table's data with ok=false and an error on failure. *connection_lost
// is set when the failure broke the connection (then the whole poll fails).
LeaseTableData CollectLeaseTable(PgConnection& conn, const LeaseTableConfig& table, int limit,
                                 int statement_timeout_ms, int lock_timeout_ms,
                                 SteadyClock::time_point deadline, bool* connection_lost);

}  // namespace pglock
