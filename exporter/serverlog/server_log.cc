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
  }
  const pglock::Status s = follower_->Poll([this](const LogRecord& r) { facts_.Add(r); });
  const bool ok = s.ok();
  up_.store(ok);
  // Only a read that reached the end of the log shows every end written before it started.
  if (ok && follower_->caught_up()) reads_through_.fetch_add(1);
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
  status->untranslated = !EnglishMessages(lc_messages_);
  status_ = std::move(status);
}

void ExposeServerLog(const std::string& target, const ServerLogStatus& status, Families* out) {
  out->Add(kLogUp, {target}, status.up ? 1 : 0);
  out->Add(kLogRecords, {target}, status.records);
  out->Add(kLogUnparsed, {target}, status.unparsed);
  out->Add(kLogUntranslated, {target}, status.untranslated ? 1 : 0);
}

}  // namespace pglock
