// The one entry point that judges a poll, used by the poller and by the tests alike: completes
// the poll with the inventory tier, judges it against the inventory before it (EventTracker), and
// settles the holders whose sessions closed with no end counted against the session end counters
// read again right after the poll. Thread-compatible: called by the poller thread that owns
// `tier` and `tracker`.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "exporter/events/blocking_episodes.h"
#include "exporter/events/events.h"
#include "exporter/events/inventory.h"
#include "exporter/events/logged_locks.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// The session end counters read again after a poll (nullopt: they could not be read), and how
// long after the poll's now() that read was.
struct CountersReadAgain {
  std::optional<std::vector<DatabaseStats>> stats;
  double seconds_after_poll = 0;
};

// Called at most once per poll, only when some holder's session closed with no end counted.
using ReadCountersAgain = std::function<CountersReadAgain()>;

// Judges the successful poll `*data`, started at `started` (the tier's clock): a tiered poll gets
// the last inventory's holders, and the poll, complete, its index (IndexPoll); counts into
// *counters and appends the events to *events (may be null), naming configured keys from `names`.
void JudgePoll(SteadyClock::time_point started, std::shared_ptr<PollData>* data,
               InventoryTier* tier, EventTracker* tracker, const LockNames* names,
               const ReadCountersAgain& read_again, Counters* counters, std::vector<Event>* events);

// Judges the blocking episodes and deadlocks of the same successful poll once its view is built
// (the view's roots come from the wait graph the lock_waits collector draws): the second half of
// a poll's judgement, called once the view is built, never for a failed poll.
void JudgeBlocking(const PollData& data, const TargetView& view, BlockingEpisodeTracker* episodes,
                   Counters* counters, std::vector<Event>* events);

// Judges what the server's log said of locks since the last poll (`records`: waits, lock
// timeouts, deadlocks) against the same successful poll: the third part of a poll's judgement.
void JudgeLoggedLocks(const PollData& data, const std::vector<LockRecord>& records,
                      const LockNames* names, int top_n, bool query_text,
                      LoggedLockTracker* tracker, Counters* counters, std::vector<Event>* events);

}  // namespace pglock
