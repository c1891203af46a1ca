// A TargetSnapshot built in one fixed block of storage, under an owner of its own: a call made
// after the last one's snapshot was released gives a new owner at the same address, which the
// caches' keys (exporter/http/snapshot_set_key.h) must not take for the old one.
#pragma once

#include <memory>
#include <new>

#include "exporter/snapshot/snapshot.h"

namespace pglock {

inline std::shared_ptr<const TargetSnapshot> SnapshotAtFixedAddress() {
  alignas(TargetSnapshot) static unsigned char storage[sizeof(TargetSnapshot)];
  return std::shared_ptr<const TargetSnapshot>(
      new (storage) TargetSnapshot(), [](const TargetSnapshot* t) { t->~TargetSnapshot(); });
}

}  // namespace pglock
