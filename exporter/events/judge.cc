#include "exporter/events/judge.h"

#include "exporter/snapshot/poll_index.h"

namespace pglock {

void JudgePoll(SteadyClock::time_point started, std::shared_ptr<PollData>* data,
               InventoryTier* tier, EventTracker* tracker, const LockNames* names,
               const ReadCountersAgain& read_again, Counters* counters,
               std::vector<Event>* events) {
  const std::shared_ptr<const PollData> previous_inventory = tier->last();
  tier->Complete(started, data);
  IndexPoll(data->get());  // complete now: every later look-up of this poll shares it
  tracker->Observe(*data, previous_inventory, names, counters, events);
  if (!tracker->settling()) return;
  const CountersReadAgain later = read_again ? read_again() : CountersReadAgain{};
  tracker->Settle(later.stats, later.seconds_after_poll, names, counters, events);
}

void JudgeBlocking(const PollData& data, const TargetView& view, BlockingEpisodeTracker* episodes,
                   Counters* counters, std::vector<Event>* events) {
  episodes->Observe(data, view, counters, events);
}

void JudgeLoggedLocks(const PollData& data, const std::vector<LockRecord>& records,
                      const LockNames* names, int top_n, bool query_text,
                      LoggedLockTracker* tracker, Counters* counters, std::vector<Event>* events) {
  tracker->Observe(data, records, names, top_n, query_text, counters, events);
}

}  // namespace pglock
