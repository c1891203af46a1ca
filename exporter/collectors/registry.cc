#include "exporter/collectors/registry.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "exporter/collectors/database_stats.h"  // SessionEndCountersCollector
#include "exporter/collectors/lock_table.h"      // MarkPooledLockTableSessions
#include "exporter/snapshot/verdict.h"

namespace pglock {

// The PGLOCK_REGISTER_COLLECTOR lines of exporter/collectors/*.cc, listed by the build:
// RegisteredCollectors().
#include "exporter/collectors/collector_list.inc"

// Order: the batch collectors first, then those with round trips of their own. The batch is one
// transaction, read in this order: server (10) first (its now() is the poll's clock), then the
// session end counters (database_stats, 20), pg_stat_activity (activity, 30) and pg_locks
// (advisory_locks, 40). An ending backend releases its locks, counts its end, then leaves
// pg_stat_activity (measured on 15 to 18): read in this order, an end the poll counts belongs to a
// session gone from its pg_stat_activity unless that exit spanned the two adjacent reads. Read
// with pg_locks and pg_stat_activity first, a backend that had released its lock and counted its
// end but was still listed was common, and its end was explained by no one (or pinned on someone
// else). A session that counted its end and left between the first two reads is gone with no end
// counted: EventTracker::Settle reads the counters again for it. lock_waits (50) and the lock
// table (60) parse after the advisory collector, whose pg_locks rows they read; settings (70) and
// setting_overrides (80) anywhere in the batch; leases (90), poolers (100, whose view the
// verdicts read) and preflight_tables (105, inventory polls only) have round trips of their own,
// after the batch.
const std::vector<const Collector*>& Collectors() {
  static const std::vector<const Collector*> all = [] {
    std::vector<std::pair<int, const Collector*>> registered = RegisteredCollectors();
    std::sort(registered.begin(), registered.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<const Collector*> list;
    for (const auto& [order, c] : registered) list.push_back(c);
    return list;
  }();
  return all;
}

const Collector& SessionEndCountersCollector() {
  // By type, not by its name: a renamed collector cannot silently stop the second read.
  for (const Collector* c : Collectors()) {
    if (dynamic_cast<const DatabaseStatsCollector*>(c) != nullptr) return *c;
  }
  throw std::logic_error("the database_stats collector is not registered");
}

TargetView Analyze(const PollData& data, const AnalyzeOptions& options, HoldHistory* history,
                   std::map<std::string, int64_t>* dropped, std::vector<double>* build_seconds) {
  TargetView view;
  view.inventory = data.inventory;
  std::optional<PollIndex> built;
  const PollIndex& index = IndexOf(data, &built);
  const ViewContext ctx{&options, &index, static_cast<size_t>(std::max(options.top_n, 1)), history,
                        dropped};
  if (build_seconds != nullptr) build_seconds->clear();
  for (const Collector* c : Collectors()) {
    const auto started = std::chrono::steady_clock::now();
    c->BuildView(data, ctx, &view);
    if (build_seconds != nullptr) {
      build_seconds->push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
  }
  // Verdicts need every part of the view (pooled locks come last).
  MarkPooledLockTableSessions(&view);
  AttachVerdicts(data, index, options.names, &view);
  return view;
}

}  // namespace pglock
