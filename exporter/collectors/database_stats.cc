#include "exporter/collectors/database_stats.h"

#include "exporter/pg/columns.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

const MetricDesc kSessionsEnded{
    "pglock_sessions_ended_total",
    prometheus::MetricType::Counter,
    "Mirror of pg_stat_database sessions_fatal / sessions_killed / sessions_abandoned (14+), "
    "monotonic across reconnects and server restarts.",
    {"target", "datname", "reason"}};

const MetricDesc kDeadlocks{
    "pglock_deadlocks_total",
    prometheus::MetricType::Counter,
    "Deadlocks detected by the server (mirror of pg_stat_database.deadlocks, 14+), monotonic "
    "across reconnects and server restarts. Most are shorter than a poll.",
    {"target", "datname"}};

}  // namespace

// The session end counters are 14+: before, nothing to read.
std::vector<PreparedStatement> DatabaseStatsCollector::Prepared(int server_version_num) const {
  if (server_version_num < 140000) return {};
  return {{name(), queries::kDatabaseStats}};
}

void DatabaseStatsCollector::Plan(const PollPlan& plan, StatementBatch* batch) const {
  if (plan.server_version_num >= 140000) batch->AddExecute(name(), name());
}

Status DatabaseStatsCollector::Parse(const PollPlan&, const BatchResults& results,
                                     PollData* data) const {
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::Ok();  // 12/13: no session counters
  Columns c(*r, "database_stats");
  const int datid = c["datid"], datname = c["datname"], fatal = c["sessions_fatal"],
            killed = c["sessions_killed"], abandoned = c["sessions_abandoned"],
            deadlocks = c["deadlocks"], snapshot = c["stats_snapshot"];
  if (Status s = c.status(); !s.ok()) return s;
  std::vector<DatabaseStats> stats;
  for (int i = 0; i < r->Rows(); ++i) {
    DatabaseStats d;
    d.datid = static_cast<uint32_t>(r->Int(i, datid).value_or(0));
    d.datname = r->String(i, datname);
    d.sessions_fatal = r->Int(i, fatal).value_or(0);
    d.sessions_killed = r->Int(i, killed).value_or(0);
    d.sessions_abandoned = r->Int(i, abandoned).value_or(0);
    d.deadlocks = r->Int(i, deadlocks).value_or(0);
    stats.push_back(std::move(d));
  }
  data->database_stats = std::move(stats);
  data->database_stats_snapshot.reset();
  if (r->Rows() > 0) data->database_stats_snapshot = r->Double(0, snapshot);
  return Status::Ok();
}

void DatabaseStatsCollector::ExposeCounters(const TargetSnapshot& snap, Families* f) const {
  for (const auto& [k, n] : snap.counters->sessions_ended) {
    f->Add(kSessionsEnded, {snap.target, std::get<0>(k), std::get<1>(k)}, n);
  }
  for (const auto& [db, n] : snap.counters->deadlocks) f->Add(kDeadlocks, {snap.target, db}, n);
}

PGLOCK_REGISTER_COLLECTOR(DatabaseStatsCollector, 20);

}  // namespace pglock
