#include "exporter/collectors/server_info.h"

#include "exporter/pg/columns.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

const MetricDesc kPostgresInfo{
    "pglock_postgres_info",
    prometheus::MetricType::Gauge,
    "PostgreSQL server version and role of the target (value 1); role is primary or "
    "standby (pg_is_in_recovery()).",
    {"target", "server_version", "role"}};

}  // namespace

std::vector<PreparedStatement> ServerCollector::Prepared(int) const {
  return {{name(), queries::kServerInfo}};
}

void ServerCollector::Plan(const PollPlan&, StatementBatch* batch) const {
  batch->AddExecute(name(), name());
}

Status ServerCollector::Parse(const PollPlan&, const BatchResults& results, PollData* data) const {
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::UnexpectedShape("server: no result");
  Columns c(*r, "server");
  const int version = c["server_version"], version_num = c["server_version_num"],
            start = c["postmaster_start"], now = c["now"], in_recovery = c["in_recovery"],
            lc_messages = c["lc_messages"];
  if (Status s = c.status(); !s.ok()) return s;
  if (r->Rows() != 1) return Status::UnexpectedShape("server: expected one row");
  data->server_version = r->String(0, version);
  data->server_version_num = static_cast<int>(r->Int(0, version_num).value_or(0));
  data->postmaster_start = r->Double(0, start).value_or(0);
  data->now = r->Double(0, now).value_or(0);
  data->in_recovery = r->String(0, in_recovery) == "t";
  data->lc_messages = r->String(0, lc_messages);
  return Status::Ok();
}

void ServerCollector::ExposeView(const TargetSnapshot& snap, const TargetView&,
                                 Families* out) const {
  if (!snap.server_version.empty()) {
    out->Add(kPostgresInfo, {snap.target, snap.server_version, snap.role}, 1);
  }
}

PGLOCK_REGISTER_COLLECTOR(ServerCollector, 10);

}  // namespace pglock
