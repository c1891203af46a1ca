// Pages rendered from one set of target snapshots (the on-call view, exporter/http/oncall.h),
// shared while a request is sending them: requests for the same page and filter of one snapshot
// set that overlap render once (one that comes after the last has been sent renders again). Nothing
// is kept past its last request, neither a page (the whole event log as JSON is megabytes, and an
// idle exporter would keep it until the next request) nor the snapshots (SnapshotSetKey). Bounded:
// at most kMaxPageVariants pages per snapshot set; beyond that a page is rendered for its request
// only. Separate from MetricsCache so that rendering a page never holds up a scrape. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exporter/http/snapshot_set_key.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

inline constexpr size_t kMaxPageVariants = 64;

class PageCache {
 public:
  using Key = std::vector<std::shared_ptr<const TargetSnapshot>>;
  using Render = std::function<std::string()>;

  PageCache() = default;
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;

  // The page `variant` (path and filter) of the snapshot set `key` (the same objects): the one a
  // request still holds, or `render()`'s. `render` runs under the cache's lock and must not call
  // back into it.
  std::shared_ptr<const std::string> Get(const Key& key, const std::string& variant,
                                         const Render& render) EXCLUDES(mu_);
  uint64_t renders() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  SnapshotSetKey key_ GUARDED_BY(mu_);
  std::map<std::string, std::weak_ptr<const std::string>> pages_ GUARDED_BY(mu_);
  uint64_t renders_ GUARDED_BY(mu_) = 0;
};

}  // namespace pglock
