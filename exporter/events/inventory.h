// The tiered poll, in one place. An inventory poll reads every advisory lock (pg_locks); with
// poll.inventory_interval > 0 the polls in between read only the locks of sessions that wait, and
// take the holders from the last inventory (kept only while their session is still connected to
// the same server run). Releases, losses and takeovers are judged between inventories.
// Thread-compatible: owned by one poller.
#pragma once

#include <chrono>
#include <memory>

#include "exporter/pg/connection.h"
#include "exporter/snapshot/poll_data.h"

namespace pglock {

class InventoryTier {
 public:
  // interval 0: every poll is an inventory.
  explicit InventoryTier(std::chrono::milliseconds interval) : interval_(interval) {}

  // A reload changed poll.inventory_interval: the last inventory stays the baseline.
  void set_interval(std::chrono::milliseconds interval) { interval_ = interval; }

  // Whether the poll starting at `now` must read every advisory lock.
  bool Due(SteadyClock::time_point now) const;

  // Completes a successful poll started at `started` before it is shared: an inventory is
  // remembered; a tiered poll gets the holders of the last inventory whose session is alive.
  void Complete(SteadyClock::time_point started, std::shared_ptr<PollData>* data);

  // The last successful inventory poll, or null.
  const std::shared_ptr<const PollData>& last() const { return last_; }

  // The baseline of the next inventory's quiet holders (PollPlan::quiet_baseline): the last
  // inventory, unless the poll after it found its quiet holders changed.
  const PollData* QuietBaseline() const { return quiet_ok_ ? last_.get() : nullptr; }

 private:
  std::chrono::milliseconds interval_;
  std::shared_ptr<const PollData> last_;
  SteadyClock::time_point last_at_{};
  bool quiet_ok_ = true;
};

}  // namespace pglock
