// Snapshot -> exposition text: every series written again from the latest snapshots, so a lock
// that went away simply is not there (no removal bookkeeping) and no database work is done. The
// HTTP server (server.cc, ServeMetrics) calls SnapshotMetrics::Text() once per new set of
// snapshots and serves that text to every scrape until the next (metrics_cache.h). Text() never
// throws.
#pragma once

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

// The exposition text (format 0.0.4) of every family for the given targets, each family name
// once, in a stable order.
std::string ExpositionText(const std::vector<std::shared_ptr<const TargetSnapshot>>& targets,
                           const ExporterInfo& exporter);

// Writes the text of the latest snapshots, read through `source` (which must be thread-safe
// and non-throwing) at each call. Thread-safe.
class SnapshotMetrics {
 public:
  using Source = std::function<std::vector<std::shared_ptr<const TargetSnapshot>>()>;
  SnapshotMetrics(Source source, ExporterInfo build)
      : source_(std::move(source)), build_(std::move(build)) {}

  std::string Text() const;

 private:
  const Source source_;
  const ExporterInfo build_;
};

}  // namespace pglock
