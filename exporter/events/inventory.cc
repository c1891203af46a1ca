#include "exporter/events/inventory.h"

#include <map>
#include <set>

namespace pglock {

bool InventoryTier::Due(SteadyClock::time_point now) const {
  return interval_.count() == 0 || !last_ || now - last_at_ >= interval_;
}

void InventoryTier::Complete(SteadyClock::time_point started, std::shared_ptr<PollData>* data) {
  PollData& d = **data;
  if (d.inventory) {
    last_ = *data;
    last_at_ = started;
    quiet_ok_ = true;
    return;
  }
  if (d.quiet_mismatch) quiet_ok_ = false;
  if (!last_ || last_->postmaster_start != d.postmaster_start) return;
  // What collectors read at the inventory only (the shared lock table's entries, with their read
  // time).
  d.parts.CarryInventoryParts(last_->parts);
  std::set<std::pair<int, double>> alive;
  for (const Session& s : d.sessions) alive.insert({s.pid, s.backend_start});
  std::map<int, double> old_start;
  for (const Session& s : last_->sessions) old_start[s.pid] = s.backend_start;
  for (const AdvisoryLock& l : last_->locks) {
    if (l.granted && alive.count({l.pid, old_start[l.pid]}) != 0) d.locks.push_back(l);
  }
}

}  // namespace pglock
