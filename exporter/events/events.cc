#include "exporter/events/events.h"

namespace pglock {

void EventTracker::Observe(std::shared_ptr<const PollData> cur,
                           std::shared_ptr<const PollData> last_inventory, const LockNames* names,
                           Counters* counters, std::vector<Event>* events) {
  holds_.Observe(cur, last_inventory, names, counters, events);
  leases_.SeedZeroCounters(*cur, counters);
  CountSessionsEnded(*cur, counters);
  leases_.Observe(*cur, counters, events);
  pooled_.Observe(*cur, names, counters, events);
}

void EventTracker::CountSessionsEnded(const PollData& cur, Counters* counters) {
  if (!cur.database_stats) return;
  for (const DatabaseStats& d : *cur.database_stats) {
    const auto it = last_stats_.find(d.datid);
    const bool first_sight = it == last_stats_.end();
    const DatabaseStats prev = first_sight ? d : it->second;
    last_stats_[d.datid] = d;
    // The first sight is the baseline: the counters count the sessions that ended since the
    // exporter started watching, and a database where none did has no series. A decrease is a
    // reset (crash restart or pg_stat_reset): the new value counts from zero.
    if (first_sight) continue;
    const int64_t fatal = CounterDelta(prev.sessions_fatal, d.sessions_fatal);
    const int64_t killed = CounterDelta(prev.sessions_killed, d.sessions_killed);
    const int64_t abandoned = CounterDelta(prev.sessions_abandoned, d.sessions_abandoned);
    if (fatal + killed + abandoned == 0 &&
        counters->sessions_ended.count({d.datname, "fatal"}) == 0) {
      continue;
    }
    counters->sessions_ended[{d.datname, "fatal"}] += static_cast<double>(fatal);
    counters->sessions_ended[{d.datname, "killed"}] += static_cast<double>(killed);
    counters->sessions_ended[{d.datname, "abandoned"}] += static_cast<double>(abandoned);
  }
}

}  // namespace pglock
