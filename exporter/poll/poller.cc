#include "exporter/poll/poller.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "exporter/collect/core.h"
#include "exporter/collect/leases.h"
#include "exporter/collect/poolers.h"
#include "exporter/pg/conninfo.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

constexpr auto kMaxBackoff = std::chrono::seconds(10);

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Poller::Poller(TargetConfig target, PollConfig poll)
    : target_(std::move(target)), poll_(poll), masked_dsn_(MaskConninfo(target_.dsn)) {
  analyze_options_.top_n = poll_.top_n;
  analyze_options_.names = &names_;
  for (const LeaseTableConfig& t : target_.leases) {
    LeaseTableRules rules;
    rules.table = t.table;
    rules.holder_labels = t.holder_labels;
    if (!t.holder_pattern.empty()) {
      rules.matcher = std::make_shared<const HolderMatcher>(t.holder_pattern);
    }
    analyze_options_.lease_rules.push_back(std::move(rules));
  }
  auto initial = std::make_shared<TargetSnapshot>();
  initial->target = target_.name;
  initial->state = "connecting";
  latest_ = std::move(initial);
}

Poller::~Poller() { Stop(); }

void Poller::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Poller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  abort_.store(true);
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  conn_.reset();
  pooler_conns_.clear();
}

std::shared_ptr<const TargetSnapshot> Poller::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void Poller::Publish(std::shared_ptr<const TargetSnapshot> snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = std::move(snapshot);
}

void Poller::Run() {
  for (;;) {
    const auto started = SteadyClock::now();
    const bool ok = PollOnce();
    consecutive_failures_ = ok ? 0 : consecutive_failures_ + 1;
    auto delay = std::chrono::duration_cast<SteadyClock::duration>(poll_.interval);
    if (!ok && consecutive_failures_ > 1) {
      // Capped exponential backoff: interval, 2x, 4x, ... up to max(interval, 10s).
      const auto cap = std::max<SteadyClock::duration>(delay, kMaxBackoff);
      const int shift = std::min(consecutive_failures_ - 1, 10);
      delay = std::min<SteadyClock::duration>(delay * (1 << shift), cap);
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_until(lock, started + delay, [this] { return stop_; })) return;
  }
}

void Poller::LogStateChange(bool up, const std::string& error) {
  if (!ever_polled_) {
    if (up) {
      spdlog::info("target {}: connected to {}", target_.name, masked_dsn_);
    } else {
      spdlog::error("target {}: poll failed: {}", target_.name, error);
    }
  } else if (up && !was_up_) {
    spdlog::info("target {}: recovered, connected to {}", target_.name, masked_dsn_);
  } else if (!up && was_up_) {
    spdlog::error("target {}: poll failed, target down: {}", target_.name, error);
  } else if (!up) {
    spdlog::debug("target {}: still down: {}", target_.name, error);
  }
  ever_polled_ = true;
  was_up_ = up;
}

bool Poller::EnsureConnected(SteadyClock::time_point deadline, std::string* error) {
  if (conn_ && !conn_->Broken()) return true;
  conn_.reset();
  auto conn = PgConnection::Connect(target_.dsn, {{"application_name", "pglock_exporter"}},
                                    deadline, error, &abort_);
  if (!conn) return false;
  std::vector<PgResult> ignored;
  if (!conn->Exec(queries::kSessionSetup, {}, deadline, &ignored, error)) return false;
  if (!ResolveLockNames(*conn, target_.locks, deadline, &names_, error)) return false;
  conn_ = std::move(conn);
  return true;
}

bool Poller::Collect(SteadyClock::time_point deadline, PollData* data, std::string* error) {
  if (!EnsureConnected(deadline, error)) return false;
  const int timeout_ms = static_cast<int>(poll_.timeout.count());
  CoreQueryOptions options;
  options.server_version_num = conn_->ServerVersionNum();
  options.statement_timeout_ms = std::max(timeout_ms, 1);
  options.lock_timeout_ms = std::clamp(timeout_ms / 4, 1, 500);
  const auto now = SteadyClock::now();
  options.inventory = poll_.inventory_interval.count() == 0 || !last_inventory_ ||
                      now - last_inventory_at_ >= poll_.inventory_interval;
  if (!CollectCore(*conn_, options, deadline, data, error)) return false;
  if (options.inventory) {
    last_inventory_at_ = now;
  } else if (last_inventory_ && last_inventory_->postmaster_start == data->postmaster_start) {
    // Between inventories, holders come from the last inventory, kept only for sessions that
    // are still connected; releases, losses and takeovers wait for the next inventory.
    std::set<std::pair<int, double>> alive;
    for (const Session& s : data->sessions) alive.insert({s.pid, s.backend_start});
    std::map<int, double> old_start;
    for (const Session& s : last_inventory_->sessions) old_start[s.pid] = s.backend_start;
    for (const AdvisoryLock& l : last_inventory_->locks) {
      if (l.granted && alive.count({l.pid, old_start[l.pid]}) != 0) data->locks.push_back(l);
    }
  }
  for (const LeaseTableConfig& t : target_.leases) {
    bool lost = false;
    data->leases.push_back(CollectLeaseTable(*conn_, t, poll_.max_leases,
                                             options.statement_timeout_ms, options.lock_timeout_ms,
                                             deadline, &lost));
    if (lost) {
      *error = "lease table " + t.table + ": " + data->leases.back().error;
      return false;
    }
  }
  for (const PoolerConfig& p : target_.poolers) {
    data->poolers.push_back(CollectPooler(p, &pooler_conns_[p.name], deadline, &abort_));
  }
  return true;
}

bool Poller::PollOnce() {
  const auto started = SteadyClock::now();
  const auto deadline = started + poll_.timeout;
  auto data = std::make_shared<PollData>();
  std::string error;
  const bool ok = Collect(deadline, data.get(), &error);
  const double duration = std::chrono::duration<double>(SteadyClock::now() - started).count();

  auto snap = std::make_shared<TargetSnapshot>();
  snap->target = target_.name;
  snap->poll_duration = duration;
  if (!ok) {
    if (conn_ && conn_->Broken()) conn_.reset();
    // A statement that failed on a live connection (permissions, a bad catalog read) leaves the
    // session usable; anything else reconnects next time.
    ++poll_errors_;
    LogStateChange(false, error);
    snap->up = false;
    snap->state = "down";
    snap->last_error = error;
    snap->poll_errors = poll_errors_;
    snap->last_success = last_success_;
    snap->counters = counters_;
    Publish(std::move(snap));
    return false;
  }
  LogStateChange(true, "");

  // Optional collectors report on their own; they never fail the poll.
  auto note_collector = [&](const std::string& key, bool ok_now, const std::string& err) {
    std::string& last = collector_state_[key];
    if (!ok_now) {
      counters_.collector_errors[key] += 1;
      if (last != err) spdlog::warn("target {}: {}: {}", target_.name, key, err);
      last = err;
    } else if (!last.empty()) {
      spdlog::info("target {}: {}: ok again", target_.name, key);
      last.clear();
    } else {
      counters_.collector_errors[key] += 0;
    }
  };
  for (const LeaseTableData& t : data->leases) note_collector("lease:" + t.table, t.ok, t.error);
  for (const PoolerData& p : data->poolers) note_collector("pooler:" + p.name, p.ok, p.error);

  std::map<std::string, int64_t> dropped;
  auto view = std::make_shared<TargetView>(Analyze(*data, analyze_options_, &history_, &dropped));
  for (const auto& [metric, n] : dropped)
    counters_.series_dropped[metric] += static_cast<double>(n);
  if (view->hidden_sessions > 0 && !warned_hidden_) {
    spdlog::warn(
        "target {}: {} sessions of other roles are hidden from the exporter's role; grant it "
        "pg_monitor to see their state and timings",
        target_.name, view->hidden_sessions);
    warned_hidden_ = true;
  }
  if (data->inventory) last_inventory_ = data;
  events_.Observe(data, &names_, &counters_);

  // A poll of 100k locks allocates tens of MB that are free again now; give them back so the
  // resident size follows the current poll, not the largest one ever.
  const std::string server_version = data->server_version;
  data.reset();
  malloc_trim(0);
  last_success_ = UnixNow();
  snap->up = true;
  snap->state = "up";
  snap->server_version = server_version;
  snap->poll_errors = poll_errors_;
  snap->last_success = last_success_;
  snap->view = std::move(view);
  snap->counters = counters_;
  Publish(std::move(snap));
  return true;
}

}  // namespace pglock
