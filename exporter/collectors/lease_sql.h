// The statements of one lease table ([[targets.leases]]): queries/lease_table.sql and
// lease_table_writes.sql filled in with the table's quoted relation, its fields as SQL (a column,
// the operator's expression, or a typed NULL when the table has none) and, for a row_lock table,
// the match of each row's xmax against the live transaction ids (queries/row_lock_held.sql). Pure
// functions of the config and the connection's quoting; thread-safe.
#pragma once

#include <string>

#include "exporter/config/config.h"
#include "exporter/pg/connection.h"

namespace pglock {

// The SQL for one table; "" when an identifier cannot be quoted (connection gone). `xids` is the
// xid[] literal of the live transaction ids a row_lock table's rows are matched against ("'{}'"
// matches none).
std::string LeaseTableSql(const PgConnection& conn, const LeaseTableConfig& table, int limit,
                          const std::string& xids = "'{}'");
// The SQL of the table's write counters (queries/lease_table_writes.sql); "" likewise.
std::string LeaseTableWritesSql(const PgConnection& conn, const LeaseTableConfig& table);
// The quoted relation, "schema"."table" or "table"; "" when it cannot be quoted.
std::string LeaseTableRelation(const PgConnection& conn, const LeaseTableConfig& table);
// A field as SQL over the row `t`: t."column", (expression), or `absent` when the table has none.
// "" when the column cannot be quoted.
std::string FieldSql(const PgConnection& conn, const LeaseField& f, const std::string& absent);

}  // namespace pglock
