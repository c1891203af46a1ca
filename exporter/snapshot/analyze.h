// What turning one poll's observations (PollData) into the point-in-time view needs: the options,
// the hold history carried from poll to poll, and the context each collector's BuildView gets
// (Analyze() in exporter/collectors/registry.h runs them all). Thread-compatible.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/config/holder_matcher.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_index.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// When each (holder session, key) was first seen held; rebuilt on every inventory poll so it only
// holds what is currently held.
struct HoldHistory {
  struct Entry {
    int pid = 0;
    double backend_start = 0;
    AdvisoryKey key;
    double first_seen = 0;  // server epoch seconds
    auto Id() const { return std::tie(pid, backend_start, key); }
  };
  // In the order of the last inventory's lock rows, which PostgreSQL keeps from one read to the
  // next: each poll walks it alongside its own rows instead of sorting and searching (one entry
  // per held lock, 100k at scale).
  std::vector<Entry> first_seen;
};

struct LeaseTableRules {
  std::string table;
  std::vector<std::string> holder_labels;
  std::shared_ptr<const HolderMatcher> matcher;  // null: the holder text stays whole
  double max_hold = 0;                           // seconds; 0 when unset
};

class PooledLockTracker;

struct AnalyzeOptions {
  int top_n = 20;
  const LockNames* names = nullptr;
  // The poller's tracker of session locks on pooled connections; null: judged from this poll
  // alone (a lock held outside a transaction).
  const PooledLockTracker* pooled = nullptr;
  // The lease tables the poller's judgement found to be queues (their names are seen once); null:
  // only those the config marks.
  const std::set<std::string>* detected_queues = nullptr;
  std::vector<LeaseTableRules> lease_rules;
};

// What each collector's BuildView gets besides the poll.
struct ViewContext {
  const AnalyzeOptions* options = nullptr;
  const PollIndex* index = nullptr;
  size_t top_n = 20;
  HoldHistory* history = nullptr;
  std::map<std::string, int64_t>* dropped = nullptr;  // metric -> series left out by top_n
};

// Keeps the `n` most severe rows (`more_severe(a, b)` true when a comes first), in the order a
// stable sort gives them; returns how many were dropped. Orders indexes, then moves only the kept
// rows: rows carry strings, and there can be thousands.
template <typename T, typename Less>
int64_t KeepTopN(std::vector<T>* rows, size_t n, Less more_severe) {
  std::vector<size_t> order(rows->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t keep = std::min(n, rows->size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [&](size_t a, size_t b) {
                      if (more_severe((*rows)[a], (*rows)[b])) return true;
                      return !more_severe((*rows)[b], (*rows)[a]) && a < b;  // ties: row order
                    });
  std::vector<T> kept;
  kept.reserve(keep);
  for (size_t i = 0; i < keep; ++i) kept.push_back(std::move((*rows)[order[i]]));
  const auto dropped = static_cast<int64_t>(rows->size() - keep);
  *rows = std::move(kept);
  return dropped;
}

}  // namespace pglock
