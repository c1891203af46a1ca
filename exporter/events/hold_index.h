// The granted advisory locks of one poll as holds, indexed by key for the judgement of advisory
// holds (advisory_holds.h): flat sorted arrays, and one merge walk over two of them. Immutable once
// built; a HoldIndex is shared read-only between the judgements that use it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/session_end.h"

namespace pglock {

struct Hold {
  SessionId session;
  bool exclusive;
  bool operator==(const Hold& o) const = default;
};

// A poll's granted advisory locks as (key, hold), in the order of its rows.
using HoldRows = std::vector<std::pair<AdvisoryKey, Hold>>;

// The granted advisory locks of `data`, in the order of its rows.
HoldRows HoldRowsOf(const PollData& data);
// Whether HoldRowsOf(data) == rows, without building it: most polls take and let go of nothing.
bool SameHoldRows(const PollData& data, const HoldRows& rows);

// The granted advisory locks of a poll grouped by key, in flat sorted arrays: at 100k locks a
// std::map of vectors costs more than the rest of the poll. It keeps the rows it was built from:
// a poll with the same rows, in the same order, has the same index.
class HoldIndex {
 public:
  explicit HoldIndex(HoldRows rows);

  const HoldRows& rows() const { return rows_; }
  size_t size() const { return keys_.size(); }
  const AdvisoryKey& key(size_t i) const { return keys_[i]; }
  std::span<const Hold> holds(size_t i) const {
    return {holds_.data() + starts_[i], starts_[i + 1] - starts_[i]};
  }
  // Holds of `key`; empty when nobody holds it.
  std::span<const Hold> Find(const AdvisoryKey& key) const {
    const auto it = std::lower_bound(keys_.begin(), keys_.end(), key);
    if (it == keys_.end() || !(*it == key)) return {};
    return holds(static_cast<size_t>(it - keys_.begin()));
  }

 private:
  std::vector<AdvisoryKey> keys_;  // sorted, unique
  std::vector<size_t> starts_;     // holds of keys_[i] are holds_[starts_[i] .. starts_[i+1])
  std::vector<Hold> holds_;
  HoldRows rows_;  // as built from, in row order
};

// Calls f(key, held_before, held_now) for every key held at `prev` or at `cur`, in key order: both
// indexes are sorted, so one merge walk instead of a binary search for every key.
template <typename F>
void ForEachKey(const HoldIndex& prev, const HoldIndex& cur, F&& f) {
  size_t i = 0, j = 0;
  while (i < prev.size() || j < cur.size()) {
    if (j == cur.size() || (i < prev.size() && prev.key(i) < cur.key(j))) {
      f(prev.key(i), prev.holds(i), std::span<const Hold>{});
      ++i;
    } else if (i == prev.size() || cur.key(j) < prev.key(i)) {
      f(cur.key(j), std::span<const Hold>{}, cur.holds(j));
      ++j;
    } else {
      f(prev.key(i), prev.holds(i), cur.holds(j));
      ++i;
      ++j;
    }
  }
}

}  // namespace pglock
