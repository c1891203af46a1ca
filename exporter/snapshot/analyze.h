// Turns one poll's observations (PollData) into the point-in-time view the metrics show: each
// collector builds its own part (exporter/collectors); Analyze() runs them all. Pure apart from
// HoldHistory, which carries first-seen times from poll to poll. Thread-compatible.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/collectors/lock_names.h"
#include "exporter/config/config.h"
#include "exporter/snapshot/holder_matcher.h"
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
  // Sorted by Id(): a flat vector, since it holds one entry per held lock (100k at scale).
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
  std::vector<LeaseTableRules> lease_rules;
};

// The `lock` label: the configured name, else the rendered key.
std::string LockLabel(const AdvisoryKey& key, const LockNames* names);

// What each collector's BuildView gets besides the poll.
struct ViewContext {
  const AnalyzeOptions* options = nullptr;
  const PollIndex* index = nullptr;
  size_t top_n = 20;
  HoldHistory* history = nullptr;
  std::map<std::string, int64_t>* dropped = nullptr;  // metric -> series left out by top_n
};

// Builds the view: every collector's part, in registry order. Fills *dropped with the detail
// series each metric left out because of top_n, and *build_seconds (when given) with the time
// each collector took, in registry order.
TargetView Analyze(const PollData& data, const AnalyzeOptions& options, HoldHistory* history,
                   std::map<std::string, int64_t>* dropped,
                   std::vector<double>* build_seconds = nullptr);

// Keeps the `n` most severe rows (`more_severe(a, b)` true when a comes first); returns how many
// were dropped.
template <typename T, typename Less>
int64_t KeepTopN(std::vector<T>* rows, size_t n, Less more_severe) {
  std::stable_sort(rows->begin(), rows->end(), more_severe);
  if (rows->size() <= n) return 0;
  const auto dropped = static_cast<int64_t>(rows->size() - n);
  rows->resize(n);
  return dropped;
}

}  // namespace pglock
