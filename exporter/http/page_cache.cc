#include "exporter/http/page_cache.h"

namespace pglock {

std::shared_ptr<const std::string> PageCache::Get(Key key, const std::string& variant,
                                                  const Render& render) {
  MutexLock lock(&mu_);
  if (key != key_) {
    pages_.clear();
    key_ = std::move(key);
  }
  if (const auto it = pages_.find(variant); it != pages_.end()) return it->second;
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
