// The backoffs of the exporter's retries, in one place: the reconnect of a target
// (SpreadRetryDelay, with the time a new session's setup may take: SessionSetupTimeout) and of its
// other databases' sessions (RetryDelay), and the retry of one statement that keeps failing on a
// live connection (StatementBackoff). Pure; StatementBackoff is thread-compatible.
#pragma once

#include <algorithm>
#include <chrono>

#include "exporter/util/duration.h"

namespace pglock {

inline constexpr Duration kMaxBackoff = std::chrono::seconds(10);
// A statement that fails at every try writes one ERROR line into the server's log each time (a
// table that does not exist yet, a missing privilege, a failing expression): retried at most this
// far apart, 12 lines an hour, where a 1 s poll would write 3,600.
inline constexpr Duration kMaxStatementBackoff = std::chrono::minutes(5);

// How long to wait before the next attempt after `consecutive_failures` failed ones: one interval
// after none or one, then 2x, 4x, ... up to max(interval, cap).
inline Duration RetryDelay(int consecutive_failures, Duration interval,
                           Duration cap = kMaxBackoff) {
  if (consecutive_failures <= 1) return interval;
  cap = std::max(interval, cap);
  const int shift = std::min(consecutive_failures - 1, 20);
  if (interval.count() > 0 && cap.count() / interval.count() < (int64_t{1} << shift)) return cap;
  return interval * (int64_t{1} << shift);
}

// RetryDelay for a target's reconnects, spread: `unit` is a number drawn uniformly from [0, 1),
// and after a failure the delay is between half of RetryDelay's and all of it. Targets that fail
// together (a cold start of many targets whose servers share the host, a network blip) would
// otherwise retry together at every step of the schedule and keep failing together; spread over
// half of each step, they come back one by one. No failure: the interval, unspread (the poll's
// cadence).
inline Duration SpreadRetryDelay(int consecutive_failures, Duration interval, double unit,
                                 Duration cap = kMaxBackoff) {
  const Duration delay = RetryDelay(consecutive_failures, interval, cap);
  if (consecutive_failures <= 0) return delay;
  unit = std::clamp(unit, 0.0, 1.0);
  return delay / 2 +
         Duration(static_cast<int64_t>(static_cast<double>((delay / 2).count()) * unit));
}

// How long the setup of a new session (connection, authentication, prepared statements, the
// locks' names, the server's identity) may take, after `consecutive_failures` failed polls: the
// poll's timeout at first, then as long as the reconnect's delay (interval, 2x, 4x, ... up to
// max(interval, cap)). A server too busy to open a session within one timeout gets more time at
// each try instead of failing at every one; a server that accepts and never answers costs one
// timeout at first and one delay's worth per try after, on its own poller only.
inline Duration SessionSetupTimeout(int consecutive_failures, Duration timeout, Duration interval,
                                    Duration cap = kMaxBackoff) {
  if (consecutive_failures <= 0) return timeout;
  return std::max(timeout, RetryDelay(consecutive_failures, interval, cap));
}

// When to run again a statement that failed on a live connection: after one interval, then 2x,
// 4x, ... up to kMaxStatementBackoff, until it succeeds. Its caller keeps reporting the last error
// meanwhile, so the user-visible signal stays while the server's log is spared.
class StatementBackoff {
 public:
  using Clock = std::chrono::steady_clock;

  // True when the statement may run at `now`: it never failed, or its delay has passed.
  bool Due(Clock::time_point now) const { return failures_ == 0 || now >= next_; }
  // The statement failed at `now`; `interval` is the pace of its tries (the poll's interval),
  // `cap` the longest delay (a lost connection comes back sooner than a missing privilege).
  void Failed(Clock::time_point now, Duration interval, Duration cap = kMaxStatementBackoff) {
    ++failures_;
    next_ = now + RetryDelay(failures_, interval, cap);
  }
  void Succeeded() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  int failures_ = 0;  // consecutive
  Clock::time_point next_{};
};

}  // namespace pglock
