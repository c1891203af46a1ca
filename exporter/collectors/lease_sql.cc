#include "exporter/collectors/lease_sql.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "exporter/pg/batch.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

// "schema"."table" or "table"; "" when an identifier cannot be quoted (connection gone).
std::string QuotedRelation(const PgConnection& conn, const LeaseTableConfig& table) {
  std::string relation = conn.QuoteIdentifier(table.relation);
  if (relation.empty()) return "";
  if (!table.schema.empty()) {
    const std::string schema = conn.QuoteIdentifier(table.schema);
    if (schema.empty()) return "";
    relation = schema + "." + relation;
  }
  return relation;
}

// An SQL fragment without its comment lines, on one line: it is spliced into another query's
// template, whose own comments may quote its placeholder.
std::string OneLine(std::string_view sql) {
  std::string out;
  while (!sql.empty()) {
    const size_t end = std::min(sql.find('\n'), sql.size());
    const std::string_view line = sql.substr(0, end);
    if (line.substr(0, 2) != "--") {
      if (!out.empty()) out += ' ';
      out += line;
    }
    sql.remove_prefix(std::min(end + 1, sql.size()));
  }
  return out;
}

// The expiry as SQL: the field, taken_at + ttl, or a NULL timestamptz.
std::string ExpirySql(const PgConnection& conn, const LeaseTableConfig& table) {
  if (table.ttl > Duration(0)) {
    const std::string taken_at = FieldSql(conn, table.taken_at, "");
    if (taken_at.empty()) return "";
    return "((" + taken_at + ")::timestamptz + interval '" + std::to_string(table.ttl.count()) +
           " milliseconds')";
  }
  return FieldSql(conn, table.expires_at, "NULL::timestamptz");
}

}  // namespace

std::string FieldSql(const PgConnection& conn, const LeaseField& f, const std::string& absent) {
  if (!f.sql.empty()) return "(" + f.sql + ")";
  if (f.column.empty()) return absent;
  const std::string quoted = conn.QuoteIdentifier(f.column);
  return quoted.empty() ? "" : "t." + quoted;
}

std::string LeaseTableSql(const PgConnection& conn, const LeaseTableConfig& table, int limit,
                          const std::string& xids) {
  const std::string relation = QuotedRelation(conn, table);
  if (relation.empty()) return "";
  const std::string expires_at = ExpirySql(conn, table);
  std::string where = table.where_sql.empty() ? "true" : "(" + table.where_sql + ")";
  std::string held = table.held_sql.empty() ? "" : "(" + table.held_sql + ") IS TRUE";
  const std::string row_lock =
      table.row_lock ? FillTemplate(OneLine(queries::kRowLockHeld), {{"xids", xids}}) : "false";
  if (table.row_lock) held = held.empty() ? row_lock : "(" + held + " OR " + row_lock + ")";
  if (!held.empty()) where += " AND " + held;
  const std::vector<std::pair<std::string, std::string>> values = {
      {"table", relation},
      {"name", FieldSql(conn, table.name, "")},
      {"holder", FieldSql(conn, table.holder, "NULL::text")},
      {"taken_at", FieldSql(conn, table.taken_at, "NULL::timestamptz")},
      {"expires_at", expires_at},
      {"held", table.has_expiry() ? "(" + expires_at + ")::timestamptz > now()" : "true"},
      {"where", where},
      {"limit", std::to_string(limit)},
      {"xmax", table.row_lock ? "t.xmax::text" : "NULL::text"},
      {"row_locked", row_lock},
  };
  for (const auto& [k, v] : values) {
    if (v.empty()) return "";
  }
  return FillTemplate(queries::kLeaseTable, values);
}

std::string LeaseTableWritesSql(const PgConnection& conn, const LeaseTableConfig& table) {
  const std::string relation = QuotedRelation(conn, table);
  if (relation.empty()) return "";
  const std::string literal = conn.QuoteLiteral(relation);
  if (literal.empty()) return "";
  return FillTemplate(queries::kLeaseTableWrites, {{"relation", literal}});
}

std::string LeaseTableRelation(const PgConnection& conn, const LeaseTableConfig& table) {
  return QuotedRelation(conn, table);
}

}  // namespace pglock
