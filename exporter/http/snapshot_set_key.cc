#include "exporter/http/snapshot_set_key.h"

namespace pglock {

SnapshotSetKey::SnapshotSetKey(const Set& set) : set_(set.begin(), set.end()), made_(true) {}

bool SnapshotSetKey::Is(const Set& set) const {
  if (!made_ || set.size() != set_.size()) return false;
  for (size_t i = 0; i < set.size(); ++i) {
    // The same control block, the same owner (and so the same snapshot: each has its own): a
    // live one is not expired, and a freed one's block is never another's while a weak pointer
    // holds it. Empty matches only empty.
    if (set_[i].owner_before(set[i]) || set[i].owner_before(set_[i])) return false;
  }
  return true;
}

}  // namespace pglock
