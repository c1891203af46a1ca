#include "exporter/collectors/settings.h"

#include <charconv>
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
  // The conf load time of the settings last read, exactly: to_chars gives the shortest text that
  // reads back as the same double, and float8 input reads it so.
  std::string read_at = "NULL";
  if (plan.previous != nullptr) {
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, plan.previous->settings_conf_load_time);
    read_at.assign(buf, res.ptr);
  }
  batch->AddExecute(name(), name(), StatementBatch::Phase::kBeforeTimeouts, read_at);
}

Status SettingsCollector::Parse(const PollPlan& plan, const BatchResults& results,
                                PollData* data) const {
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::UnexpectedShape("settings: no result");
  Columns c(*r, "settings");
  const int setting_name = c["name"], setting = c["setting"], unit = c["unit"],
            source = c["source"], conf_load_time = c["conf_load_time"];
  if (Status s = c.status(); !s.ok()) return s;
  if (r->Rows() == 0 && plan.previous != nullptr) {  // no reload since the last read
    data->settings = plan.previous->settings;
    data->settings_conf_load_time = plan.previous->settings_conf_load_time;
    return Status::Ok();
  }
  data->settings.clear();
  for (int i = 0; i < r->Rows(); ++i) {
    data->settings_conf_load_time = r->Double(i, conf_load_time).value_or(0);
    ServerSetting s;
    s.name = r->String(i, setting_name);
    const auto seconds =
        ParsePgTimeSetting(r->Text(i, setting), PgBaseUnitFromUnitColumn(r->Text(i, unit)));
    if (!seconds) continue;
    s.seconds = *seconds < 0 ? 0 : *seconds;
    s.source = r->String(i, source);
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
