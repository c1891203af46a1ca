// The /metrics body of one set of target snapshots, plain and gzip-compressed, shared by every
// scrape until a poll publishes a new snapshot. A scrape then costs a pointer comparison, not a
// serialisation or a compression: 50 concurrent scrapes render once and compress at most once.
// The text is kept (tens of kilobytes; a pair of Prometheus servers scrapes it twice), the
// snapshots are not (SnapshotSetKey). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exporter/http/snapshot_set_key.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

class MetricsCache {
 public:
  using Key = std::vector<std::shared_ptr<const TargetSnapshot>>;
  using Render = std::function<std::string()>;

  MetricsCache() = default;
  MetricsCache(const MetricsCache&) = delete;
  MetricsCache& operator=(const MetricsCache&) = delete;

  // The exposition text for `key` (the snapshot objects themselves): the cached one
  // when the key is the last call's, else `render()`'s, which then replaces it. `render` runs
  // under the cache's lock and must not call back into it.
  std::shared_ptr<const std::string> Plain(const Key& key, const Render& render) EXCLUDES(mu_);

  // The same text gzip-compressed, compressed lazily on the first call for a key and kept with
  // the plain text. nullptr when compression failed: serve Plain() instead.
  std::shared_ptr<const std::string> Gzip(const Key& key, const Render& render) EXCLUDES(mu_);

  // How often the text was rendered and compressed, for tests and debug logs.
  uint64_t renders() const EXCLUDES(mu_);
  uint64_t compressions() const EXCLUDES(mu_);

 private:
  void Refresh(const Key& key, const Render& render) REQUIRES(mu_);

  mutable Mutex mu_;
  SnapshotSetKey key_ GUARDED_BY(mu_);
  std::shared_ptr<const std::string> plain_ GUARDED_BY(mu_);
  std::shared_ptr<const std::string> gzip_ GUARDED_BY(mu_);  // of plain_; null until asked
  uint64_t renders_ GUARDED_BY(mu_) = 0;
  uint64_t compressions_ GUARDED_BY(mu_) = 0;
};

}  // namespace pglock
