#include "exporter/collectors/preflight_tables.h"

#include <algorithm>

#include "exporter/pg/columns.h"
#include "exporter/queries.h"
#include "exporter/util/table_name.h"

namespace pglock {
namespace {

const MetricDesc kWouldWait{
    "pglock_ddl_would_wait",
    prometheus::MetricType::Gauge,
    "1 when an ACCESS EXCLUSIVE lock on the table (ALTER TABLE, DROP) would wait now: some session "
    "holds or waits for a lock on it (as of the last inventory poll). Short queries make it "
    "flicker: read it with pglock_ddl_conflict_age_seconds.",
    {"target", "table"}};
const MetricDesc kConflictAge{
    "pglock_ddl_conflict_age_seconds",
    prometheus::MetricType::Gauge,
    "How long the transaction of the oldest session holding a lock on the table has been open: how "
    "long an ALTER TABLE started now would queue at least, were that session to go on (0: none).",
    {"target", "table"}};

// ARRAY['a', NULL, ...]::text[] of quoted literals.
std::string TextArray(PgConnection& conn, const std::vector<std::optional<std::string>>& values) {
  std::string o = "ARRAY[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) o += ", ";
    o += values[i] ? conn.QuoteLiteral(*values[i]) : "NULL";
  }
  return o + "]::text[]";
}

}  // namespace

Status PreflightTablesCollector::Collect(const PollContext& ctx, CollectorState*,
                                         PollData* data) const {
  if (ctx.target->preflight_tables.empty() || !data->inventory) return Status::Ok();
  PreflightTablesReading* reading = data->parts.Mutable<PreflightTablesReading>();
  *reading = {};
  reading->read = true;
  reading->now = data->now;
  std::vector<std::optional<std::string>> labels, schemas, names;
  for (const std::string& t : ctx.target->preflight_tables) {
    TableName parsed;
    std::string why;
    if (!ParseTableName(t, &parsed, &why)) continue;  // refused at config load
    labels.emplace_back(t);
    schemas.push_back(parsed.schema);
    names.emplace_back(parsed.name);
  }
  StatementBatch batch;
  batch.Add(name(),
            FillTemplate(queries::kPreflightTables, {{"labels", TextArray(*ctx.conn, labels)},
                                                     {"schemas", TextArray(*ctx.conn, schemas)},
                                                     {"names", TextArray(*ctx.conn, names)}}));
  BatchResults results;
  if (Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &results); !s.ok()) {
    reading->error = s.message();
    return s.kind() == Status::Kind::kConnectionLost || s.kind() == Status::Kind::kDeadline
               ? s
               : Status::Ok();
  }
  const PgResult& r = *results.Find(name());
  Columns c(r, name());
  const int ord = c["ord"], label = c["label"], found = c["found"], pid = c["pid"],
            mode = c["mode"], granted = c["granted"];
  if (Status s = c.status(); !s.ok()) {
    reading->error = s.message();
    return Status::Ok();
  }
  int64_t last = -1;
  for (int i = 0; i < r.Rows(); ++i) {
    if (r.Int(i, ord).value_or(0) != last) {
      last = r.Int(i, ord).value_or(0);
      reading->tables.push_back({r.String(i, label), r.Bool(i, found), {}});
    }
    if (r.IsNull(i, mode)) continue;
    RelationLock l;
    l.pid = r.IsNull(i, pid) ? 0 : static_cast<int>(r.Int(i, pid).value_or(0));
    l.mode = r.String(i, mode);
    l.granted = r.Bool(i, granted);
    reading->tables.back().locks.push_back(std::move(l));
  }
  return Status::Ok();
}

bool PreflightTablesCollector::Healthy(const PollData& data) const {
  const auto* reading = data.parts.Find<PreflightTablesReading>();
  return reading == nullptr || reading->error.empty();
}

void PreflightTablesCollector::BuildView(const PollData& data, const ViewContext& ctx,
                                         TargetView* view) const {
  const auto* reading = data.parts.Find<PreflightTablesReading>();
  if (reading == nullptr || !reading->read || !reading->error.empty()) return;
  auto* out = view->parts.Mutable<PreflightTablesView>();
  out->rows.clear();
  for (const PreflightTablesReading::Table& t : reading->tables) {
    if (!t.found) continue;
    PreflightTablesView::Row row{t.label};
    for (const RelationLock& l : t.locks) {
      if (!LockModesConflict("AccessExclusiveLock", l.mode)) continue;
      row.would_wait = true;
      const Session* s = l.granted && l.pid != 0 ? ctx.index->Find(l.pid) : nullptr;
      if (s != nullptr && s->xact_start) {
        row.conflict_age = std::max(row.conflict_age, reading->now - *s->xact_start);
      }
    }
    out->rows.push_back(std::move(row));
  }
}

void PreflightTablesCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                          Families* f) const {
  const auto* view = v.parts.Find<PreflightTablesView>();
  if (view == nullptr) return;
  for (const PreflightTablesView::Row& r : view->rows) {
    f->Add(kWouldWait, {snap.target, r.table}, r.would_wait ? 1 : 0);
    f->Add(kConflictAge, {snap.target, r.table}, r.conflict_age);
  }
}

PGLOCK_REGISTER_COLLECTOR(PreflightTablesCollector, 105);

}  // namespace pglock
