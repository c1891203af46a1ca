#include "exporter/collectors/leases.h"

#include "exporter/pg/columns.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

using prometheus::MetricType;

const MetricDesc kTableUp{"pglock_lease_table_up",
                          MetricType::Gauge,
                          "1 if the lease table could be read at the last poll.",
                          {"target", "table"}};
const MetricDesc kLeases{
    "pglock_leases", MetricType::Gauge, "Lease rows by state.", {"target", "table", "state"}};
const MetricDesc kLeaseHeld{"pglock_lease_held",
                            MetricType::Gauge,
                            "1 while expires_at > now().",
                            {"target", "table", "lease"}};
const MetricDesc kLeaseAge{"pglock_lease_age_seconds",
                           MetricType::Gauge,
                           "now() - taken_at.",
                           {"target", "table", "lease"}};
const MetricDesc kLeaseExpiresIn{"pglock_lease_expires_in_seconds",
                                 MetricType::Gauge,
                                 "expires_at - now(), negative once expired.",
                                 {"target", "table", "lease"}};
// Its label names after `lease` are `holder`, or the table's holder_labels.
const MetricDesc kLeaseHolderInfo{"pglock_lease_holder_info",
                                  MetricType::Gauge,
                                  "Who holds the lease (value 1).",
                                  {"target", "table", "lease", "holder"}};
const MetricDesc kTransitions{
    "pglock_lease_transitions_total",
    MetricType::Counter,
    "Lease changes between polls: acquired, released (row gone or expiry moved back by its "
    "holder), renewed, handover (given back and taken by another), expired_takeover (work may "
    "have run twice), overlap (changed holder while valid and not given back: mutual exclusion "
    "broken).",
    {"target", "table", "lease", "kind"}};

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

// The table's write counters, when they follow its writes.
Status ParseWrites(const PgResult& r, LeaseTableData* out) {
  Columns c(r, "lease_table_writes");
  const int updated = c["updated"], deleted = c["deleted"], counted = c["counted"];
  if (Status s = c.status(); !s.ok()) return s;
  if (r.Rows() == 1 && r.String(0, counted) == "t") {
    out->writes = TableWrites{r.Int(0, updated).value_or(0), r.Int(0, deleted).value_or(0)};
  }
  return Status::Ok();
}

// Reads one table into *out; the Status is not ok only when the target's connection was lost.
Status ReadTable(const PollContext& ctx, const LeaseTableConfig& table, LeaseTableData* out) {
  out->table = table.table;
  const std::string sql = LeaseTableSql(*ctx.conn, table, ctx.poll->max_leases);
  const std::string writes_sql = LeaseTableWritesSql(*ctx.conn, table);
  if (sql.empty() || writes_sql.empty()) {
    out->error = "cannot quote identifiers";
    return ctx.conn->Broken() ? Status::ConnectionLost(out->error) : Status::Ok();
  }
  StatementBatch batch;
  // The counters first: see queries/lease_table_writes.sql.
  batch.Add("lease_table_writes", writes_sql);
  batch.Add("lease_table", sql);
  BatchResults results;
  if (Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &results); !s.ok()) {
    out->error = s.message();
    return ctx.conn->Broken() ? s : Status::Ok();
  }
  if (Status s = ParseWrites(*results.Find("lease_table_writes"), out); !s.ok()) {
    out->error = s.message();
    return Status::Ok();
  }
  const PgResult& r = *results.Find("lease_table");
  Columns c(r, "lease_table");
  const int name = c["name"], holder = c["holder"], taken_at = c["taken_at"],
            expires_at = c["expires_at"], held = c["held"], total = c["total"], now = c["now"];
  if (Status s = c.status(); !s.ok()) {
    out->error = s.message();
    return Status::Ok();
  }
  for (int i = 0; i < r.Rows(); ++i) {
    LeaseRow row;
    row.name = r.String(i, name);
    row.holder = r.String(i, holder);
    // A NULL time makes the row unusable for ages; keep it visible as expired at the epoch.
    row.taken_at = r.Double(i, taken_at).value_or(0);
    row.expires_at = r.Double(i, expires_at).value_or(0);
    out->held = r.Int(i, held).value_or(0);
    out->total = r.Int(i, total).value_or(0);
    out->now = r.Double(i, now).value_or(0);
    out->rows.push_back(std::move(row));
  }
  out->expired = out->total - out->held;
  out->ok = true;
  return Status::Ok();
}

}  // namespace

std::string LeaseTableSql(const PgConnection& conn, const LeaseTableConfig& table, int limit) {
  const std::string relation = QuotedRelation(conn, table);
  if (relation.empty()) return "";
  const std::vector<std::pair<std::string, std::string>> values = {
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
  return FillTemplate(queries::kLeaseTable, values);
}

std::string LeaseTableWritesSql(const PgConnection& conn, const LeaseTableConfig& table) {
  const std::string relation = QuotedRelation(conn, table);
  if (relation.empty()) return "";
  const std::string literal = conn.QuoteLiteral(relation);
  if (literal.empty()) return "";
  return FillTemplate(queries::kLeaseTableWrites, {{"relation", literal}});
}

Status LeasesCollector::Collect(const PollContext& ctx, CollectorState*, PollData* data) const {
  for (const LeaseTableConfig& t : ctx.target->leases) {
    // Not read at all: no series, so a replicated lease pages on the primary only.
    if (data->in_recovery && !t.read_on_standby) continue;
    data->leases.emplace_back();
    if (Status s = ReadTable(ctx, t, &data->leases.back()); !s.ok()) {
      return s.WithContext("lease table " + t.table);
    }
  }
  return Status::Ok();
}

bool LeasesCollector::Healthy(const PollData& data) const {
  for (const LeaseTableData& t : data.leases) {
    if (!t.ok) return false;
  }
  return true;
}

void LeasesCollector::BuildView(const PollData& data, const ViewContext& ctx,
                                TargetView* view) const {
  for (const LeaseTableData& t : data.leases) {
    LeaseTableView tv;
    tv.table = t.table;
    tv.ok = t.ok;
    tv.held = t.held;
    tv.expired = t.expired;
    const LeaseTableRules* rules = nullptr;
    for (const LeaseTableRules& r : ctx.options->lease_rules) {
      if (r.table == t.table) rules = &r;
    }
    const bool split = rules != nullptr && rules->matcher && !rules->holder_labels.empty();
    if (split) tv.holder_labels = rules->holder_labels;
    for (const LeaseRow& row : t.rows) {
      LeaseView lv;
      lv.lease = row.name;
      lv.holder = row.holder;
      lv.held = row.expires_at > t.now;
      lv.age = t.now - row.taken_at;
      lv.expires_in = row.expires_at - t.now;
      if (split) {
        auto parts = rules->matcher->Match(row.holder);
        lv.holder_parts =
            parts ? std::move(*parts) : std::vector<std::string>(rules->holder_labels.size());
      }
      tv.leases.push_back(std::move(lv));
    }
    view->leases.push_back(std::move(tv));
  }
}

void LeasesCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                 Families* f) const {
  const std::string& tg = snap.target;
  for (const LeaseTableView& lt : v.leases) {
    f->Add(kTableUp, {tg, lt.table}, lt.ok ? 1 : 0);
    if (!lt.ok) continue;
    f->Add(kLeases, {tg, lt.table, "held"}, static_cast<double>(lt.held));
    f->Add(kLeases, {tg, lt.table, "expired"}, static_cast<double>(lt.expired));
    for (const LeaseView& l : lt.leases) {
      f->Add(kLeaseHeld, {tg, lt.table, l.lease}, l.held ? 1 : 0);
      f->Add(kLeaseAge, {tg, lt.table, l.lease}, l.age);
      f->Add(kLeaseExpiresIn, {tg, lt.table, l.lease}, l.expires_in);
      Families::Labels hl = {{"target", tg}, {"table", lt.table}, {"lease", l.lease}};
      if (lt.holder_labels.empty()) {
        hl.emplace_back("holder", l.holder);
      } else {
        for (size_t i = 0; i < lt.holder_labels.size(); ++i) {
          hl.emplace_back(lt.holder_labels[i], i < l.holder_parts.size() ? l.holder_parts[i] : "");
        }
      }
      f->AddLabelled(kLeaseHolderInfo, hl, 1);
    }
  }
}

void LeasesCollector::ExposeCounters(const TargetSnapshot& snap, Families* f) const {
  for (const auto& [k, n] : snap.counters.lease_transitions) {
    f->Add(kTransitions, {snap.target, std::get<0>(k), std::get<1>(k), std::get<2>(k)}, n);
  }
}

}  // namespace pglock
