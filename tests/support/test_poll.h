// The poll config the integration tests run a Poller with: the packaged defaults (PollConfig{},
// as packaging/config.toml leaves them) but a poll every second, unless a test needs otherwise;
// and a target parsed from the TOML a test (or a README recipe) writes. Pure; thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exporter/config/config.h"

namespace pglock::testing {

struct TestPollOptions {
  int interval_ms = 1000;
  int timeout_ms = 3000;  // a loaded shared machine may need more; nothing that waits on purpose
  int top_n = 20;
  bool query_text = false;
};

inline PollConfig TestPoll(const TestPollOptions& o = {}) {
  PollConfig p;
  p.interval = Duration(o.interval_ms);
  p.timeout = Duration(o.timeout_ms);
  p.top_n = o.top_n;
  p.query_text = o.query_text;
  return p;
}

// The one target of `toml` (a [[targets]] body after its name and dsn: [[targets.locks]],
// [[targets.leases]] ...), parsed as config.toml would be; a config error fails the calling test.
inline TargetConfig TestTarget(const std::string& dsn, const std::string& toml) {
  const std::string text = "[[targets]]\nname = \"it\"\ndsn = \"" + dsn + "\"\n" + toml;
  Config config;
  std::vector<ConfigError> errors;
  const bool ok = ParseConfigText(text, "config.toml", &config, &errors);
  std::string all;
  for (const ConfigError& e : errors) all += e.ToString() + "\n";
  EXPECT_TRUE(ok) << all;
  return config.targets.empty() ? TargetConfig{} : config.targets[0];
}

}  // namespace pglock::testing
