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
  std::vector<std::unique_ptr<Poller>> retired;
  servers_->BeginReload();
  {
    std::vector<std::unique_ptr<Poller>> next;
    std::vector<Poller*> added;
    MutexLock lock(&mu_);
    for (const TargetConfig& t : config.targets) {
      std::unique_ptr<Poller> kept;
      for (auto& p : pollers_) {
        if (!p) continue;
        const TargetConfig old = p->target();
        if (old.name != t.name || old.dsn != t.dsn) continue;
        // Same server: keep the poller, its connection, counters and pglock_up.
        if (!(old == t) || !(p->poll() == config.poll)) p->Reconfigure(t, config.poll);
        kept = std::move(p);
        break;
      }
      if (!kept) {
        spdlog::info("target {}: (re)configured", t.name);
        kept = std::make_unique<Poller>(t, config.poll, servers_);
        added.push_back(kept.get());
      }
      next.push_back(std::move(kept));
    }
    for (auto& p : pollers_) {
      if (p) {
        spdlog::info("target {}: removed", p->target().name);
        servers_->Retire(p->id());
        retired.push_back(std::move(p));
      }
    }
    // Started once the pollers they replace are retired, so that a new poller is never taken for
    // a second target on its own server.
    for (Poller* p : added) p->Start();
    pollers_ = std::move(next);
  }
  retired.clear();  // joins outside the lock: scrapes keep being served meanwhile
  servers_->WarnAll();

  bool ok = true;
  if (!(config.web == config_.web)) {
    http_.reset();
    http_ = HttpServer::Start(
        config.web, [this] { return Snapshots(); }, CurrentBuildInfo(), error);
    if (!http_) {
      ok = false;
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
      return ok;
    }
  }
  config_ = config;
  return ok;
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
