#include "exporter/http/exposition.h"

#include "exporter/collectors/registry.h"
#include "exporter/metrics/families.h"
#include "exporter/serverlog/server_log.h"
#include "exporter/storage/state_store.h"

namespace pglock {
namespace {

using prometheus::MetricType;

// The exporter's own families; every signal family belongs to its collector.
const MetricDesc kBuildInfo{"pglock_build_info",
                            MetricType::Gauge,
                            "pglock_exporter build (value 1).",
                            {"version", "revision"}};
const MetricDesc kUp{"pglock_up",
                     MetricType::Gauge,
                     "1 if the last poll of the target succeeded, else 0.",
                     {"target"}};
const MetricDesc kPollDuration{"pglock_poll_duration_seconds",
                               MetricType::Gauge,
                               "Duration of the last poll of the target.",
                               {"target"}};
const MetricDesc kPollErrors{"pglock_poll_errors_total",
                             MetricType::Counter,
                             "Polls of the target that failed.",
                             {"target"}};
const MetricDesc kQuietFallbacks{
    "pglock_quiet_holder_fallbacks_total",
    MetricType::Counter,
    "Inventory polls that read a quiet holder's locks as changed since the last inventory (a lock "
    "taken or let go between the poll's read of the sessions and its read of pg_locks): kept as "
    "tiered polls, the next inventory reads every holder in full.",
    {"target"}};
const MetricDesc kLastSuccess{"pglock_last_poll_success_timestamp_seconds",
                              MetricType::Gauge,
                              "Unix time of the last successful poll of the target.",
                              {"target"}};
const MetricDesc kSeriesDropped{"pglock_series_dropped_total",
                                MetricType::Counter,
                                "Detail series left out because of poll.top_n, summed over polls.",
                                {"target", "metric"}};
const MetricDesc kCollectorErrors{
    "pglock_collector_errors_total",
    MetricType::Counter,
    "Failures of an optional collector (a lease table, a pooler) that did not fail the poll.",
    {"target", "collector"}};
const MetricDesc kCollectorUp{"pglock_collector_up",
                              MetricType::Gauge,
                              "1 if the collector succeeded at the target's last poll, else 0.",
                              {"target", "collector"}};
const MetricDesc kCollectorDuration{
    "pglock_collector_duration_seconds",
    MetricType::Gauge,
    "Time the collector took at the last poll: parsing its rows, its own round trips (lease "
    "tables, poolers) and building its view. The shared round trip of the poll's batch is in "
    "pglock_poll_duration_seconds.",
    {"target", "collector"}};

const MetricDesc kStorageWriteErrors{
    "pglock_storage_write_errors_total",
    MetricType::Counter,
    "Writes of a target's state to the [storage] directory that failed (polling goes on).",
    {}};
const MetricDesc kStorageLastWrite{
    "pglock_storage_last_write_timestamp_seconds",
    MetricType::Gauge,
    "Unix time of the last write of a target's state that succeeded; 0 before the first.",
    {}};

const MetricDesc kShardOrdinal{"pglock_shard_ordinal",
                               MetricType::Gauge,
                               "This exporter's shard ([shard] ordinal; 0 when not sharded).",
                               {}};
const MetricDesc kShards{"pglock_shards",
                         MetricType::Gauge,
                         "The number of shards sharing the config's targets ([shard] total).",
                         {}};
const MetricDesc kShardTargets{
    "pglock_shard_targets", MetricType::Gauge, "Configured targets this shard polls.", {}};
const MetricDesc kTargetShard{
    "pglock_target_shard_info",
    MetricType::Gauge,
    "Every configured target and the shard that should poll it (value 1), the same on every "
    "shard, when sharded: a target here without pglock_up from any exporter is polled by "
    "nobody.",
    {"target", "shard"}};

void AddShard(const ShardStatus& s, Families* f) {
  f->Add(kShardOrdinal, {}, s.ordinal);
  f->Add(kShards, {}, s.total);
  int owned = 0;
  for (const auto& [target, shard] : s.targets) {
    // Only when sharded: one exporter's pglock_up already names every target it has.
    if (s.total > 1) f->Add(kTargetShard, {target, std::to_string(shard)}, 1);
    if (shard == s.ordinal) ++owned;
  }
  f->Add(kShardTargets, {}, owned);
}

void AddHealth(const TargetSnapshot& t, Families* f) {
  f->Add(kUp, {t.target}, t.up ? 1 : 0);
  f->Add(kPollDuration, {t.target}, t.poll_duration);
  f->Add(kPollErrors, {t.target}, t.poll_errors);
  f->Add(kQuietFallbacks, {t.target}, t.quiet_fallbacks);
  if (t.last_success > 0) f->Add(kLastSuccess, {t.target}, t.last_success);
  for (const auto& [metric, n] : t.counters->series_dropped) {
    f->Add(kSeriesDropped, {t.target, metric}, n);
  }
  for (const auto& [collector, n] : t.counters->collector_errors) {
    f->Add(kCollectorErrors, {t.target, collector}, n);
  }
  for (const CollectorStatus& c : t.collectors) {
    f->Add(kCollectorUp, {t.target, c.name}, c.up ? 1 : 0);
    f->Add(kCollectorDuration, {t.target, c.name}, c.seconds);
  }
  if (t.server_log) ExposeServerLog(t, f);
}

}  // namespace

std::string ExpositionText(const std::vector<std::shared_ptr<const TargetSnapshot>>& targets,
                           const ExporterInfo& exporter) {
  Families f;
  f.Add(kBuildInfo, {exporter.version, exporter.revision}, 1);
  AddShard(exporter.shard, &f);
  if (const StateWriteFigures w = StateWrites(); w.enabled) {
    f.Add(kStorageWriteErrors, {}, w.errors);
    f.Add(kStorageLastWrite, {}, w.last_write);
  }
  for (const auto& t : targets) {
    if (t) AddHealth(*t, &f);
  }
  for (const auto& t : targets) {
    // A failed poll drops the target's lock series: stale data must not hold or hide alerts.
    if (!t || !t->up || !t->view) continue;
    for (const Collector* c : Collectors()) c->ExposeView(*t, *t->view, &f);
  }
  for (const auto& t : targets) {
    if (!t) continue;
    for (const Collector* c : Collectors()) c->ExposeCounters(*t, &f);
  }
  return f.Text();
}

std::string SnapshotMetrics::Text() const {
  try {
    return ExpositionText(source_(), build_);
  } catch (...) {
    // Text runs inside CivetWeb's C callback: nothing may escape. An empty scrape is visible
    // (pglock_up missing fires PglockTargetDown); a crash would not be.
    return {};
  }
}

}  // namespace pglock
