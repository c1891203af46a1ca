// The set of target snapshots a cached page or exposition text was rendered from, held weakly: a
// cache must not keep a poll's snapshots (each with its view, megabytes at 15k locks) alive after
// the poller has replaced them, nor for as long as no request comes. (A snapshot made by
// make_shared, as the poller makes them, keeps the bytes of the TargetSnapshot itself until the
// key lets go, not what it owns.) Not thread-safe: the caches hold it under their locks.
#pragma once

#include <memory>
#include <vector>

#include "exporter/snapshot/snapshot.h"

namespace pglock {

class SnapshotSetKey {
 public:
  using Set = std::vector<std::shared_ptr<const TargetSnapshot>>;

  SnapshotSetKey() = default;
  explicit SnapshotSetKey(const Set& set);

  // True when `set` holds the very objects this key was made from, in order, each snapshot
  // having an owner of its own (no aliasing pointers into one owner). An object freed since never
  // matches, even when a new snapshot took its address (the weak pointers keep their control
  // blocks); a default-constructed key matches nothing.
  bool Is(const Set& set) const;

 private:
  std::vector<std::weak_ptr<const TargetSnapshot>> set_;
  bool made_ = false;
};

}  // namespace pglock
