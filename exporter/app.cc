#include "exporter/app.h"

#include <spdlog/spdlog.h>

#include "exporter/build_revision.h"
#include "exporter/config/shard.h"

namespace pglock {

#ifndef PGLOCK_VERSION
#define PGLOCK_VERSION "dev"
#endif
ExporterInfo CurrentBuildInfo() { return {PGLOCK_VERSION, kBuildRevision}; }

ExporterInfo InfoOf(const Config& config) {
  ExporterInfo info = CurrentBuildInfo();
  info.shard.ordinal = config.shard.ordinal;
  info.shard.total = config.shard.total;
  for (const TargetConfig& t : config.targets) {
    info.shard.targets.emplace_back(t.name, ShardOf(t.name, config.shard.total));
  }
  return info;
}

namespace {

bool Owned(const Config& config, const TargetConfig& t) {
  return ShardOf(t.name, config.shard.total) == config.shard.ordinal;
}

// "shard 1 of 3 (ordinal from host name pglock-1): polls 4 of 12 targets: a, b, c, d".
void LogShard(const Config& config) {
  if (config.shard.total <= 1) return;
  std::string owned;
  int n = 0;
  for (const TargetConfig& t : config.targets) {
    if (!Owned(config, t)) continue;
    owned += (n++ == 0 ? ": " : ", ") + t.name;
  }
  spdlog::info(
      "shard {} of {}{}: polls {} of {} target(s){}", config.shard.ordinal, config.shard.total,
      config.shard.ordinal_auto ? " (ordinal from host name " + config.shard.host_name + ")"
                                : std::string(),
      n, config.targets.size(), owned);
}

}  // namespace

App::~App() { Stop(); }

Status App::Start(const Config& config) {
  config_ = config;
  LogShard(config);
  {
    MutexLock lock(&mu_);
    for (const TargetConfig& t : config.targets) {
      if (!Owned(config, t)) continue;
      pollers_.push_back(std::make_unique<Poller>(t, config.poll, servers_));
      pollers_.back()->Start();
    }
  }
  return Listen(config, &http_);
}

Status App::Listen(const Config& config, std::unique_ptr<HttpServer>* server) {
  return HttpServer::Start(
      config.web, [this] { return Snapshots(); }, InfoOf(config), server);
}

Status App::Reload(const Config& config) {
  servers_->BeginReload();
  LogShard(config);
  std::vector<std::unique_ptr<Poller>> retired = ReplacePollers(config);
  retired.clear();  // joins outside the lock: scrapes keep being served meanwhile
  servers_->WarnAll();
  return ReloadWeb(config);
}

std::unique_ptr<Poller> App::TakePoller(const TargetConfig& t, const PollConfig& poll) {
  for (auto& p : pollers_) {
    if (!p) continue;
    const TargetConfig old = p->target();
    if (old.name != t.name || old.dsn != t.dsn) continue;
    // Same server: keep the poller, its connection, counters and pglock_up.
    if (!(old == t) || !(p->poll() == poll)) p->Reconfigure(t, poll);
    return std::move(p);
  }
  return nullptr;
}

std::vector<std::unique_ptr<Poller>> App::ReplacePollers(const Config& config) {
  std::vector<std::unique_ptr<Poller>> retired;
  std::vector<std::unique_ptr<Poller>> next;
  std::vector<Poller*> added;
  MutexLock lock(&mu_);
  for (const TargetConfig& t : config.targets) {
    if (!Owned(config, t)) continue;
    std::unique_ptr<Poller> kept = TakePoller(t, config.poll);
    if (!kept) {
      spdlog::info("target {}: (re)configured", t.name);
      kept = std::make_unique<Poller>(t, config.poll, servers_);
      added.push_back(kept.get());
    }
    next.push_back(std::move(kept));
  }
  for (auto& p : pollers_) {
    if (p) {
      const std::string name = p->target().name;
      const bool gone =
          std::none_of(config.targets.begin(), config.targets.end(),
                       [&](const TargetConfig& t) { return t.name == name && Owned(config, t); });
      if (gone) p->ForgetSavedState();  // a replaced poller's successor keeps the file
      spdlog::info("target {}: removed{}", name,
                   gone && config.shard.total > 1 ? " (or moved to another shard)" : "");
      servers_->Retire(p->id());
      retired.push_back(std::move(p));
    }
  }
  // Started once the pollers they replace are retired, so that a new poller is never taken for
  // a second target on its own server.
  for (Poller* p : added) p->Start();
  pollers_ = std::move(next);
  return retired;
}

Status App::ReloadWeb(const Config& config) {
  const auto shard = [](const Config& c) { return InfoOf(c).shard.targets; };
  if (config.web == config_.web && config.shard == config_.shard &&
      (config.shard.total <= 1 || shard(config) == shard(config_))) {
    config_ = config;
    return Status::Ok();
  }
  http_.reset();
  const Status status = Listen(config, &http_);
  if (status.ok()) {
    config_ = config;
    return status;
  }
  spdlog::error("reload: {}; keeping the previous [web] settings", status.message());
  // The previous [web], the new targets and shard.
  Config kept = config;
  kept.web = config_.web;
  const Status again = Listen(kept, &http_);
  config_ = kept;
  if (!again.ok()) {
    // The old address was taken meanwhile: nothing serves /metrics now, which the missing
    // scrape makes visible (PglockTargetDown); say why.
    spdlog::error("reload: cannot listen on the previous address either: {}", again.message());
    return Status::Unavailable(status.message() + "; previous listener lost: " + again.message());
  }
  return status;
}

void App::Stop() {
  http_.reset();
  std::vector<std::unique_ptr<Poller>> pollers;
  {
    MutexLock lock(&mu_);
    pollers = std::move(pollers_);
    pollers_.clear();
  }
  for (auto& p : pollers) p->Stop();
}

std::vector<std::shared_ptr<const TargetSnapshot>> App::Snapshots() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const TargetSnapshot>> out;
  out.reserve(pollers_.size());
  for (const auto& p : pollers_) out.push_back(p->Latest());
  return out;
}

std::vector<int> App::ListeningPorts() const {
  return http_ ? http_->ListeningPorts() : std::vector<int>{};
}

}  // namespace pglock
