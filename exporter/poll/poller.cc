#include "exporter/poll/poller.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>

#include "exporter/collectors/lock_table.h"
#include "exporter/collectors/registry.h"
#include "exporter/events/judge.h"
#include "exporter/log.h"
#include "exporter/pg/conninfo.h"
#include "exporter/pg/session.h"
#include "exporter/util/backoff.h"

namespace pglock {
namespace {

std::atomic<uint64_t> next_poller_id{1};

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

}  // namespace

Poller::Poller(TargetConfig target, PollConfig poll, std::shared_ptr<ServerRegistry> servers)
    : target_(std::move(target)),
      poll_(poll),
      masked_dsn_(MaskConninfo(target_.dsn)),
      id_(next_poller_id.fetch_add(1)),
      servers_(std::move(servers)),
      event_log_(static_cast<size_t>(poll_.event_log_size)),
      inventory_(poll_.inventory_interval),
      events_(std::chrono::duration<double>(poll_.takeover_window).count()) {
  BuildAnalyzeOptions();
  LoadState();
  StartServerLog();
  for (const Collector* c : Collectors()) collector_states_.push_back(c->NewState());
  auto initial = std::make_shared<TargetSnapshot>();
  initial->target = target_.name;
  initial->state = "connecting";
  initial->events = event_log_.Contents();
  initial->timeline = timeline_;
  MutexLock lock(&mu_);
  latest_ = std::move(initial);
  configured_target_ = target_;
  configured_poll_ = poll_;
}

void Poller::BuildAnalyzeOptions() {
  analyze_options_ = AnalyzeOptions{};
  analyze_options_.top_n = poll_.top_n;
  analyze_options_.names = &names_;
  analyze_options_.pooled = &events_.pooled();
  analyze_options_.detected_queues = &events_.detected_queues();
  for (const LeaseTableConfig& t : target_.leases) {
    LeaseTableRules rules;
    rules.table = t.label();
    rules.holder_labels = t.holder_labels;
    rules.max_hold = std::chrono::duration<double>(t.max_hold).count();
    if (!t.holder_pattern.empty()) {
      rules.matcher = std::make_shared<const HolderMatcher>(t.holder_pattern);
    }
    analyze_options_.lease_rules.push_back(std::move(rules));
  }
}

void Poller::StartServerLog() {
  if (server_log_) server_log_->Stop();
  server_log_.reset();
  if (target_.server_log.configured()) {
    server_log_ = std::make_shared<ServerLog>(target_.name, target_.server_log, target_.dsn);
    // After a restart, the reader first reads what the log got while the exporter was down.
    if (saved_ && saved_->log) {
      server_log_->ResumeAt(saved_->log->at, saved_->log->records_taken_until);
    }
    server_log_->Start();
  }
  events_.set_log(server_log_);
  episodes_.set_log(server_log_);
}

TargetConfig Poller::target() const {
  MutexLock lock(&mu_);
  return configured_target_;
}

PollConfig Poller::poll() const {
  MutexLock lock(&mu_);
  return configured_poll_;
}

void Poller::Reconfigure(TargetConfig target, PollConfig poll) {
  MutexLock lock(&mu_);
  configured_target_ = std::move(target);
  configured_poll_ = poll;
  reconfigure_pending_ = true;
}

void Poller::ApplyPendingConfig() {
  TargetConfig next;
  {
    MutexLock lock(&mu_);
    if (!reconfigure_pending_) return;
    reconfigure_pending_ = false;
    next = configured_target_;
    poll_ = configured_poll_;
  }
  names_stale_ = names_stale_ || !(next.locks == target_.locks);
  const bool log_changed =
      !(next.server_log == target_.server_log) ||
      (next.server_log.via == ServerLogConfig::Via::kSql && next.dsn != target_.dsn);
  // Counters of lease tables and poolers that are no longer configured go; the rest carry on.
  std::set<std::string> keep;
  for (const LeaseTableConfig& t : next.leases) keep.insert("lease:" + t.label());
  for (const PoolerConfig& p : next.poolers) keep.insert("pooler:" + p.name);
  std::erase_if(counters_.collector_errors,
                [&](const auto& e) { return keep.count(e.first) == 0; });
  std::erase_if(counters_.lease_transitions,
                [&](const auto& e) { return keep.count("lease:" + std::get<0>(e.first)) == 0; });
  if (!(next.poolers == target_.poolers)) {
    // A pooler's admin DSN may have changed: its admin connection is opened afresh.
    for (size_t i = 0; i < collector_states_.size(); ++i) {
      collector_states_[i] = Collectors()[i]->NewState();
    }
  }
  target_ = std::move(next);
  if (log_changed) StartServerLog();
  inventory_.set_interval(poll_.inventory_interval);
  events_.set_takeover_window(std::chrono::duration<double>(poll_.takeover_window).count());
  BuildAnalyzeOptions();
  spdlog::info("target {}: settings reloaded; connection and counters kept", target_.name);
}

Poller::~Poller() { Stop(); }

void Poller::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Poller::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  abort_.store(true);
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  RefusePreflights("the exporter is stopping");
  SaveState(/*final=*/true);
  if (server_log_) server_log_->Stop();
  conn_.reset();
  collector_states_.clear();
}

std::shared_ptr<const TargetSnapshot> Poller::Latest() const {
  MutexLock lock(&mu_);
  return latest_;
}

void Poller::Publish(std::shared_ptr<const TargetSnapshot> snapshot) {
  MutexLock lock(&mu_);
  latest_ = std::move(snapshot);
}

void Poller::Run() {
  for (;;) {
    const auto started = SteadyClock::now();
    const bool ok = PollOnce();
    consecutive_failures_ = ok ? 0 : consecutive_failures_ + 1;
    const auto delay = std::chrono::duration_cast<SteadyClock::duration>(SpreadRetryDelay(
        consecutive_failures_, poll_.interval, std::uniform_real_distribution<double>()(jitter_)));
    MutexLock lock(&mu_);
    const auto wake = started + delay;
    while (!stop_ && SteadyClock::now() < wake) cv_.wait_until(mu_, wake);
    if (stop_) return;
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

void Poller::RecordEvents(std::vector<Event> events) {
  timeline_->AddMarkers(events);  // one marker per lock, before they are coalesced
  CoalesceEvents(&events);        // one incident, one event (and one log line)
  for (Event& e : events) {
    e.target = target_.name;
    StampGap(&e);
    LogStructured("event", EventText(e), "event", EventJson(e));
  }
  event_log_.Append(std::move(events));
}

Status Poller::ResolveNames(PgConnection& conn, SteadyClock::time_point deadline) {
  std::vector<std::string> problems;
  if (Status s = ResolveLockNames(conn, target_.locks, QueryTimeouts::ForPoll(poll_.timeout),
                                  deadline, &names_, &problems);
      !s.ok()) {
    return s;
  }
  for (const std::string& p : problems) {
    if (logged_lock_problems_.insert(p).second) spdlog::error("target {}: {}", target_.name, p);
  }
  names_stale_ = false;
  return Status::Ok();
}

Status Poller::EnsureConnected(SteadyClock::time_point deadline) {
  if (conn_ && !conn_->Broken())
    return names_stale_ ? ResolveNames(*conn_, deadline) : Status::Ok();
  conn_.reset();
  settings_read_.reset();  // a new session reads the settings again
  relation_names_.Forget();
  std::unique_ptr<PgConnection> conn;
  if (Status s = OpenSession(target_.dsn, "", deadline, &abort_, &conn); !s.ok()) return s;
  std::vector<PreparedStatement> prepared;
  for (const Collector* c : Collectors()) {
    for (PreparedStatement& p : c->Prepared(conn->ServerVersionNum())) {
      prepared.push_back(std::move(p));
    }
  }
  if (Status s = PrepareStatements(*conn, prepared, deadline); !s.ok()) return s;
  if (Status s = ResolveNames(*conn, deadline); !s.ok()) return s;
  if (servers_ || !poll_.storage_path.empty()) {
    ServerIdentity identity;
    if (Status s =
            ReadServerIdentity(*conn, QueryTimeouts::ForPoll(poll_.timeout), deadline, &identity);
        !s.ok()) {
      return s;
    }
    if (servers_) servers_->Report(id_, target_.name, identity);
    server_key_ = identity.server;
  }
  conn_ = std::move(conn);
  return Status::Ok();
}

Status Poller::Collect(SteadyClock::time_point started, SteadyClock::time_point* deadline,
                       PollData* data, std::vector<CollectorStatus>* statuses) {
  if (!conn_ || conn_->Broken()) {
    // A new session's setup has a budget of its own (util/backoff.h), and the poll's statements
    // the whole timeout after it.
    const auto setup_deadline =
        started + std::chrono::duration_cast<SteadyClock::duration>(
                      SessionSetupTimeout(consecutive_failures_, poll_.timeout, poll_.interval));
    if (Status s = EnsureConnected(setup_deadline); !s.ok()) return s;
    *deadline = std::max(*deadline, SteadyClock::now() + poll_.timeout);
  } else if (Status s = EnsureConnected(*deadline); !s.ok()) {
    return s;
  }
  const auto& collectors = Collectors();
  PollPlan plan;
  plan.server_version_num = conn_->ServerVersionNum();
  plan.inventory = inventory_.Due(SteadyClock::now());
  if (plan.inventory) plan.quiet_baseline = inventory_.QuietBaseline();
  plan.query_text = poll_.query_text;
  plan.settings_read = settings_read_ ? &*settings_read_ : nullptr;
  for (const LeaseTableConfig& t : target_.leases) plan.row_locks = plan.row_locks || t.row_lock;
  const QueryTimeouts timeouts = QueryTimeouts::ForPoll(poll_.timeout);
  StatementBatch batch;
  for (const Collector* c : collectors) c->Plan(plan, &batch);
  BatchResults results;
  if (Status s = batch.Run(*conn_, timeouts, *deadline, &results); !s.ok()) return s;

  statuses->clear();
  for (const Collector* c : collectors) {
    const auto started = SteadyClock::now();
    if (Status s = c->Parse(plan, results, data); !s.ok()) return s;
    statuses->push_back({c->name(), true, SecondsSince(started)});
  }
  if (data->quiet_mismatch) {
    ++quiet_fallbacks_;
    spdlog::debug(
        "target {}: a quiet holder's locks changed between the poll's snapshot of the sessions "
        "and its read of pg_locks: the holders are the last inventory's, the next poll reads all",
        target_.name);
  }
  const PollContext ctx{conn_.get(), &target_, &poll_, timeouts, *deadline, &abort_};
  for (size_t i = 0; i < collectors.size(); ++i) {
    const auto started = SteadyClock::now();
    if (Status s = collectors[i]->Collect(ctx, collector_states_[i].get(), data); !s.ok()) {
      return s;
    }
    (*statuses)[i].seconds += SecondsSince(started);
    (*statuses)[i].up = collectors[i]->Healthy(*data);
  }
  return Status::Ok();
}

void Poller::CountCollectorErrors(const PollData& data) {
  // Optional collectors report on their own; they never fail the poll.
  auto note = [&](const std::string& key, bool ok_now, const std::string& err) {
    std::string& last = collector_last_error_[key];
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
  for (const LeaseTableData& t : data.leases) note("lease:" + t.table, t.ok, t.error);
  for (const PoolerData& p : data.poolers) note("pooler:" + p.name, p.ok, p.error);
}

std::optional<std::vector<DatabaseStats>> Poller::ReadSessionEndCounters(
    SteadyClock::time_point deadline) {
  if (!conn_ || SteadyClock::now() >= deadline) return std::nullopt;
  const Collector& counters = SessionEndCountersCollector();
  PollPlan plan;
  plan.server_version_num = conn_->ServerVersionNum();
  plan.inventory = false;
  StatementBatch batch;
  counters.Plan(plan, &batch);
  if (batch.empty()) return std::nullopt;
  BatchResults results;
  const Status s = batch.Run(*conn_, QueryTimeouts::ForPoll(poll_.timeout), deadline, &results);
  PollData data;
  if (!s.ok() || !counters.Parse(plan, results, &data).ok()) {
    // The next poll reconnects when the connection broke, and reports why.
    spdlog::debug("target {}: reading the session end counters again: {}", target_.name,
                  s.message());
    return std::nullopt;
  }
  return data.database_stats;
}

void Poller::PublishFailure(const Status& status, std::shared_ptr<TargetSnapshot> snap) {
  // A statement that failed on a live connection (permissions, a bad catalog read) leaves the
  // session usable; anything else reconnects next time, and so does a session that lost its
  // prepared statements (a new connection prepares them again).
  if (conn_ && (conn_->Broken() || status.sqlstate() == kUnknownPreparedStatement)) conn_.reset();
  ++poll_errors_;
  LogStateChange(false, status.message());
  snap->up = false;
  snap->state = "down";
  snap->last_error = status.message();
  snap->poll_errors = poll_errors_;
  snap->quiet_fallbacks = quiet_fallbacks_;
  snap->last_success = last_success_;
  for (const Collector* c : Collectors()) snap->collectors.push_back({c->name(), false, 0});
  snap->counters = PublishedCounters();
  snap->events = event_log_.Contents();
  snap->timeline = timeline_;
  snap->preflight = preflight_;
  if (server_log_) snap->server_log = server_log_->Status();
  Publish(std::move(snap));
  RefusePreflights("the poll failed: " + status.message());
}

std::shared_ptr<const LockTableView> Poller::LockTableWhenFull(SteadyClock::time_point deadline) {
  if (conn_ && !conn_->Broken()) {
    auto fresh = std::make_shared<LockTableView>();
    const Status s = ReadFullLockTable(*conn_, QueryTimeouts::ForPoll(poll_.timeout), deadline,
                                       static_cast<size_t>(std::max(poll_.top_n, 1)),
                                       last_lock_table_.get(), fresh.get());
    if (s.ok()) return fresh;
    spdlog::debug("target {}: reading the full lock table: {}", target_.name, s.message());
  }
  if (!last_lock_table_) return nullptr;
  auto kept = std::make_shared<LockTableView>(*last_lock_table_);
  kept->age += SecondsSince(last_lock_table_at_);
  return kept;
}

std::string Poller::NoteRole(const PollData& data) {
  const std::string role = data.in_recovery ? "standby" : "primary";
  if (!role_.empty() && role != role_) {
    // Not a restart: pg_postmaster_start_time() stays, and so do the sessions and their locks.
    spdlog::warn("target {}: {}: {} -> {}", target_.name,
                 role == "primary" ? "promoted" : "role changed", role_, role);
  }
  role_ = role;
  return role;
}

bool Poller::PollOnce() {
  ApplyPendingConfig();
  // A request submitted just after this poll took the desk's is answered by the next one.
  preflight_->SetAnswerWithin(
      std::chrono::duration<double>(poll_.interval + 2 * poll_.timeout).count() + 1);
  const auto started = SteadyClock::now();
  auto deadline = started + poll_.timeout;  // later for a poll that opens a session
  // Where the log reader is before this poll reads the server: a restart resumes there, so the
  // ends of sessions this poll sees alive are read again (lock records were taken: not again).
  const std::optional<LogPosition> log_position =
      server_log_ ? server_log_->Position() : std::nullopt;
  auto data = std::make_shared<PollData>();
  std::vector<CollectorStatus> statuses;
  const Status status = Collect(started, &deadline, data.get(), &statuses);

  auto snap = std::make_shared<TargetSnapshot>();
  snap->target = target_.name;
  snap->poll_duration = SecondsSince(started);
  if (!status.ok()) {
    // A full lock table fails the poll, yet is the incident itself: its figures stay visible.
    snap->lock_table_full = LockTableFull(status);
    if (snap->lock_table_full) snap->lock_table = LockTableWhenFull(deadline);
    PublishFailure(status, std::move(snap));
    return false;
  }
  LogStateChange(true, "");
  ApplySavedState(*data);
  if (log_position) log_position_ = log_position;
  std::string role = NoteRole(*data);
  if (server_log_) server_log_->NoteLanguage(data->lc_messages);
  CountCollectorErrors(*data);

  // Events first: the view shows the pooled-lock state this poll leads to.
  std::vector<Event> events;
  JudgePoll(
      started, &data, &inventory_, &events_, &names_,
      [&] {
        return CountersReadAgain{ReadSessionEndCounters(deadline), SecondsSince(started)};
      },
      &counters_, &events);
  if (server_log_) {
    std::vector<LockRecord> records = server_log_->TakeLockRecords();
    records_taken_until_ = UnixNow();
    if (Status s = conn_ ? relation_names_.Name(*conn_, QueryTimeouts::ForPoll(poll_.timeout),
                                                deadline, &records)
                         : Status::Ok();
        !s.ok()) {
      // Those records keep the log's OIDs; the next poll reconnects if the connection broke.
      spdlog::debug("target {}: naming the logged locks' relations: {}", target_.name, s.message());
    }
    JudgeLoggedLocks(*data, records, &names_, poll_.top_n, poll_.query_text, &logged_locks_,
                     &counters_, &events);
  }
  RecordEvents(std::move(events));
  gap_leases_ = false;  // the reads on either side of a restart's gap are judged
  auto view = BuildView(*data, &statuses);
  // Before the timeline observes the poll (as the poll's other events) and before the snapshot
  // takes the event log and counters.
  JudgeEpisodes(*data, *view);
  timeline_->Observe(*data, *view, &names_);
  AnswerPreflights(*data, *view);

  std::string server_version = data->server_version;
  settings_read_ = SettingsRead{data->settings, data->settings_loaded_us};
  data.reset();
  PublishSuccess(std::move(snap), std::move(view), std::move(role), std::move(server_version),
                 std::move(statuses));
  SaveState(/*final=*/false);
  // What the poll allocated is free again now, the previous snapshot's share included. Blocks of
  // 128 KiB and more were mapped apart and went back whole (main.cc); give back the free pages
  // among the small ones too. Given back only after a poll that needed less than half of the
  // one before (as before), the pages freed by 80k locks stayed scattered between the small
  // blocks that later polls kept: 1.2x the steady size for good, against 1.0x this way, for a
  // few hundred page faults a poll (docs/performance.md). At most once every 10 s for the whole
  // process: malloc_trim walks every free block of the arenas under their locks (with many
  // targets a trim per poll would stall the others and the scrapes), its cost grows with the
  // heap's fragmentation (a soak's hour of history: 3% of the exporter's CPU, and the page
  // faults after it more), and the pages it gives back a 1 s poll takes again.
  static std::atomic<int64_t> last_trim_ms{0};
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  int64_t last = last_trim_ms.load(std::memory_order_relaxed);
  if (now_ms - last >= 10000 &&
      last_trim_ms.compare_exchange_strong(last, now_ms, std::memory_order_relaxed)) {
    malloc_trim(0);
  }
  return true;
}

std::shared_ptr<const Counters> Poller::PublishedCounters() {
  if (!published_counters_ || *published_counters_ != counters_) {
    published_counters_ = std::make_shared<const Counters>(counters_);
  }
  return published_counters_;
}

std::shared_ptr<TargetView> Poller::BuildView(const PollData& data,
                                              std::vector<CollectorStatus>* statuses) {
  std::map<std::string, int64_t> dropped;
  std::vector<double> build_seconds;
  auto view = std::make_shared<TargetView>(
      Analyze(data, analyze_options_, &history_, &dropped, &build_seconds));
  for (size_t i = 0; i < statuses->size() && i < build_seconds.size(); ++i) {
    (*statuses)[i].seconds += build_seconds[i];
  }
  for (const auto& [metric, n] : dropped)
    counters_.series_dropped[metric] += static_cast<double>(n);
  if (view->hidden_sessions > 0 && !warned_hidden_) {
    spdlog::warn(
        "target {}: {} sessions of other roles are hidden from the exporter's role; grant it "
        "pg_monitor to see their state and timings",
        target_.name, view->hidden_sessions);
    warned_hidden_ = true;
  }
  return view;
}

void Poller::JudgeEpisodes(const PollData& data, const TargetView& view) {
  std::vector<Event> blocking;
  JudgeBlocking(data, view, &episodes_, &counters_, &blocking);
  RecordEvents(std::move(blocking));
}

void Poller::PublishSuccess(std::shared_ptr<TargetSnapshot> snap, std::shared_ptr<TargetView> view,
                            std::string role, std::string server_version,
                            std::vector<CollectorStatus> statuses) {
  last_success_ = UnixNow();
  snap->up = true;
  snap->state = "up";
  snap->server_version = std::move(server_version);
  snap->role = std::move(role);
  snap->poll_errors = poll_errors_;
  snap->quiet_fallbacks = quiet_fallbacks_;
  snap->last_success = last_success_;
  last_lock_table_ = std::make_shared<const LockTableView>(view->lock_table);
  last_lock_table_at_ = SteadyClock::now();
  snap->lock_table = last_lock_table_;
  snap->view = std::move(view);
  snap->collectors = std::move(statuses);
  snap->counters = PublishedCounters();
  snap->events = event_log_.Contents();
  snap->timeline = timeline_;
  snap->preflight = preflight_;
  if (server_log_) snap->server_log = server_log_->Status();
  Publish(std::move(snap));
}

}  // namespace pglock
