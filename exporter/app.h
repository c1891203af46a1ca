// Wiring: the pollers of the configured targets ([shard]: only this shard's) and the HTTP server,
// and config reload (SIGHUP): targets whose config is unchanged keep their poller and its
// counters; added ones start, removed ones stop; a changed [web] or shard status (the [shard]
// table, or a sharded exporter's target list) restarts the listener. Two targets on one PostgreSQL
// server are warned about at start and after each reload (exporter/poll/server_identity.h).
// Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/http/server.h"
#include "exporter/poll/poller.h"
#include "exporter/util/status.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

// The build's version and revision, with a default (unsharded) ShardStatus.
ExporterInfo CurrentBuildInfo();

// The build and config's shard: every configured target with the shard that polls it.
ExporterInfo InfoOf(const Config& config);

class App {
 public:
  App() = default;
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Starts pollers and the HTTP server. Not ok when the listener cannot start.
  Status Start(const Config& config);
  // Applies a validated config. On a listener failure the old listener is kept (and not ok).
  Status Reload(const Config& config);
  void Stop();

  std::vector<std::shared_ptr<const TargetSnapshot>> Snapshots() const EXCLUDES(mu_);
  std::vector<int> ListeningPorts() const;

 private:
  // The pollers of config's targets: kept (reconfigured when changed) for a target on the same
  // server, else new and started. Returns the removed ones, to be joined outside the lock.
  std::vector<std::unique_ptr<Poller>> ReplacePollers(const Config& config) EXCLUDES(mu_);
  // Moves out of pollers_ the poller of t's name and DSN, reconfigured to t and poll; nullptr
  // when there is none.
  std::unique_ptr<Poller> TakePoller(const TargetConfig& t, const PollConfig& poll) REQUIRES(mu_);
  // Restarts the listener when [web] changed and records config as the running one. On a
  // listener failure the previous [web] stays (listening again), and the Status says why.
  Status ReloadWeb(const Config& config);
  // Starts the listener for config's [web] and shard status into *server.
  Status Listen(const Config& config, std::unique_ptr<HttpServer>* server);

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Poller>> pollers_ GUARDED_BY(mu_);
  Config config_;  // only touched by Start/Reload/Stop
  const std::shared_ptr<ServerRegistry> servers_ = std::make_shared<ServerRegistry>();
  std::unique_ptr<HttpServer> http_;
};

}  // namespace pglock
