// The poll config the integration tests run a Poller with: the packaged defaults (PollConfig{},
// as packaging/config.toml leaves them) but a poll every second, unless a test needs otherwise.
// Pure; thread-safe.
#pragma once

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

}  // namespace pglock::testing
