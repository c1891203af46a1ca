// What the unit tests of the events' state machines share (tests/events/advisory_holds_test.cc,
// session_ends_test.cc, lease_transitions_test.cc, inventory_test.cc): sessions, advisory locks
// and polls of one database ("appdb") made by hand, and Events, which judges them through
// JudgePoll() as the poller does and reads the counters. Thread-compatible.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/events/events.h"
#include "exporter/events/inventory.h"
#include "exporter/events/judge.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// gtest prints a HoldEnd by its label.
inline void PrintTo(HoldEnd e, std::ostream* os) { *os << HoldEndLabel(e); }
// ... and a HoldState by its name.
inline void PrintTo(HoldState s, std::ostream* os) { *os << HoldStateName(s); }

namespace testing {

inline constexpr uint32_t kAppDb = 16384;
inline constexpr double kStart = 1'700'000'000;
inline constexpr double kPostmasterStart = kStart - 86400;

inline Session MakeSession(int pid, const std::string& state, double state_change) {
  Session s;
  s.pid = pid;
  s.datid = kAppDb;
  s.datname = "appdb";
  s.usesysid = 10;
  s.usename = "alice";
  // Each session its own client by default (a worker per pid, on an address of its own): a rule
  // that looks at the client's identity must not see every worker as one client.
  s.application_name = "worker-" + std::to_string(pid);
  s.client_addr = "10.0." + std::to_string(pid / 250) + "." + std::to_string(1 + pid % 250);
  s.state = state;
  s.backend_start = kStart - 1000 - pid;
  s.state_change = state_change;
  if (state != "idle") s.xact_start = state_change;
  return s;
}

inline AdvisoryKey Key(int64_t key) {
  const auto u = static_cast<uint64_t>(key);
  return {kAppDb, static_cast<uint32_t>(u >> 32), static_cast<uint32_t>(u & 0xffffffffu), 1};
}

inline AdvisoryLock Held(int pid, int64_t key, bool exclusive = true) {
  AdvisoryLock l;
  l.key = Key(key);
  l.pid = pid;
  l.exclusive = exclusive;
  l.granted = true;
  return l;
}

inline DatabaseStats Stats(int64_t fatal, int64_t killed, int64_t abandoned) {
  return {kAppDb, "appdb", fatal, killed, abandoned};
}

inline PollData Poll(double now, std::vector<Session> sessions, std::vector<AdvisoryLock> locks,
                     std::optional<DatabaseStats> stats = Stats(0, 0, 0)) {
  PollData d;
  d.server_version = "15.4";
  d.server_version_num = stats ? 150004 : 130011;
  d.postmaster_start = kPostmasterStart;
  d.now = now;
  d.sessions = std::move(sessions);
  d.locks = std::move(locks);
  if (stats) d.database_stats = std::vector<DatabaseStats>{*stats};
  return d;
}

template <typename Map, typename Key>
double Get(const Map& m, const Key& k) {
  const auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

// Feeds polls to one EventTracker and reads its counters.
class Events {
 public:
  explicit Events(double takeover_window_seconds = 3600) : tracker_(takeover_window_seconds) {}

  // As the poller does: the inventory tier completes the poll, the tracker compares it with the
  // inventory before it; holders judged closed cleanly settle against the session end counters
  // read again right after: `later` (by default, those of the poll: nothing new).
  void Observe(const PollData& d, std::optional<DatabaseStats> later = std::nullopt) {
    auto data = std::make_shared<PollData>(d);
    JudgePoll(SteadyClock::now(), &data, &inventory_, &tracker_, &names_, ReadAgain(d, later),
              &counters_, &events_);
  }

  // A poll that is not an inventory: only its sessions count for the lock events.
  void ObserveCheap(const PollData& d) {
    auto data = std::make_shared<PollData>(d);
    data->inventory = false;
    JudgePoll(SteadyClock::now(), &data, &inventory_, &tracker_, &names_, ReadAgain(d, {}),
              &counters_, &events_);
  }

  // The counters read again after poll `d`: `later`, else the poll's own (nothing new).
  ReadCountersAgain ReadAgain(const PollData& d, std::optional<DatabaseStats> later) const {
    std::optional<std::vector<DatabaseStats>> stats = d.database_stats;
    if (later) stats = std::vector<DatabaseStats>{*later};
    return [stats, after = settle_after_] { return CountersReadAgain{stats, after}; };
  }

  double Released(const std::string& reason, const std::string& lock = "unnamed") const {
    return Get(counters_.releases, std::make_tuple(std::string("appdb"), lock, reason));
  }
  double Lost(const std::string& cause, const std::string& lock = "unnamed") const {
    return Get(counters_.losses, std::make_tuple(std::string("appdb"), lock, cause));
  }
  double TotalLost() const {
    double n = 0;
    for (const auto& [k, v] : counters_.losses) n += v;
    return n;
  }
  double Handovers(const std::string& lock = "unnamed") const {
    return Get(counters_.handovers, std::make_tuple(std::string("appdb"), lock));
  }
  double Takeovers(const std::string& lock = "unnamed") const {
    return Get(counters_.takeovers, std::make_tuple(std::string("appdb"), lock));
  }
  double Ended(const std::string& reason) const {
    return Get(counters_.sessions_ended, std::make_tuple(std::string("appdb"), reason));
  }
  double Lease(const std::string& lease, const std::string& kind,
               const std::string& table = "leases") const {
    return Get(counters_.lease_transitions, std::make_tuple(table, lease, kind));
  }
  double TotalLeaseTransitions() const {
    double n = 0;
    for (const auto& [k, v] : counters_.lease_transitions) n += v;
    return n;
  }

  LockNames& names() { return names_; }
  void set_log(std::shared_ptr<const SessionEndLog> log) { tracker_.set_log(std::move(log)); }
  const std::vector<Event>& events() const { return events_; }
  const AdvisoryHolds& holds() const { return tracker_.holds(); }
  // How long after a poll's now() the settling read runs (the poll's own time + the delay).
  void set_settle_after(double seconds) { settle_after_ = seconds; }
  const Counters& counters() const { return counters_; }
  EventTracker& tracker() { return tracker_; }

 private:
  InventoryTier inventory_{std::chrono::milliseconds(0)};
  EventTracker tracker_;
  LockNames names_;
  double settle_after_ = 0.3;
  Counters counters_;
  std::vector<Event> events_;
};

// ALTER ROLE (oid 77) SET idle_session_timeout = '3s'.
inline std::vector<SettingOverride> ReapRole77() {
  SettingOverride o;
  o.name = "idle_session_timeout";
  o.roleid = 77;
  o.role = "reaped";
  o.seconds = 3;
  return {o};
}

// A poll of a server with idle_session_timeout = 60 s.
inline PollData PollIdleSessionTimeout60(double now, std::vector<Session> sessions,
                                         std::vector<AdvisoryLock> locks, DatabaseStats stats) {
  PollData p = Poll(now, std::move(sessions), std::move(locks), stats);
  p.settings = {{"idle_session_timeout", 60, "configuration file"}};
  return p;
}

}  // namespace testing
}  // namespace pglock
