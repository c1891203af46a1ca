#include "exporter/collectors/setting_overrides.h"

#include "exporter/pg/columns.h"
#include "exporter/queries.h"
#include "exporter/util/duration.h"

namespace pglock {
namespace {

const MetricDesc kOverrideSeconds{
    "pglock_setting_override_seconds",
    prometheus::MetricType::Gauge,
    "Per-role / per-database value from pg_db_role_setting (* = all), in seconds; it applies to "
    "sessions started after the change.",
    {"target", "name", "database", "role"}};

// The unit a setting is written in when it has none, for values in pg_db_role_setting.
PgBaseUnit BaseUnitOf(const std::string& name) {
  return name.rfind("tcp_keepalives_", 0) == 0 ? PgBaseUnit::kSeconds : PgBaseUnit::kMilliseconds;
}

}  // namespace

std::vector<PreparedStatement> SettingOverridesCollector::Prepared(int) const {
  return {{name(), queries::kSettingOverrides}};
}

void SettingOverridesCollector::Plan(const PollPlan&, StatementBatch* batch) const {
  batch->AddExecute(name(), name());
}

Status SettingOverridesCollector::Parse(const PollPlan&, const BatchResults& results,
                                        PollData* data) const {
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::UnexpectedShape("setting_overrides: no result");
  Columns c(*r, "setting_overrides");
  const int datid = c["datid"], roleid = c["roleid"], database = c["database"], role = c["role"],
            setting_name = c["name"], value = c["value"];
  if (Status s = c.status(); !s.ok()) return s;
  data->overrides.clear();
  for (int i = 0; i < r->Rows(); ++i) {
    SettingOverride o;
    o.datid = static_cast<uint32_t>(r->Int(i, datid).value_or(0));
    o.roleid = static_cast<uint32_t>(r->Int(i, roleid).value_or(0));
    o.database = r->String(i, database);
    o.role = r->String(i, role);
    o.name = r->String(i, setting_name);
    const auto seconds = ParsePgTimeSetting(r->Text(i, value), BaseUnitOf(o.name));
    if (!seconds) continue;  // the server validated it on ALTER; an odd one is skipped, not fatal
    o.seconds = *seconds < 0 ? 0 : *seconds;
    data->overrides.push_back(std::move(o));
  }
  return Status::Ok();
}

void SettingOverridesCollector::BuildView(const PollData& data, const ViewContext&,
                                          TargetView* view) const {
  view->overrides = data.overrides;
}

void SettingOverridesCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                           Families* f) const {
  for (const SettingOverride& o : v.overrides) {
    f->Add(kOverrideSeconds, {snap.target, o.name, o.database, o.role}, o.seconds);
  }
}

PGLOCK_REGISTER_COLLECTOR(SettingOverridesCollector, 80);

}  // namespace pglock
