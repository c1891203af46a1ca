#include "exporter/events/hold_index.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace pglock {
namespace {

// `key` as one number that sorts as AdvisoryKey's < does (objsubid's sign bit flipped).
unsigned __int128 Packed(const AdvisoryKey& key) {
  const uint64_t hi = (uint64_t{key.datid} << 32) | key.classid;
  const uint64_t lo =
      (uint64_t{key.objid} << 32) | (static_cast<uint32_t>(key.objsubid) ^ 0x80000000U);
  return (static_cast<unsigned __int128>(hi) << 64) | lo;
}

// Calls f(key, hold) for every granted advisory lock of `data`, in the order of its rows, until
// f returns false; whether it never did.
template <typename F>
bool ForEachHoldRow(const PollData& data, F&& f) {
  std::unordered_map<int, double> backend_start;
  for (const Session& s : data.sessions) backend_start[s.pid] = s.backend_start;
  // A session's locks come in runs: its backend_start is looked up once per run.
  std::optional<int> pid;
  double start = 0;
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted) continue;
    if (pid != l.pid) {
      const auto it = backend_start.find(l.pid);
      start = it == backend_start.end() ? 0 : it->second;
      pid = l.pid;
    }
    if (!f(l.key, Hold{{l.pid, start}, l.exclusive})) return false;
  }
  return true;
}

}  // namespace

HoldRows HoldRowsOf(const PollData& data) {
  HoldRows rows;
  rows.reserve(data.locks.size());
  ForEachHoldRow(data, [&](const AdvisoryKey& key, const Hold& hold) {
    rows.emplace_back(key, hold);
    return true;
  });
  return rows;
}

bool SameHoldRows(const PollData& data, const HoldRows& rows) {
  size_t i = 0;
  const bool all_matched = ForEachHoldRow(data, [&](const AdvisoryKey& key, const Hold& hold) {
    if (i == rows.size() || !(rows[i].first == key) || !(rows[i].second == hold)) return false;
    ++i;
    return true;
  });
  return all_matched && i == rows.size();
}

HoldIndex::HoldIndex(HoldRows rows) : rows_(std::move(rows)) {
  // Sorted by packed key, with the row's index: one comparison instead of four.
  std::vector<std::pair<unsigned __int128, uint32_t>> order;
  order.reserve(rows_.size());
  for (size_t i = 0; i < rows_.size(); ++i) {
    order.emplace_back(Packed(rows_[i].first), static_cast<uint32_t>(i));
  }
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  holds_.reserve(order.size());
  for (const auto& [packed, i] : order) {
    const auto& [key, hold] = rows_[i];
    if (keys_.empty() || !(keys_.back() == key)) {
      keys_.push_back(key);
      starts_.push_back(holds_.size());
    }
    holds_.push_back(hold);
  }
  starts_.push_back(holds_.size());
}

}  // namespace pglock
