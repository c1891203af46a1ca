// The collectors, in the order they plan, parse, collect and expose: every
// PGLOCK_REGISTER_COLLECTOR line of exporter/collectors/*.cc (collector.h), by ascending order.
// Adding a collector edits nothing here. Thread-safe (immutable after first use).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "exporter/collectors/collector.h"

namespace pglock {

const std::vector<const Collector*>& Collectors();

// The collector of the session end counters (pg_stat_database), which the poller reads again
// right after a poll whose lock holders' sessions closed with no end counted.
const Collector& SessionEndCountersCollector();

// Builds the view of one poll: every collector's part, in registry order. Fills *dropped with the
// detail series each metric left out because of top_n, and *build_seconds (when given) with the
// time each collector took, in registry order.
TargetView Analyze(const PollData& data, const AnalyzeOptions& options, HoldHistory* history,
                   std::map<std::string, int64_t>* dropped,
                   std::vector<double>* build_seconds = nullptr);

}  // namespace pglock
