// pglock_exporter: flags, config, signals. Everything else lives in the pglock library.
#include <malloc.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>

#include "exporter/app.h"
#include "exporter/check_targets.h"
#include "exporter/config/config.h"
#include "exporter/log.h"

namespace {

constexpr int kExitConfig = 2;

std::optional<std::string> EnvDsn() {
  const char* v = std::getenv("PGLOCK_EXPORTER_DSN");  // NOLINT(concurrency-mt-unsafe): no setenv
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

bool Load(const pglock::Flags& flags, pglock::Config* config,
          std::vector<pglock::ConfigError>* errors) {
  return pglock::LoadConfig(flags, EnvDsn(), config, errors);
}

// Handles SIGHUP (reload) until SIGTERM or SIGINT arrives.
void ServeUntilTerminated(const pglock::Flags& flags, const sigset_t& signals, pglock::App* app) {
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) {
      spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
      return;
    }
    if (!flags.config_file) {
      spdlog::info("SIGHUP: no config file to reload");
      continue;
    }
    pglock::Config next;
    std::vector<pglock::ConfigError> reload_errors;
    if (!Load(flags, &next, &reload_errors)) {
      for (const auto& e : reload_errors) spdlog::error("reload: {}", e.ToString());
      spdlog::error("reload: {} error(s); keeping the running configuration", reload_errors.size());
      continue;
    }
    if (app->Reload(next).ok()) spdlog::info("reload: configuration applied");
  }
}

// Prints the flag or config errors to stderr, one a line.
void PrintErrors(const std::vector<pglock::ConfigError>& errors) {
  for (const auto& e : errors) std::cerr << "pglock_exporter: " << e.ToString() << "\n";
}

// Blocks SIGINT, SIGTERM and SIGHUP (handled synchronously by ServeUntilTerminated) and ignores
// SIGPIPE. Every thread started later inherits the mask, so no poller or HTTP thread is
// interrupted.
sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Runs the exporter on a valid config until SIGTERM or SIGINT; the process's exit code.
int Serve(const pglock::Flags& flags, const pglock::Config& config,
          const pglock::ExporterInfo& build) {
  pglock::SetupLogging(config.log.level, config.log.format);
  if (config.world_readable_secret) {
    spdlog::warn(
        "config file {} holds a password and is readable by other users; use dsn_file "
        "with mode 0600, or chmod o-r the file",
        config.file);
  }
  const sigset_t signals = BlockSignals();
  pglock::App app;
  if (const pglock::Status s = app.Start(config); !s.ok()) {
    spdlog::critical("{}", s.message());
    app.Stop();
    return 1;
  }
  spdlog::info("pglock_exporter {} listening on {} ({} target(s)), metrics at {}", build.version,
               config.web.listen_address, config.targets.size(), config.web.telemetry_path);

  ServeUntilTerminated(flags, signals, &app);
  app.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // One malloc arena for every thread. CivetWeb's worker threads would otherwise each keep one
  // with the buffers of their last scrape, which is most of the process's memory. And with two,
  // a restart's history (read on the main thread) sat in one arena while the poller replaced it
  // in the other: the first arena's pages kept a few live objects each, 2.1 MiB more resident
  // than the same history freshly restored after 8 minutes of the soak's traffic, against the
  // same as it with one arena (docs/performance.md). Many targets' pollers share its lock.
  mallopt(M_ARENA_MAX, 1);
  // Memory that follows the load down. By default glibc raises both thresholds below to the
  // largest block freed so far: after a poll of 80k locks, polls of 20k kept the 80k poll's size
  // (free memory at the top of the poller's heap, which malloc_trim does not give back). Fixed
  // instead: a block of 128 KiB or more (a poll's large arrays) is mapped on its own and unmapped
  // when freed, and a heap's free top goes back once it passes 128 KiB; the poller gives back the
  // rest after each poll (Poller::PollOnce). Chosen by measurement against jemalloc (Debian's,
  // with decay) and glibc's defaults: docs/performance.md, tests/bench/memory_drop.sh.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  std::vector<std::string> args(argv + 1, argv + argc);
  pglock::Flags flags;
  std::vector<pglock::ConfigError> errors;
  if (!pglock::ParseFlags(args, &flags, &errors)) {
    PrintErrors(errors);
    std::cerr << "Run pglock_exporter --help for usage.\n";
    return kExitConfig;
  }
  if (flags.help) {
    std::cout << pglock::FlagsUsage();
    return 0;
  }
  const pglock::ExporterInfo build = pglock::CurrentBuildInfo();
  if (flags.version) {
    std::cout << "pglock_exporter " << build.version << " (revision " << build.revision << ")\n";
    return 0;
  }
  pglock::Config config;
  if (!Load(flags, &config, &errors)) {
    PrintErrors(errors);
    std::cerr << "pglock_exporter: " << errors.size() << " configuration error(s)\n";
    return kExitConfig;
  }
  if (flags.check_config) {
    std::cout << "pglock_exporter: configuration OK (" << config.targets.size() << " target(s))\n";
    return 0;
  }
  if (flags.check_targets) return pglock::CheckTargets(config, std::cout);
  return Serve(flags, config, build);
}
