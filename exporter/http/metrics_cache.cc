#include "exporter/http/metrics_cache.h"

#include <spdlog/spdlog.h>

#include "exporter/http/gzip.h"

namespace pglock {

void MetricsCache::Refresh(const Key& key, const Render& render) {
  if (plain_ && key_.Is(key)) return;
  plain_ = std::make_shared<const std::string>(render());
  gzip_.reset();
  key_ = SnapshotSetKey(key);
  ++renders_;
}

std::shared_ptr<const std::string> MetricsCache::Plain(const Key& key, const Render& render) {
  MutexLock lock(&mu_);
  Refresh(key, render);
  return plain_;
}

std::shared_ptr<const std::string> MetricsCache::Gzip(const Key& key, const Render& render) {
  MutexLock lock(&mu_);
  Refresh(key, render);
  if (!gzip_) {
    std::string compressed;
    if (!GzipCompress(*plain_, &compressed)) {
      spdlog::warn("metrics: gzip compression failed; serving plain text");
      return nullptr;
    }
    ++compressions_;
    spdlog::debug("metrics: compressed {} bytes to {}", plain_->size(), compressed.size());
    gzip_ = std::make_shared<const std::string>(std::move(compressed));
  }
  return gzip_;
}

uint64_t MetricsCache::renders() const {
  MutexLock lock(&mu_);
  return renders_;
}

uint64_t MetricsCache::compressions() const {
  MutexLock lock(&mu_);
  return compressions_;
}

}  // namespace pglock
