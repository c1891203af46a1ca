#include "exporter/collect/leases.h"

#include "exporter/collect/core.h"
#include "exporter/queries.h"

namespace pglock {

std::string LeaseTableSql(const PgConnection& conn, const LeaseTableConfig& table, int limit,
                          int statement_timeout_ms, int lock_timeout_ms) {
  std::string relation = conn.QuoteIdentifier(table.relation);
  if (relation.empty()) return "";
  if (!table.schema.empty()) {
    const std::string schema = conn.QuoteIdentifier(table.schema);
    if (schema.empty()) return "";
    relation = schema + "." + relation;
  }
  std::vector<std::pair<std::string, std::string>> values = {
      {"table", relation},
      {"name", conn.QuoteIdentifier(table.name_column)},
      {"holder", conn.QuoteIdentifier(table.holder_column)},
      {"taken_at", conn.QuoteIdentifier(table.taken_at_column)},
      {"expires_at", conn.QuoteIdentifier(table.expires_at_column)},
      {"limit", std::to_string(limit)},
  };
  for (const auto& [k, v] : values) {
    if (v.empty()) return "";
  }
  const std::string timeouts =
      FillTemplate(queries::kPollTimeouts, {{"statement_ms", std::to_string(statement_timeout_ms)},
                                            {"lock_ms", std::to_string(lock_timeout_ms)}});
  // One left-to-right pass: a quoted identifier that itself contains "{name}" is never rescanned.
  const std::string sql = queries::kLeaseTable;
  std::string out;
  out.reserve(sql.size() + 256);
  for (size_t i = 0; i < sql.size();) {
    bool replaced = false;
    if (sql[i] == '{') {
      for (const auto& [k, v] : values) {
        const std::string placeholder = "{" + k + "}";
        if (sql.compare(i, placeholder.size(), placeholder) == 0) {
          out += v;
          i += placeholder.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += sql[i++];
  }
  return timeouts + ";\n" + out;
}

LeaseTableData CollectLeaseTable(PgConnection& conn, const LeaseTableConfig& table, int limit,
                                 int statement_timeout_ms, int lock_timeout_ms,
                                 SteadyClock::time_point deadline, bool* connection_lost) {
  LeaseTableData data;
  data.table = table.table;
  *connection_lost = false;
  const std::string sql = LeaseTableSql(conn, table, limit, statement_timeout_ms, lock_timeout_ms);
  if (sql.empty()) {
    data.error = "cannot quote identifiers";
    *connection_lost = conn.Broken();
    return data;
  }
  std::vector<PgResult> results;
  std::string error;
  if (!conn.Exec(sql, {}, deadline, &results, &error)) {
    data.error = error;
    *connection_lost = conn.Broken();
    return data;
  }
  if (results.size() != 3 || results[2].Columns() != 7) {
    data.error = "unexpected result shape";
    return data;
  }
  const PgResult& r = results[2];
  for (int i = 0; i < r.Rows(); ++i) {
    LeaseRow row;
    row.name = r.String(i, 0);
    row.holder = r.String(i, 1);
    // A NULL time makes the row unusable for ages; keep it visible as expired at the epoch.
    row.taken_at = r.Double(i, 2).value_or(0);
    row.expires_at = r.Double(i, 3).value_or(0);
    data.held = r.Int(i, 4).value_or(0);
    data.total = r.Int(i, 5).value_or(0);
    data.now = r.Double(i, 6).value_or(0);
    data.rows.push_back(std::move(row));
  }
  data.expired = data.total - data.held;
  data.ok = true;
  return data;
}

}  // namespace pglock
