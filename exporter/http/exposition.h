// Snapshot -> prometheus::MetricFamily: every series rebuilt from the latest snapshots, so a lock
// that went away simply is not there (no Family::Remove bookkeeping) and no database work is done.
// The HTTP server (server.cc, ServeMetrics) calls SnapshotMetrics::Families() once per new set of
// snapshots and serves that text to every scrape until the next (metrics_cache.h). Nothing here
// is registered with prometheus-cpp's Exposer. Families() never throws.
#pragma once

#include <prometheus/metric_family.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exporter/snapshot/snapshot.h"

namespace pglock {

// Which configured targets a shard polls: its ordinal, the total and, for every target in the
// config (the same list on every shard), the shard that polls it.
struct ShardStatus {
  int ordinal = 0;
  int total = 1;
  std::vector<std::pair<std::string, int>> targets;  // (target, its shard), config order
};

// What the exporter says of itself: its build (pglock_build_info) and its shard.
struct ExporterInfo {
  std::string version;
  std::string revision;
  ShardStatus shard = {};
};

// Every family for the given targets, each family name once, in a stable order.
std::vector<prometheus::MetricFamily> BuildFamilies(
    const std::vector<std::shared_ptr<const TargetSnapshot>>& targets,
    const ExporterInfo& exporter);

// Builds the families of the latest snapshots, read through `source` (which must be thread-safe
// and non-throwing) at each call. Thread-safe.
class SnapshotMetrics {
 public:
  using Source = std::function<std::vector<std::shared_ptr<const TargetSnapshot>>()>;
  SnapshotMetrics(Source source, ExporterInfo build)
      : source_(std::move(source)), build_(std::move(build)) {}

  std::vector<prometheus::MetricFamily> Families() const;

 private:
  const Source source_;
  const ExporterInfo build_;
};

}  // namespace pglock
