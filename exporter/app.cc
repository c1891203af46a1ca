#include "exporter/app.h"

#include <spdlog/spdlog.h>

#include "exporter/build_revision.h"

namespace pglock {

#ifndef PGLOCK_VERSION
#define PGLOCK_VERSION "dev"
#endif
BuildInfo CurrentBuildInfo() { return {PGLOCK_VERSION, kBuildRevision}; }

App::~App() { Stop(); }

bool App::Start(const Config& config, std::string* error) {
  config_ = config;
  {
    MutexLock lock(&mu_);
    for (const TargetConfig& t : config.targets) {
      pollers_.push_back(std::make_unique<Poller>(t, config.poll, servers_));
      pollers_.back()->Start();
    }
  }
  http_ = HttpServer::Start(
      config.web, [this] { return Snapshots(); }, CurrentBuildInfo(), error);
  return http_ != nullptr;
}

bool App::Reload(const Config& config, std::string* error) {
  servers_->BeginReload();
  std::vector<std::unique_ptr<Poller>> retired = ReplacePollers(config);
  retired.clear();  // joins outside the lock: scrapes keep being served meanwhile
  servers_->WarnAll();
  return ReloadWeb(config, error);
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
      const bool gone = std::none_of(config.targets.begin(), config.targets.end(),
                                     [&](const TargetConfig& t) { return t.name == name; });
      if (gone) p->ForgetSavedState();  // a replaced poller's successor keeps the file
      spdlog::info("target {}: removed", name);
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

bool App::ReloadWeb(const Config& config, std::string* error) {
  if (config.web == config_.web) {
    config_ = config;
    return true;
  }
  http_.reset();
  http_ = HttpServer::Start(
      config.web, [this] { return Snapshots(); }, CurrentBuildInfo(), error);
  if (http_) {
    config_ = config;
    return true;
  }
  spdlog::error("reload: {}; keeping the previous [web] settings", *error);
  std::string again;
  http_ = HttpServer::Start(
      config_.web, [this] { return Snapshots(); }, CurrentBuildInfo(), &again);
  if (!http_) {
    // The old address was taken meanwhile: nothing serves /metrics now, which the missing
    // scrape makes visible (PglockTargetDown); say why.
    spdlog::error("reload: cannot listen on the previous address either: {}", again);
    *error += "; previous listener lost: " + again;
  }
  Config kept = config;
  kept.web = config_.web;
  config_ = kept;
  return false;
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
