#include "exporter/http/page_cache.h"

namespace pglock {

std::shared_ptr<const std::string> PageCache::Get(const Key& key, const std::string& variant,
                                                  const Render& render) {
  MutexLock lock(&mu_);
  if (!key_.Is(key)) {
    pages_.clear();
    key_ = SnapshotSetKey(key);
  }
  std::erase_if(pages_, [](const auto& p) { return p.second.expired(); });
  if (const auto it = pages_.find(variant); it != pages_.end()) {
    if (auto page = it->second.lock()) return page;
  }
  auto page = std::make_shared<const std::string>(render());
  ++renders_;
  if (pages_.size() < kMaxPageVariants) pages_.emplace(variant, page);
  return page;
}

uint64_t PageCache::renders() const {
  MutexLock lock(&mu_);
  return renders_;
}

}  // namespace pglock
