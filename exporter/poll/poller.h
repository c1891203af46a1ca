// One poller per target: a thread that owns the target's libpq connection, polls every
// poll.interval with a hard deadline of poll.timeout, turns the result into an immutable
// TargetSnapshot and swaps it in. Reconnects with capped exponential backoff.
// Thread-safety: Latest() may be called from any thread; Start/Stop from the owning thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "exporter/collect/lock_names.h"
#include "exporter/config/config.h"
#include "exporter/pg/connection.h"
#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/events.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

class Poller {
 public:
  Poller(TargetConfig target, PollConfig poll);
  ~Poller();  // stops and joins
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  void Start();
  // Wakes the thread and joins it; the connection is closed. Returns within about a second even
  // when a poll is in flight (the poll's own deadline bounds it).
  void Stop();

  std::shared_ptr<const TargetSnapshot> Latest() const;
  const TargetConfig& target() const { return target_; }
  const PollConfig& poll() const { return poll_; }

  // Runs one poll synchronously on the calling thread (tests). Not to be mixed with Start().
  void PollOnceForTest() { PollOnce(); }

 private:
  void Run();
  // One poll: connect if needed, collect, analyze, count events, publish. Returns success.
  bool PollOnce();
  bool EnsureConnected(SteadyClock::time_point deadline, std::string* error);
  bool Collect(SteadyClock::time_point deadline, PollData* data, std::string* error);
  void Publish(std::shared_ptr<const TargetSnapshot> snapshot);
  void LogStateChange(bool up, const std::string& error);

  const TargetConfig target_;
  const PollConfig poll_;
  const std::string masked_dsn_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                             // GUARDED_BY(mu_)
  std::atomic<bool> abort_{false};                // makes an in-flight poll give up
  std::shared_ptr<const TargetSnapshot> latest_;  // GUARDED_BY(mu_)
  std::thread thread_;

  // Owned by the polling thread only.
  std::unique_ptr<PgConnection> conn_;
  std::map<std::string, std::unique_ptr<PgConnection>> pooler_conns_;  // by pooler name
  LockNames names_;
  AnalyzeOptions analyze_options_;
  HoldHistory history_;
  EventTracker events_;
  Counters counters_;
  std::shared_ptr<const PollData> last_inventory_;
  SteadyClock::time_point last_inventory_at_{};
  double poll_errors_ = 0;
  double last_success_ = 0;
  int consecutive_failures_ = 0;
  bool ever_polled_ = false;
  bool was_up_ = false;
  bool warned_hidden_ = false;
  std::map<std::string, std::string> collector_state_;  // collector -> last error ("" = ok)
};

}  // namespace pglock
