#include "exporter/serverlog/server_log.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "exporter/metrics/families.h"

namespace pglock {
namespace {

using prometheus::MetricType;

// One SQL read of the log (list or read a range) gives up after this long.
constexpr std::chrono::milliseconds kSqlReadTimeout{5000};

const MetricDesc kLogUp{"pglock_server_log_up",
                        MetricType::Gauge,
                        "1 if the server's log ([targets.server_log]) was read without error at "
                        "the last read, else 0.",
                        {"target"}};
const MetricDesc kLogRecords{"pglock_server_log_records_total",
                             MetricType::Counter,
                             "Records read from the server's log.",
                             {"target"}};
const MetricDesc kLogUnparsed{
    "pglock_server_log_unparsed_total",
    MetricType::Counter,
    "Records of the server's log skipped: malformed, longer than max_record_bytes, or of an "
    "unknown shape.",
    {"target"}};
const MetricDesc kLogUntranslated{
    "pglock_server_log_untranslated",
    MetricType::Gauge,
    "1 if the server's lc_messages is not English: its lock-wait lines cannot be read (session "
    "ends are still read by SQLSTATE).",
    {"target"}};

const MetricDesc kLogDropped{
    "pglock_server_log_dropped_total",
    MetricType::Counter,
    "Lock records of the server's log (waits, lock timeouts, deadlocks) dropped: more than "
    "10000 arrived between two polls.",
    {"target"}};
const MetricDesc kLoggedWaits{
    "pglock_logged_lock_waits_total",
    MetricType::Counter,
    "Lock waits that outlasted deadlock_timeout, from the server log's log_lock_waits lines "
    "(each wait once, whether or not a poll saw it). lock: the configured name of an advisory "
    "key, unnamed for other advisory keys, empty for other lock types.",
    {"target", "datname", "locktype", "lock"}};
const MetricDesc kLoggedWaitSeconds{
    "pglock_logged_lock_wait_seconds",
    MetricType::Histogram,
    "How long logged lock waits lasted until the lock was acquired (the log's \"acquired ... "
    "after\" line).",
    {"target", "locktype"}};
const MetricDesc kLockTimeouts{
    "pglock_lock_timeouts_total",
    MetricType::Counter,
    "Statements that gave up on a lock (SQLSTATE 55P03: lock_timeout, a failed NOWAIT), from "
    "the server log; usename: the first top_n roles, the rest other.",
    {"target", "datname", "usename"}};

}  // namespace

bool EnglishMessages(const std::string& lc_messages) {
  return lc_messages.empty() || lc_messages == "C" || lc_messages.rfind("C.", 0) == 0 ||
         lc_messages == "POSIX" || lc_messages.rfind("en_", 0) == 0 || lc_messages == "en" ||
         lc_messages.rfind("en.", 0) == 0;
}

ServerLog::ServerLog(std::string target, ServerLogConfig config, std::string dsn)
    : target_(std::move(target)),
      config_(std::move(config)),
      dsn_(std::move(dsn)),
      format_(config_.format == "csvlog" ? LogFormat::kCsvlog : LogFormat::kJsonlog) {
  auto initial = std::make_shared<ServerLogStatus>();
  initial->source = config_.via == ServerLogConfig::Via::kSql ? "sql" : config_.path;
  initial->format = config_.format;
  initial->error = "not read yet";
  MutexLock lock(&mu_);
  status_ = std::move(initial);
}

ServerLog::~ServerLog() { Stop(); }

void ServerLog::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ServerLog::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  abort_.store(true);
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<HoldEnd> ServerLog::EndOf(const SessionId& session) const {
  const std::optional<LoggedEnd> end = facts_.Find(session.first, session.second);
  if (!end) return std::nullopt;
  return end->end;
}

void ServerLog::NoteLanguage(const std::string& lc_messages) {
  MutexLock lock(&mu_);
  lc_messages_ = lc_messages;
}

void ServerLog::ResumeAt(LogPosition at, double records_taken_until) {
  MutexLock lock(&mu_);
  resume_ = std::move(at);
  records_taken_until_ = records_taken_until;
  // The gap's records are there to read: the first judgement after a restart waits for them
  // (readable()) rather than take the counters' word before the first read.
  up_.store(true);
}

std::optional<LogPosition> ServerLog::Position() const {
  MutexLock lock(&mu_);
  return position_;
}

std::vector<LockRecord> ServerLog::TakeLockRecords() {
  MutexLock lock(&mu_);
  std::vector<LockRecord> out;
  out.swap(lock_records_);
  return out;
}

std::shared_ptr<const ServerLogStatus> ServerLog::Status() const {
  MutexLock lock(&mu_);
  return status_;
}

std::unique_ptr<LogSource> ServerLog::MakeSource() const {
  if (config_.via == ServerLogConfig::Via::kSql) {
    return MakeSqlLogSource(dsn_, format_, kSqlReadTimeout, &abort_);
  }
  return MakeFileLogSource(config_.path, format_);
}

void ServerLog::Run() {
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    ReadOnce();
    MutexLock lock(&mu_);
    const auto wake = started + config_.read_interval;
    while (!stop_ && std::chrono::steady_clock::now() < wake) cv_.wait_until(mu_, wake);
    if (stop_) return;
  }
}

void ServerLog::ReadOnce() {
  if (!follower_) {
    LogFollowerOptions options;
    options.max_record_bytes = static_cast<size_t>(config_.max_record_bytes);
    follower_ = std::make_unique<LogFollower>(MakeSource(), format_, options);
    MutexLock lock(&mu_);
    if (resume_) follower_->ResumeAt(std::move(*resume_));
    resume_.reset();
    taken_until_ = records_taken_until_;
  }
  std::vector<LockRecord> locks;
  bool translated = false;
  double dropped = 0;
  const pglock::Status s = follower_->Poll([&](const LogRecord& r) {
    facts_.Add(r);
    if (std::optional<LockRecord> l = ClassifyLockRecord(r); l && l->time > taken_until_) {
      // Bounded whatever the log does: a burst beyond what waits for the poller is counted.
      if (locks.size() < kMaxQueuedLockRecords) {
        locks.push_back(std::move(*l));
      } else {
        ++dropped;
      }
    } else if (!translated && LooksLikeTranslatedLockWait(r)) {
      translated = true;
    }
  });
  const bool ok = s.ok();
  up_.store(ok);
  // Only a read that reached the end of the log shows every end written before it started.
  if (ok && follower_->caught_up()) reads_through_.fetch_add(1);
  if (!follower_->resume_outcome().empty() && !resume_logged_) {
    spdlog::info("target {}: server log: {}", target_, follower_->resume_outcome());
    resume_logged_ = true;
  }
  const std::string error = ok ? "" : s.message();
  if (error != last_error_) {
    if (!ok) {
      spdlog::error("target {}: server log: {}", target_, error);
    } else {
      spdlog::info("target {}: server log: reading {}", target_, follower_->current_file());
    }
    last_error_ = error;
  }
  auto status = std::make_shared<ServerLogStatus>();
  const LogFollowerStats stats = follower_->stats();
  status->up = ok;
  status->records = static_cast<double>(stats.records);
  status->unparsed = static_cast<double>(stats.unparsed);
  status->error = error;
  status->source = config_.via == ServerLogConfig::Via::kSql ? "sql" : config_.path;
  status->format = config_.format;
  status->file = follower_->current_file();
  MutexLock lock(&mu_);
  position_ = follower_->position();
  const size_t room = kMaxQueuedLockRecords - std::min(kMaxQueuedLockRecords, lock_records_.size());
  dropped_ += dropped + static_cast<double>(locks.size() - std::min(room, locks.size()));
  if (locks.size() > room) locks.resize(room);
  std::move(locks.begin(), locks.end(), std::back_inserter(lock_records_));
  translated_waits_ = translated_waits_ || translated;
  status->dropped = dropped_;
  status->untranslated = translated_waits_ || !EnglishMessages(lc_messages_);
  status_ = std::move(status);
}

void ExposeServerLog(const TargetSnapshot& t, Families* out) {
  const ServerLogStatus& status = *t.server_log;
  out->Add(kLogUp, {t.target}, status.up ? 1 : 0);
  out->Add(kLogRecords, {t.target}, status.records);
  out->Add(kLogUnparsed, {t.target}, status.unparsed);
  out->Add(kLogDropped, {t.target}, status.dropped);
  out->Add(kLogUntranslated, {t.target}, status.untranslated ? 1 : 0);
  // Series appear with the first record that counts in them: a log without waits adds none.
  for (const auto& [key, n] : t.counters->logged_lock_waits) {
    const auto& [db, locktype, lock] = key;
    out->Add(kLoggedWaits, {t.target, db, locktype, lock}, n);
  }
  for (const auto& [locktype, h] : t.counters->logged_wait_seconds) {
    out->AddHistogram(kLoggedWaitSeconds, {t.target, locktype}, h.bounds, h.counts, h.sum, h.count);
  }
  for (const auto& [key, n] : t.counters->lock_timeouts) {
    out->Add(kLockTimeouts, {t.target, std::get<0>(key), std::get<1>(key)}, n);
  }
}

}  // namespace pglock
