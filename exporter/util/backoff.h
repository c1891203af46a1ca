// The reconnect backoff of a target and of its other databases' sessions, in one place.
#pragma once

#include <algorithm>
#include <chrono>

#include "exporter/util/duration.h"

namespace pglock {

inline constexpr Duration kMaxBackoff = std::chrono::seconds(10);

// How long to wait before the next attempt after `consecutive_failures` failed ones: one interval
// after none or one, then 2x, 4x, ... up to max(interval, 10 s).
inline Duration RetryDelay(int consecutive_failures, Duration interval) {
  if (consecutive_failures <= 1) return interval;
  const Duration cap = std::max(interval, kMaxBackoff);
  const int shift = std::min(consecutive_failures - 1, 20);
  if (interval.count() > 0 && cap.count() / interval.count() < (int64_t{1} << shift)) return cap;
  return interval * (int64_t{1} << shift);
}

}  // namespace pglock
