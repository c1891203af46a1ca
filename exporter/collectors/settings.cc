#include "exporter/collectors/settings.h"

#include <string>

#include "exporter/pg/columns.h"
#include "exporter/queries.h"
#include "exporter/util/duration.h"

namespace pglock {
namespace {

const MetricDesc kSettingSeconds{"pglock_setting_seconds",
                                 prometheus::MetricType::Gauge,
                                 "Server value of a timeout setting, in seconds; 0 = disabled.",
                                 {"target", "name", "source"}};

}  // namespace

std::vector<PreparedStatement> SettingsCollector::Prepared(int) const {
  return {{name(), queries::kSettings}};
}

void SettingsCollector::Plan(const PollPlan& plan, StatementBatch* batch) const {
  const std::string loaded_us =
      plan.settings_read != nullptr ? std::to_string(plan.settings_read->loaded_us) : "NULL";
  batch->AddExecute(name(), name(), StatementBatch::Phase::kBeforeTimeouts, loaded_us);
}

Status SettingsCollector::Parse(const PollPlan& plan, const BatchResults& results,
                                PollData* data) const {
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::UnexpectedShape("settings: no result");
  Columns c(*r, "settings");
  const int setting_name = c["name"], setting = c["setting"], unit = c["unit"],
            source = c["source"], loaded_us = c["conf_loaded_us"];
  if (Status s = c.status(); !s.ok()) return s;
  if (r->Rows() == 0 && plan.settings_read != nullptr) {  // no reload since the last read
    data->settings = plan.settings_read->settings;
    data->settings_loaded_us = plan.settings_read->loaded_us;
    return Status::Ok();
  }
  data->settings.clear();
  for (int i = 0; i < r->Rows(); ++i) {
    data->settings_loaded_us = r->Int(i, loaded_us).value_or(0);
    ServerSetting s;
    s.name = r->Text(i, setting_name);
    const auto seconds =
        ParsePgTimeSetting(r->Text(i, setting), PgBaseUnitFromUnitColumn(r->Text(i, unit)));
    if (!seconds) continue;
    s.seconds = *seconds < 0 ? 0 : *seconds;
    s.source = r->Text(i, source);
    data->settings.push_back(std::move(s));
  }
  return Status::Ok();
}

void SettingsCollector::BuildView(const PollData& data, const ViewContext&,
                                  TargetView* view) const {
  view->settings = data.settings;
}

void SettingsCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                   Families* f) const {
  for (const ServerSetting& s : v.settings) {
    f->Add(kSettingSeconds, {snap.target, s.name, s.source}, s.seconds);
  }
}

PGLOCK_REGISTER_COLLECTOR(SettingsCollector, 70);

}  // namespace pglock
