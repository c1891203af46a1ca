#include "exporter/events/events.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/events/inventory.h"
#include "exporter/events/judge.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// gtest prints a HoldEnd by its label.
void PrintTo(HoldEnd e, std::ostream* os) { *os << HoldEndLabel(e); }
// ... and a HoldState by its name.
void PrintTo(HoldState s, std::ostream* os) { *os << HoldStateName(s); }

namespace {

constexpr uint32_t kAppDb = 16384;
constexpr double kStart = 1'700'000'000;
constexpr double kPostmasterStart = kStart - 86400;
constexpr char kIit[] = "idle_in_transaction_session_timeout";

Session MakeSession(int pid, const std::string& state, double state_change) {
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

AdvisoryKey Key(int64_t key) {
  const auto u = static_cast<uint64_t>(key);
  return {kAppDb, static_cast<uint32_t>(u >> 32), static_cast<uint32_t>(u & 0xffffffffu), 1};
}

AdvisoryLock Held(int pid, int64_t key, bool exclusive = true) {
  AdvisoryLock l;
  l.key = Key(key);
  l.pid = pid;
  l.exclusive = exclusive;
  l.granted = true;
  return l;
}

DatabaseStats Stats(int64_t fatal, int64_t killed, int64_t abandoned) {
  return {kAppDb, "appdb", fatal, killed, abandoned};
}

PollData Poll(double now, std::vector<Session> sessions, std::vector<AdvisoryLock> locks,
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

// ---- Releases and losses --------------------------------------------------------------------

TEST(EventTrackerTest, FirstPollCountsNothingButSeedsZeroSeries) {
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1)}));
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("unlocked"), 0);
  // Zero series exist for every cause and reason, so increase() sees the first event.
  for (const char* cause : {"idle_in_transaction_timeout", "idle_session_timeout", "terminated",
                            "connection_lost", "server_restart", "unknown"}) {
    EXPECT_EQ(e.counters().losses.count({"appdb", "unnamed", cause}), 1u) << cause;
  }
  EXPECT_EQ(e.counters().releases.count({"appdb", "unnamed", "unlocked"}), 1u);
  EXPECT_EQ(e.counters().releases.count({"appdb", "unnamed", "session_closed"}), 1u);
  EXPECT_EQ(e.counters().takeovers.count({"appdb", "unnamed"}), 1u);
  EXPECT_EQ(e.counters().handovers.count({"appdb", "unnamed"}), 1u);
}

TEST(EventTrackerTest, CleanUnlockIsAReleaseNotALoss) {
  Events e;
  const Session s = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {s}, {Held(10, 1), Held(10, 2)}));
  // The client ran pg_advisory_unlock(1): its session went active and idle again.
  e.Observe(Poll(kStart + 5, {MakeSession(10, "idle", kStart + 3)}, {Held(10, 2)}));
  EXPECT_EQ(e.Released("unlocked"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(EventTrackerTest, StillHeldCountsNothing) {
  Events e;
  const Session s = MakeSession(10, "idle", kStart - 5);
  for (int i = 0; i < 3; ++i) e.Observe(Poll(kStart + 5 * i, {s}, {Held(10, 1)}));
  EXPECT_EQ(e.Released("unlocked"), 0);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(EventTrackerTest, SessionClosedWithoutAbnormalEndIsAReleaseNotALoss) {
  // A job library's unlock-then-close, or a close without unlock, between two polls.
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1), Held(10, 2)}));
  e.Observe(Poll(kStart + 5, {}, {}));
  EXPECT_EQ(e.Released("session_closed"), 2);
  EXPECT_EQ(e.Released("unlocked"), 0);
  EXPECT_EQ(e.TotalLost(), 0);
  // The next run taking the key later is a new acquisition, not a takeover.
  e.Observe(Poll(kStart + 60, {MakeSession(11, "idle", kStart + 55)}, {Held(11, 1)}));
  EXPECT_EQ(e.Takeovers(), 0);
  EXPECT_EQ(e.Handovers(), 0);
}

TEST(EventTrackerTest, ReapedIdleSessionsDoNotMakeACleanCloseALoss) {
  // idle_session_timeout reaps an idle session holding nothing (a 'fatal' end) while a lock
  // holder closes its session cleanly in the same interval: the reaped session explains the
  // fatal delta.
  Events e;
  PollData p1 =
      Poll(kStart, {MakeSession(10, "active", kStart - 1), MakeSession(20, "idle", kStart - 29)},
           {Held(10, 1)});
  p1.settings = {{"idle_session_timeout", 30, "configuration file"}};
  e.Observe(p1);
  PollData p2 = Poll(kStart + 5, {}, {}, Stats(1, 0, 0));
  p2.settings = p1.settings;
  e.Observe(p2);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(EventTrackerTest, PidReuseIsASessionEnd) {
  Events e;
  Session s = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {s}, {Held(10, 1)}));
  s.backend_start = kStart + 1;  // same pid, new backend
  e.Observe(Poll(kStart + 5, {s}, {}));
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.Released("unlocked"), 0);
}

TEST(EventTrackerTest, IdleInTransactionPastTimeoutWithFatalDelta) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 55)}, {Held(10, 1)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  PollData p2 = Poll(kStart + 5, {}, {}, Stats(1, 0, 0));
  p2.settings = p1.settings;
  e.Observe(p2);
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 1);
  EXPECT_EQ(e.TotalLost(), 1);
  EXPECT_EQ(e.Ended("fatal"), 1);
}

TEST(EventTrackerTest, RoleOverrideDecidesTheTimeout) {
  Events e;
  // Server: no timeout; the role's override is 30s and the session was idle 28s + 5s.
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 28)}, {Held(10, 1)});
  p1.settings = {{kIit, 0, "default"}};
  p1.overrides = {{kIit, 0, 10, "*", "alice", 30}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 1);
}

TEST(EventTrackerTest, IdleSessionPastTimeoutWithFatalDelta) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle", kStart - 29)}, {Held(10, 1)});
  p1.settings = {{"idle_session_timeout", 30, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("idle_session_timeout"), 1);
}

TEST(EventTrackerTest, KilledDeltaIsTerminated) {
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Ended("killed"), 1);
}

TEST(EventTrackerTest, AbandonedDeltaIsConnectionLost) {
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 0, 1)));
  EXPECT_EQ(e.Lost("connection_lost"), 1);
  EXPECT_EQ(e.Ended("abandoned"), 1);
}

TEST(EventTrackerTest, FatalWithoutTimeoutMatchIsUnknown) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 2)}, {Held(10, 1)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("unknown"), 1);
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 0);
}

TEST(EventTrackerTest, TimeoutMatchWithoutFatalDeltaIsACleanClose) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 58)}, {Held(10, 1)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  // Its end may not be counted yet (on 14 the counters can be older than the poll): its lock is
  // judged at the next inventory; still no count then is a clean close.
  PollData p2 = Poll(kStart + 5, {}, {}, Stats(0, 0, 0));
  p2.settings = p1.settings;
  e.Observe(p2);
  EXPECT_EQ(e.Released("session_closed"), 0);
  PollData p3 = Poll(kStart + 10, {}, {}, Stats(0, 0, 0));
  p3.settings = p1.settings;
  e.Observe(p3);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(EventTrackerTest, TimeoutEndCountedOnePollLateIsStillTheTimeout) {
  // The holder is gone at the poll, its fatal end counted just after: the next inventory sees it.
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 58)}, {Held(10, 1)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  PollData p2 = Poll(kStart + 5, {}, {}, Stats(0, 0, 0));
  p2.settings = p1.settings;  // every inventory reads the settings
  e.Observe(p2);
  EXPECT_EQ(e.TotalLost() + e.Released("session_closed"), 0) << "judged before the count";
  e.Observe(Poll(kStart + 10, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
}

// ALTER ROLE (oid 77) SET idle_session_timeout = '3s'.
std::vector<SettingOverride> ReapRole77() {
  SettingOverride o;
  o.name = "idle_session_timeout";
  o.roleid = 77;
  o.role = "reaped";
  o.seconds = 3;
  return {o};
}

// A poll of a server with idle_session_timeout = 60 s.
PollData PollIdleSessionTimeout60(double now, std::vector<Session> sessions,
                                  std::vector<AdvisoryLock> locks, DatabaseStats stats) {
  PollData p = Poll(now, std::move(sessions), std::move(locks), stats);
  p.settings = {{"idle_session_timeout", 60, "configuration file"}};
  return p;
}

TEST(EventTrackerTest, ReapedSessionCountedLateIsNotPinnedOnANextCleanClose) {
  // A server reaps idle sessions (idle_session_timeout 3 s). One is gone at a poll while its fatal
  // end is counted only by the next one; meanwhile a lock holder closes its session cleanly. The
  // late count belongs to the reaped session, not to the holder.
  Events e;
  const Session holder = MakeSession(10, "active", kStart - 1);
  Session reaped = MakeSession(20, "idle", kStart - 2.5);
  reaped.usesysid = 77;
  PollData p1 = Poll(kStart, {holder, reaped}, {Held(10, 1)});
  p1.overrides = ReapRole77();
  e.Observe(p1);
  PollData p2 = Poll(kStart + 1, {holder}, {Held(10, 1)}, Stats(0, 0, 0));
  p2.overrides = p1.overrides;
  e.Observe(p2);
  PollData p3 = Poll(kStart + 2, {}, {}, Stats(1, 0, 0));
  p3.overrides = p1.overrides;
  e.Observe(p3);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(EventTrackerTest, SessionSeenOnlyBetweenInventoriesStillClaimsItsEnd) {
  // With a tiered poll, a reaped session may be seen only by the polls between two inventories.
  Events e;
  const Session holder = MakeSession(10, "active", kStart - 1);
  Session reaped = MakeSession(20, "idle", kStart + 0.5);
  reaped.usesysid = 77;
  const std::vector<SettingOverride> overrides = ReapRole77();
  PollData p1 = Poll(kStart, {holder}, {Held(10, 1)});
  p1.overrides = overrides;
  e.Observe(p1);
  PollData cheap = Poll(kStart + 2, {holder, reaped}, {Held(10, 1)});
  cheap.overrides = overrides;
  e.ObserveCheap(cheap);
  PollData p3 = Poll(kStart + 5, {}, {}, Stats(1, 0, 0));
  p3.overrides = overrides;
  e.Observe(p3);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(EventTrackerTest, HolderTerminatedWhileStillListedIsALossNotAnUnlock) {
  // pg_terminate_backend: the backend releases its locks, counts its end, then leaves
  // pg_stat_activity. A poll in between sees the lock gone from a session that ran nothing since.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  const Session b_took = MakeSession(11, "idle", kStart + 4);
  e.Observe(Poll(kStart + 5, {a, b_took}, {Held(11, 1)}));
  EXPECT_EQ(e.Released("unlocked"), 0) << "a ran no statement: it did not unlock";
  EXPECT_EQ(e.Handovers(), 0);
  e.Observe(Poll(kStart + 10, {b_took}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
  EXPECT_EQ(e.Released("unlocked"), 0);
}

TEST(EventTrackerTest, HolderTerminatedWhoseEndIsCountedWhileStillListedIsALoss) {
  // The backend released its lock and counted its end just before the poll read the counters, and
  // was still listed when the poll read pg_stat_activity: the poll sees the end counted, the lock
  // gone and the session there. At the next inventory the session is gone and the interval counts
  // no end: the end counted while it was still listed is its own.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {a, b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.TotalLost(), 0) << "judged when its session is gone";
  e.Observe(Poll(kStart + 10, {b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
  const Session b_took = MakeSession(11, "idle", kStart + 12);
  e.Observe(Poll(kStart + 15, {b_took}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.TotalLost(), 1);
}

TEST(EventTrackerTest, AnEndCountedWhileAHolderIsListedIsOnlyThatHoldersToClaim) {
  // As above, but the session whose lock went stays connected (a procedure that unlocked inside a
  // long statement): the end counted in that interval belongs to no holder, and a holder that
  // closes its session cleanly in the next interval must not be paged for it.
  Events e;
  const Session a = MakeSession(10, "active", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(11, 2)}));
  e.Observe(Poll(kStart + 5, {a, b}, {Held(11, 2)}, Stats(0, 1, 0)));
  e.Observe(Poll(kStart + 10, {a}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Released("unlocked"), 1);
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.TotalLost(), 0);
}

TEST(EventTrackerTest, TerminationCountedJustAfterThePollIsALossAndATakeover) {
  // pg_terminate_backend: the backend releases its locks, counts its end and leaves
  // pg_stat_activity, between the poll's read of the counters and its read of the sessions: gone
  // with no count. The second read sees the count. The key's next holder (at the poll) took a lost
  // key: a takeover.
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1)}));
  const Session next = MakeSession(11, "idle", kStart + 4);
  const Session other = MakeSession(12, "active", kStart + 4);
  e.Observe(Poll(kStart + 5, {next, other}, {Held(11, 1), Held(12, 2)}, Stats(0, 0, 0)),
            Stats(0, 1, 0));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
  // The next judgement sees that end again in its delta: it is not claimed twice (here by a
  // holder that closed its session cleanly).
  e.Observe(Poll(kStart + 10, {next}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.TotalLost(), 1);
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
}

TEST(EventTrackerTest, NoLateCountIsACleanCloseAtOnce) {
  // A clean close is judged at its poll (with the second read), not an interval later: an
  // abnormal end of another session in the next interval cannot be pinned on it.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), w = MakeSession(11, "active", kStart - 5),
                n = MakeSession(20, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, w, n}, {Held(10, 1)}));
  const Session w_took = MakeSession(11, "idle", kStart + 3);
  e.Observe(Poll(kStart + 5, {w_took, n}, {Held(11, 1)}, Stats(0, 0, 0)));  // a closed cleanly
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.Handovers(), 1);
  e.Observe(Poll(kStart + 10, {w_took}, {Held(11, 1)}, Stats(0, 0, 1)));  // n abandoned
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(EventTrackerTest, UnsettledHoldsAreCleanClosesAtTheNextPoll) {
  // The poller could not read the counters again: the next Observe() judges them clean closes.
  auto data = std::make_shared<PollData>(Poll(kStart + 5, {}, {}, Stats(0, 0, 0)));
  EventTracker tracker;
  Counters counters;
  LockNames names;
  auto first = std::make_shared<PollData>(
      Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1)}));
  tracker.Observe(first, nullptr, &names, &counters);
  tracker.Observe(data, first, &names, &counters);
  EXPECT_TRUE(tracker.settling());
  EXPECT_EQ(Get(counters.releases, std::make_tuple(std::string("appdb"), std::string("unnamed"),
                                                   std::string("session_closed"))),
            0);
  auto third = std::make_shared<PollData>(Poll(kStart + 10, {}, {}, Stats(0, 1, 0)));
  tracker.Observe(third, data, &names, &counters);
  EXPECT_FALSE(tracker.settling());
  EXPECT_EQ(Get(counters.releases, std::make_tuple(std::string("appdb"), std::string("unnamed"),
                                                   std::string("session_closed"))),
            1);
  double lost = 0;
  for (const auto& [k, v] : counters.losses) lost += v;
  EXPECT_EQ(lost, 0) << "a count a whole interval later is not the settled holder's";
}

// Role 77 has idle_session_timeout 3 s. A lock holder closes cleanly; a session holding nothing,
// idle since `idle_since` at the poll's now() (kStart + 5), is reaped before the second read, which
// runs `settle_after` seconds after that now(). Its fatal end is its own, not the holder's.
void ExpectReapedSessionKeepsItsEndAtTheSecondRead(double idle_since, double settle_after) {
  Events e;
  e.set_settle_after(settle_after);
  Session reaped = MakeSession(20, "idle", idle_since);
  reaped.usesysid = 77;
  for (PollData p : {Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)}),
                     Poll(kStart + 5, {reaped}, {}, Stats(0, 0, 0)),
                     Poll(kStart + 10, {}, {}, Stats(1, 0, 0))}) {
    p.overrides = ReapRole77();
    // The second poll's second read sees the reaped session's end.
    if (p.now == kStart + 5) {
      e.Observe(p, Stats(1, 0, 0));
      EXPECT_EQ(e.Released("session_closed"), 1);
    } else {
      e.Observe(p);
    }
    EXPECT_EQ(e.TotalLost(), 0) << "poll at +" << p.now - kStart;
  }
}

TEST(EventTrackerTest, ASessionReapedWhileAHolderSettlesKeepsItsFatalEnd) {
  ExpectReapedSessionKeepsItsEndAtTheSecondRead(kStart + 2.1, 0.3);  // idle 2.9 s at the poll
}

TEST(EventTrackerTest, TheReservationHorizonIsWhenTheSecondReadRan) {
  // Idle 1.5 s at the poll's now(); the poll took 1.35 s more, so the second read ran 1.6 s after.
  ExpectReapedSessionKeepsItsEndAtTheSecondRead(kStart + 3.5, 1.6);
}

TEST(EventTrackerTest, AnEndingHoldersEndCountedWhileAnotherSettlesIsNotTheSettlingHolders) {
  // A closed cleanly; B is being terminated at the poll (its lock gone, still listed); B's end is
  // counted before the second read: it is B's (judged at the next inventory), not A's.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5),
                c = MakeSession(12, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b, c}, {Held(10, 1), Held(11, 2)}));
  const Session c_took = MakeSession(12, "idle", kStart + 4);
  e.Observe(Poll(kStart + 5, {b, c_took}, {Held(12, 1)}, Stats(0, 0, 0)), Stats(0, 1, 0));
  e.Observe(Poll(kStart + 10, {c_took}, {Held(12, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 0) << "B's key was not taken; A's key was handed over";
  EXPECT_EQ(e.Handovers(), 1);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(EventTrackerTest, ASettlingDeferredHoldDoesNotHideItsKeysNextHolderChange) {
  // A ends cleanly while still listed at p2 (deferred) and B takes its key; at p3 A is gone and
  // settles while B was terminated and C took the key: B's loss and C's takeover count.
  Events e;
  const Session a = MakeSession(12, "idle", kStart - 5), b = MakeSession(11, "active", kStart - 5),
                c = MakeSession(13, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b, c}, {Held(12, 1)}));
  const Session b_took = MakeSession(11, "idle", kStart + 4);
  e.Observe(Poll(kStart + 5, {a, b_took, c}, {Held(11, 1)}));
  const Session c_took = MakeSession(13, "idle", kStart + 9);
  e.Observe(Poll(kStart + 10, {c_took}, {Held(13, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1) << "B lost the key and C took it";
  const Session c_unlocked = MakeSession(13, "idle", kStart + 13),
                d = MakeSession(14, "idle", kStart + 14);
  e.Observe(Poll(kStart + 15, {c_unlocked, d}, {Held(14, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 2);  // A to B, C to D
}

TEST(EventTrackerTest, ACounterResetDoesNotCancelTheNextIntervalsEnd) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(11, 2)}, Stats(5, 5, 5)));
  e.Observe(Poll(kStart + 5, {b}, {Held(11, 2)}, Stats(5, 5, 5)), Stats(5, 6, 5));
  EXPECT_EQ(e.Lost("terminated"), 1);
  e.Observe(Poll(kStart + 10, {}, {}, Stats(0, 1, 0)));  // pg_stat_reset(), then B terminated
  EXPECT_EQ(e.Lost("terminated"), 2);
}

TEST(EventTrackerTest, LockGoneFromAStillSessionThatStaysIsAnUnlockAtTheNextInventory) {
  // A statement that runs for long may unlock inside it (a procedure): no state change is seen.
  // The next inventory still lists the session: a release by unlock. The rest of each interval is
  // judged on time.
  Events e;
  const Session a = MakeSession(10, "active", kStart - 5);
  const Session b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(10, 2)}));
  e.Observe(Poll(kStart + 5, {a}, {Held(10, 2)}));  // b closed
  EXPECT_EQ(e.Released("unlocked"), 0);
  e.Observe(Poll(kStart + 10, {a}, {Held(10, 2)}));
  EXPECT_EQ(e.Released("unlocked"), 1);
  EXPECT_EQ(e.TotalLost(), 0);
}

TEST(EventTrackerTest, ADyingHoldersKeyTakenLaterIsATakeover) {
  // The poll falls between the terminated backend's release and its exit; the next worker takes
  // the key only after the next inventory.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {a, b}, {}));
  e.Observe(Poll(kStart + 10, {b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 0);
  const Session b_took = MakeSession(11, "idle", kStart + 12);
  e.Observe(Poll(kStart + 15, {b_took}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
  EXPECT_EQ(e.Released("unlocked") + e.Released("session_closed"), 0);
}

TEST(EventTrackerTest, AHolderWaitingForItsEndCountDoesNotTakeAReapedSessionsLaterCount) {
  // idle_session_timeout 60 s. The holder, idle 56 s, closes its session cleanly just before its
  // timeout would: gone at p2 without a fatal end, with timing that matches the timeout, so the
  // judgement waits for a late count. What arrives by p3 is the end of a session holding nothing,
  // reaped after p2 (a backend counts its own end before it leaves pg_stat_activity, never a poll
  // later): it is not the holder's, whose clean close must not page.
  Events e;
  const Session holder = MakeSession(10, "idle", kStart - 56);
  const Session reaped = MakeSession(20, "idle", kStart - 52);
  e.Observe(PollIdleSessionTimeout60(kStart, {holder, reaped}, {Held(10, 1)}, Stats(0, 0, 0)));
  e.Observe(PollIdleSessionTimeout60(kStart + 5, {reaped}, {},
                                     Stats(0, 0, 0)));  // the holder closed at +1
  e.Observe(
      PollIdleSessionTimeout60(kStart + 10, {}, {}, Stats(1, 0, 0)));  // the other one reaped at +8
  for (int i = 3; i <= kMaxCounterWaits + 1; ++i) {
    e.Observe(PollIdleSessionTimeout60(kStart + 5 * i, {}, {}, Stats(1, 0, 0)));
  }
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(EventTrackerTest, ALossInAnInventoryThatAWaitSkipsIsStillCounted) {
  // A long statement unlocks inside itself (a procedure): a lock is gone from a session that ran
  // nothing since, and the judgement waits. Meanwhile a worker takes another key, is terminated
  // holding it, and the next worker takes it: a loss and a takeover, each seen by the inventories
  // the wait passes over.
  Events e;
  const Session proc = MakeSession(10, "active", kStart - 100);
  const Session worker = MakeSession(11, "idle", kStart - 5);
  const Session next = MakeSession(12, "idle", kStart - 5);
  e.Observe(Poll(kStart, {proc, worker, next}, {Held(10, 1)}));
  const Session worker_took = MakeSession(11, "idle", kStart + 3);
  e.Observe(Poll(kStart + 5, {proc, worker_took, next}, {Held(11, 2)}));  // proc unlocked key 1
  e.Observe(Poll(kStart + 10, {proc, next}, {}, Stats(0, 1, 0)));         // worker terminated
  const Session next_took = MakeSession(12, "idle", kStart + 13);
  for (int i = 3; i <= kMaxCounterWaits + 1; ++i) {
    e.Observe(Poll(kStart + 5 * i, {proc, next_took}, {Held(12, 2)}, Stats(0, 1, 0)));
  }
  EXPECT_EQ(e.Released("unlocked"), 1);
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
}

TEST(EventTrackerTest, AWaitForAHoldersLateCountDoesNotHideALossAndTakeover) {
  // A holder closes cleanly just before its idle_session_timeout: its timing matches, no fatal end
  // is counted, and its end is awaited. Meanwhile a worker takes another key, is terminated
  // holding it, and the next worker takes it.
  Events e;
  const Session holder = MakeSession(10, "idle", kStart - 56);
  const Session worker = MakeSession(11, "idle", kStart - 5);
  const Session next = MakeSession(12, "idle", kStart - 5);
  e.Observe(
      PollIdleSessionTimeout60(kStart, {holder, worker, next}, {Held(10, 1)}, Stats(0, 0, 0)));
  const Session worker_took = MakeSession(11, "idle", kStart + 3);
  e.Observe(
      PollIdleSessionTimeout60(kStart + 5, {worker_took, next}, {Held(11, 2)}, Stats(0, 0, 0)));
  e.Observe(
      PollIdleSessionTimeout60(kStart + 10, {next}, {}, Stats(0, 1, 0)));  // the worker terminated
  const Session next_took = MakeSession(12, "idle", kStart + 13);
  for (int i = 3; i <= kMaxCounterWaits + 1; ++i) {
    e.Observe(PollIdleSessionTimeout60(kStart + 5 * i, {next_took}, {Held(12, 2)}, Stats(0, 1, 0)));
  }
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
}

TEST(EventTrackerTest, Pre14InfersFromTimeoutsOnly) {
  Events e;
  PollData p1 =
      Poll(kStart,
           {MakeSession(10, "idle in transaction", kStart - 58), MakeSession(11, "active", kStart)},
           {Held(10, 1), Held(11, 2)}, std::nullopt);
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, std::nullopt));
  // Without session counters only a timeout match is a loss; the other end counts as clean.
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 1);
  EXPECT_EQ(e.TotalLost(), 1);
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_TRUE(e.counters().sessions_ended.empty());
}

TEST(EventTrackerTest, Pg14WaitsForSessionCountersWrittenAfterTheSessionEnded) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)});
  p1.database_stats_snapshot = kStart - 0.1;
  e.Observe(p1);
  // Terminated: gone from pg_stat_activity, but the stats file predates this poll.
  PollData p2 = Poll(kStart + 0.5, {}, {});
  p2.database_stats_snapshot = kStart + 0.2;
  e.Observe(p2);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 0);  // not taken for a clean close either
  PollData p3 = Poll(kStart + 1, {}, {}, Stats(0, 1, 0));
  p3.database_stats_snapshot = kStart + 0.9;  // written after p2 began: counts the kill
  e.Observe(p3);
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.TotalLost(), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
}

TEST(EventTrackerTest, Pg14CounterWaitIsBounded) {
  Events e;
  PollData p = Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)});
  p.database_stats_snapshot = kStart - 0.1;
  e.Observe(p);
  for (int i = 1; i <= kMaxCounterWaits; ++i) {
    PollData stale = Poll(kStart + i, {}, {});
    stale.database_stats_snapshot = kStart;  // never newer than the end
    e.Observe(stale);
    EXPECT_EQ(e.TotalLost(), 0) << i;
  }
  PollData last = Poll(kStart + kMaxCounterWaits + 1, {}, {});
  last.database_stats_snapshot = kStart;
  e.Observe(last);
  EXPECT_EQ(e.Released("session_closed"), 1);  // judged with what there is: a clean close
  EXPECT_EQ(e.TotalLost(), 0);
}

TEST(EventTrackerTest, TwoSessionsEndingTogetherGetTheirOwnCauses) {
  Events e;
  AddBigintName(1, "timed-out", &e.names());
  AddBigintName(2, "killed", &e.names());
  PollData p1 = Poll(
      kStart,
      {MakeSession(10, "idle in transaction", kStart - 100), MakeSession(11, "active", kStart - 1)},
      {Held(10, 1), Held(11, 2)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 1, 0)));
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout", "timed-out"), 1);
  EXPECT_EQ(e.Lost("terminated", "killed"), 1);
  EXPECT_EQ(e.TotalLost(), 2);
}

TEST(EventTrackerTest, TimeoutMatchClaimsTheFatalDeltaFirst) {
  // The plain session's key sorts first; it must not take the only 'fatal' from the session
  // whose idle time matches the timeout.
  Events e;
  AddBigintName(1, "plain", &e.names());
  AddBigintName(2, "timed-out", &e.names());
  PollData p1 = Poll(
      kStart,
      {MakeSession(11, "active", kStart - 1), MakeSession(10, "idle in transaction", kStart - 100)},
      {Held(11, 1), Held(10, 2)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout", "timed-out"), 1);
  EXPECT_EQ(e.Released("session_closed", "plain"), 1);
  EXPECT_EQ(e.TotalLost(), 1);
}

TEST(EventTrackerTest, OneCausePerSessionForAllItsLocks) {
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "active", kStart - 1)},
                 {Held(10, 1), Held(10, 2), Held(10, 3)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 3);
  EXPECT_EQ(e.TotalLost(), 3);
}

TEST(InferLossCauseTest, Rules) {
  Session iit = MakeSession(1, "idle in transaction", 900);
  Session idle = MakeSession(2, "idle", 900);
  Session active = MakeSession(3, "active", 999);
  SessionEndDeltas none{};
  // 100s idle at the last poll + 5s: matches a 100s timeout, not a 200s one.
  {
    SessionEndDeltas d{1, 0, 0};
    EXPECT_EQ(InferEnd(iit, 1000, 1005, 100, 0, &d, true), HoldEnd::kIdleInTransactionTimeout);
    EXPECT_EQ(d.fatal, 0);  // consumed
  }
  {
    SessionEndDeltas d{1, 0, 0};
    EXPECT_EQ(InferEnd(iit, 1000, 1005, 200, 0, &d, true), HoldEnd::kUnknown);
  }
  {
    SessionEndDeltas d{1, 0, 0};
    EXPECT_EQ(InferEnd(idle, 1000, 1005, 0, 100, &d, true), HoldEnd::kIdleSessionTimeout);
  }
  {
    // An idle (not in transaction) session does not match the idle-in-transaction timeout.
    SessionEndDeltas d{1, 0, 0};
    EXPECT_EQ(InferEnd(idle, 1000, 1005, 100, 0, &d, true), HoldEnd::kUnknown);
  }
  {
    SessionEndDeltas d{0, 1, 1};
    EXPECT_EQ(InferEnd(active, 1000, 1005, 0, 0, &d, true), HoldEnd::kTerminated);
    EXPECT_EQ(d.killed, 0);
    EXPECT_EQ(InferEnd(active, 1000, 1005, 0, 0, &d, true), HoldEnd::kConnectionLost);
    EXPECT_EQ(d.abandoned, 0);
    EXPECT_EQ(InferEnd(active, 1000, 1005, 0, 0, &d, true),
              HoldEnd::kCleanClose);  // a clean close
  }
  EXPECT_EQ(InferEnd(iit, 1000, 1005, 100, 0, &none, false), HoldEnd::kIdleInTransactionTimeout);
  EXPECT_EQ(InferEnd(idle, 1000, 1005, 0, 100, &none, false), HoldEnd::kIdleSessionTimeout);
  EXPECT_EQ(InferEnd(active, 1000, 1005, 100, 100, &none, false), HoldEnd::kCleanClose);
  // Without state_change nothing can match a timeout.
  Session blind = iit;
  blind.state_change.reset();
  SessionEndDeltas d{1, 0, 0};
  EXPECT_EQ(InferEnd(blind, 1000, 1005, 1, 0, &d, true), HoldEnd::kUnknown);
}

TEST(InferLossCauseTest, SlackOfOneSecond) {
  const Session iit = MakeSession(1, "idle in transaction", 900);
  SessionEndDeltas none{};
  // Idle 100 + 5 = 105s by now; the slack lets a 106s timeout match, not a 107s one.
  EXPECT_EQ(InferEnd(iit, 1000, 1005, 106, 0, &none, false), HoldEnd::kIdleInTransactionTimeout);
  EXPECT_EQ(InferEnd(iit, 1000, 1005, 107, 0, &none, false), HoldEnd::kCleanClose);
}

// ---- Advisory hold states ---------------------------------------------------------------------

SessionId SessionOf(int pid) { return {pid, kStart - 1000 - pid}; }

TEST(AdvisoryHoldStateTest, HeldThenBackendEndingThenSettlingThenEndedLost) {
  // pg_terminate_backend as two polls and the second read see it: the lock gone from a session
  // still listed that ran nothing since (kBackendEnding), then the session gone with no end
  // counted (kSettling), then the termination counted by the second read (kEnded: lost).
  InventoryTier tier{std::chrono::milliseconds(0)};
  EventTracker tracker;
  LockNames names;
  Counters counters;
  std::optional<HoldState> at_second_read;
  const auto judge = [&](const PollData& p, std::optional<DatabaseStats> later) {
    auto data = std::make_shared<PollData>(p);
    const ReadCountersAgain read_again = [&]() {
      at_second_read = tracker.holds().StateOf(Key(1), SessionOf(10));
      return CountersReadAgain{std::vector<DatabaseStats>{later.value_or(Stats(0, 0, 0))}, 0.3};
    };
    JudgePoll(SteadyClock::now(), &data, &tier, &tracker, &names, read_again, &counters, nullptr);
  };
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "active", kStart - 5);
  judge(Poll(kStart, {a, b}, {Held(10, 1), Held(11, 2)}), std::nullopt);
  judge(Poll(kStart + 5, {a, b}, {Held(10, 1), Held(11, 2)}), std::nullopt);
  EXPECT_EQ(tracker.holds().StateOf(Key(1), SessionOf(10)), HoldState::kHeld);
  judge(Poll(kStart + 10, {a, b}, {Held(11, 2)}), std::nullopt);
  EXPECT_EQ(tracker.holds().StateOf(Key(1), SessionOf(10)), HoldState::kBackendEnding);
  EXPECT_FALSE(at_second_read.has_value()) << "nothing settles while the session is listed";
  judge(Poll(kStart + 15, {b}, {Held(11, 2)}), Stats(0, 1, 0));
  EXPECT_EQ(at_second_read, HoldState::kSettling);
  EXPECT_EQ(tracker.holds().StateOf(Key(1), SessionOf(10)), std::nullopt) << "ended: forgotten";
  EXPECT_EQ(Get(counters.losses, std::make_tuple(std::string("appdb"), std::string("unnamed"),
                                                 std::string("terminated"))),
            1);
  EXPECT_EQ(tracker.holds().StateOf(Key(2), SessionOf(11)), HoldState::kHeld);
}

TEST(AdvisoryHoldStateTest, TheTransitionsAndTheirEvidence) {
  const auto next = [](HoldState from, HoldEvidence e) { return NextHoldState(from, e); };
  HoldEvidence still;
  still.still_held = true;
  EXPECT_EQ(next(HoldState::kHeld, still).to, HoldState::kHeld);
  HoldEvidence restart;
  restart.restarted = true;
  for (HoldState from :
       {HoldState::kHeld, HoldState::kBackendEnding, HoldState::kAwaitingEndCount}) {
    EXPECT_EQ(next(from, restart).to, HoldState::kEnded) << HoldStateName(from);
    EXPECT_EQ(next(from, restart).end, HoldEnd::kServerRestart) << HoldStateName(from);
  }
  HoldEvidence ending;
  ending.backend_ending = true;
  EXPECT_EQ(next(HoldState::kHeld, ending).to, HoldState::kBackendEnding);
  HoldEvidence awaited;
  awaited.end_count_awaited = true;
  awaited.session_end = HoldEnd::kCleanClose;
  EXPECT_EQ(next(HoldState::kHeld, awaited).to, HoldState::kAwaitingEndCount);
  // Gone from a connected session: an unlock, wherever the hold comes from.
  for (HoldState from :
       {HoldState::kHeld, HoldState::kBackendEnding, HoldState::kAwaitingEndCount}) {
    EXPECT_EQ(next(from, {}).to, HoldState::kEnded);
    EXPECT_EQ(next(from, {}).end, HoldEnd::kStillConnected);
  }
  HoldEvidence clean;
  clean.session_end = HoldEnd::kCleanClose;
  EXPECT_EQ(next(HoldState::kHeld, clean).end, HoldEnd::kCleanClose) << "12/13: no second read";
  clean.can_settle = true;
  EXPECT_EQ(next(HoldState::kHeld, clean).to, HoldState::kSettling);
  EXPECT_EQ(next(HoldState::kAwaitingEndCount, clean).to, HoldState::kSettling);
  HoldEvidence killed;
  killed.session_end = HoldEnd::kTerminated;
  killed.can_settle = true;
  EXPECT_EQ(next(HoldState::kHeld, killed).end, HoldEnd::kTerminated);
  EXPECT_EQ(next(HoldState::kSettling, killed).end, HoldEnd::kTerminated);
  EXPECT_EQ(next(HoldState::kSettling, {}).end, HoldEnd::kCleanClose) << "no late count";
}

// ---- Takeovers ------------------------------------------------------------------------------

TEST(EventTrackerTest, UnlockAndRetakeByAnotherBetweenPollsIsAHandover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  const Session a_unlocked = MakeSession(10, "idle", kStart + 3);
  const Session b_took = MakeSession(11, "idle", kStart + 4);
  e.Observe(Poll(kStart + 5, {a_unlocked, b_took}, {Held(11, 1)}));
  EXPECT_EQ(e.Takeovers(), 0);
  EXPECT_EQ(e.Handovers(), 1);
  EXPECT_EQ(e.Released("unlocked"), 1);
}

TEST(EventTrackerTest, CloseAndRetakeByTheNextWorkerIsAHandover) {
  // Two workers contending: the first closes its session, the second gets the key, both between
  // two polls.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {Held(11, 1)}));
  EXPECT_EQ(e.Handovers(), 1);
  EXPECT_EQ(e.Takeovers(), 0);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(EventTrackerTest, LossAndRetakeBetweenPollsIsATakeover) {
  Events e;
  const Session a = MakeSession(10, "active", kStart - 5),
                b = MakeSession(11, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {Held(11, 1)}, Stats(0, 1, 0)));  // a was terminated
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
}

TEST(EventTrackerTest, TakeoverAfterLossAndEmptyPolls) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {}, Stats(0, 1, 0)));  // a was terminated holding the key
  e.Observe(Poll(kStart + 10, {b}, {}, Stats(0, 1, 0)));
  e.Observe(Poll(kStart + 15, {b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 0);
  e.Observe(Poll(kStart + 20, {b}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  // Held on by the same session: no further takeover.
  e.Observe(Poll(kStart + 25, {b}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  // Released and taken by yet another session: one takeover per loss, then hand-overs.
  const Session b_unlocked = MakeSession(11, "idle", kStart + 28);
  const Session c2 = MakeSession(12, "idle", kStart + 29);
  e.Observe(Poll(kStart + 30, {b_unlocked, c2}, {Held(12, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 1);
}

TEST(EventTrackerTest, LostKeyTakenAfterTheTakeoverWindowIsNoTakeover) {
  Events e(/*takeover_window_seconds=*/60);
  const Session a = MakeSession(10, "active", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  e.Observe(Poll(kStart + 70, {b}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(EventTrackerTest, SameSessionReHoldingIsNoTakeover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {MakeSession(10, "idle", kStart + 3)}, {}));
  e.Observe(Poll(kStart + 10, {MakeSession(10, "idle", kStart + 8)}, {Held(10, 1)}));
  EXPECT_EQ(e.Takeovers(), 0);
  EXPECT_EQ(e.Released("unlocked"), 1);
}

TEST(EventTrackerTest, KeyUnlockedCleanlyThenTakenByAnotherLaterIsNoTakeover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {a, b}, {}));
  e.Observe(Poll(kStart + 10, {a, b}, {Held(11, 1)}));
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(EventTrackerTest, SharedLockHoldersJoiningIsNoTakeover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1, false)}));
  e.Observe(Poll(kStart + 5, {a, b}, {Held(10, 1, false), Held(11, 1, false)}));
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(EventTrackerTest, TakeoverOfANamedKeyCarriesTheName) {
  Events e;
  AddBigintName(1, "sweep", &e.names());
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(10, 2)}));
  e.Observe(Poll(kStart + 5, {b}, {Held(11, 1), Held(11, 2)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers("sweep"), 1);
  EXPECT_EQ(e.Takeovers("unnamed"), 1);
  EXPECT_EQ(e.Lost("terminated", "sweep"), 1);
  EXPECT_EQ(e.Lost("terminated", "unnamed"), 1);
  // Rendered keys never become counter labels.
  for (const auto& [k, v] : e.counters().takeovers) {
    EXPECT_TRUE(std::get<1>(k) == "sweep" || std::get<1>(k) == "unnamed") << std::get<1>(k);
  }
}

// ---- Server restart -------------------------------------------------------------------------

TEST(EventTrackerTest, ServerRestartLosesEverythingAndTheNextHolderTakesOver) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(11, 2)}));
  PollData after = Poll(kStart + 30, {MakeSession(12, "idle", kStart + 25)}, {Held(12, 1)});
  after.postmaster_start = kStart + 20;
  e.Observe(after);
  EXPECT_EQ(e.Lost("server_restart"), 2);
  EXPECT_EQ(e.TotalLost(), 2);
  EXPECT_EQ(e.Released("session_closed"), 0);
  // A run that still believes it holds key 1 may overlap the new holder.
  EXPECT_EQ(e.Takeovers(), 1);
  // Key 2, lost in the restart, taken later: its own takeover; key 1 is not counted again.
  PollData later = after;
  later.now = kStart + 35;
  later.locks = {Held(12, 1), Held(12, 2)};
  e.Observe(later);
  EXPECT_EQ(e.Takeovers(), 2);
}

// kMaxLostKeys bounds the keys remembered for takeovers; past it the oldest losses are forgotten
// first. 6,000 keys lost in one restart, 5,000 in a later one: 1,000 of the first are forgotten,
// and a session taking all 11,000 afterwards is 10,000 takeovers, every key of the later loss among
// them.
TEST(EventTrackerTest, LostKeysAreBoundedAndTheOldestAreForgottenFirst) {
  static_assert(kMaxLostKeys == 10'000);
  Events e;
  const auto holds = [](int pid, int64_t from, int64_t to) {
    std::vector<AdvisoryLock> locks;
    for (int64_t k = from; k <= to; ++k) locks.push_back(Held(pid, k));
    return locks;
  };
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, holds(10, 1, 6000)));
  PollData first =
      Poll(kStart + 30, {MakeSession(11, "idle", kStart + 25)}, holds(11, 6001, 11000));
  first.postmaster_start = kStart + 20;
  e.Observe(first);
  EXPECT_EQ(e.Lost("server_restart"), 6000);
  PollData second = Poll(kStart + 60, {MakeSession(12, "idle", kStart + 55)}, {});
  second.postmaster_start = kStart + 50;
  e.Observe(second);
  EXPECT_EQ(e.Lost("server_restart"), 11000);
  // The later loss's keys first: every one a takeover.
  PollData later =
      Poll(kStart + 65, {MakeSession(12, "idle", kStart + 55)}, holds(12, 6001, 11000));
  later.postmaster_start = kStart + 50;
  e.Observe(later);
  EXPECT_EQ(e.Takeovers(), 5000);
  // Then the first loss's: 1,000 of them were forgotten.
  later.now = kStart + 70;
  later.locks = holds(12, 1, 11000);
  e.Observe(later);
  EXPECT_EQ(e.Takeovers(), 10000);
}

TEST(EventTrackerTest, LossThenRestartThenNewHolderIsOneTakeover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {}, Stats(0, 1, 0)));  // lost
  PollData after = Poll(kStart + 30, {MakeSession(12, "idle", kStart + 25)}, {});
  after.postmaster_start = kStart + 20;
  e.Observe(after);
  PollData later = after;
  later.now = kStart + 35;
  later.locks = {Held(12, 1)};
  e.Observe(later);
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
}

// ---- Polls without inventory ----------------------------------------------------------------

TEST(EventTrackerTest, CheapPollsDoNotCountLockEvents) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a}, {Held(10, 1)}));
  PollData cheap = Poll(kStart + 5, {a}, {});
  cheap.inventory = false;
  e.Observe(cheap);
  EXPECT_EQ(e.Released("unlocked"), 0);
  // Compared against the last inventory: still held, nothing happened.
  e.Observe(Poll(kStart + 10, {a}, {Held(10, 1)}));
  EXPECT_EQ(e.Released("unlocked"), 0);
  EXPECT_EQ(e.TotalLost(), 0);
}

// ---- Sessions ended -------------------------------------------------------------------------

TEST(EventTrackerTest, SessionsEndedCountFromTheFirstSightAndSurviveResets) {
  Events e;
  e.Observe(Poll(kStart, {}, {}, Stats(3, 2, 1)));
  // The first sight is the baseline: no series for a database where nothing ended since.
  EXPECT_TRUE(e.counters().sessions_ended.empty());
  e.Observe(Poll(kStart + 5, {}, {}, Stats(3, 2, 1)));
  EXPECT_TRUE(e.counters().sessions_ended.empty());

  e.Observe(Poll(kStart + 10, {}, {}, Stats(5, 2, 4)));
  EXPECT_EQ(e.Ended("fatal"), 2);
  EXPECT_EQ(e.Ended("killed"), 0);  // created with its siblings
  EXPECT_EQ(e.counters().sessions_ended.count({"appdb", "killed"}), 1u);
  EXPECT_EQ(e.Ended("abandoned"), 3);

  // pg_stat_reset(): counters restart from zero; ours never go down.
  e.Observe(Poll(kStart + 15, {}, {}, Stats(1, 0, 4)));
  EXPECT_EQ(e.Ended("fatal"), 3);
  EXPECT_EQ(e.Ended("killed"), 0);
  EXPECT_EQ(e.Ended("abandoned"), 3);

  e.Observe(Poll(kStart + 20, {}, {}, Stats(2, 1, 4)));
  EXPECT_EQ(e.Ended("fatal"), 4);
  EXPECT_EQ(e.Ended("killed"), 1);
}

TEST(EventTrackerTest, SessionsEndedPerDatabase) {
  Events e;
  PollData p = Poll(kStart, {}, {}, Stats(1, 0, 0));
  p.database_stats->push_back({kAppDb + 1, "other", 10, 0, 0});
  e.Observe(p);
  p.now += 5;
  (*p.database_stats)[1].sessions_fatal = 12;
  e.Observe(p);
  EXPECT_EQ(e.counters().sessions_ended.count({"appdb", "fatal"}), 0u);  // nothing ended there
  EXPECT_EQ(Get(e.counters().sessions_ended, std::make_tuple(std::string("other"), "fatal")), 2);
}

TEST(EventTrackerTest, LockCountersAreCreatedWhereALockIsFirstSeenHeld) {
  Events e;
  AddBigintName(7, "sweep", &e.names());
  // A database with sessions but no lock: no lock event series.
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {}));
  EXPECT_TRUE(e.counters().losses.empty());
  EXPECT_TRUE(e.counters().releases.empty());
  e.Observe(Poll(kStart + 5, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 7)}));
  EXPECT_EQ(e.counters().losses.count({"appdb", "sweep", "terminated"}), 1u);
  EXPECT_EQ(e.counters().losses.count({"appdb", "unnamed", "terminated"}), 0u);
  e.Observe(Poll(kStart + 10, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 7), Held(10, 8)}));
  EXPECT_EQ(e.counters().losses.count({"appdb", "unnamed", "terminated"}), 1u);
  EXPECT_EQ(e.counters().takeovers.count({"appdb", "unnamed"}), 1u);
  EXPECT_EQ(e.counters().handovers.count({"appdb", "unnamed"}), 1u);
}

// ---- Leases ---------------------------------------------------------------------------------

LeaseTableData Leases(std::vector<LeaseRow> rows, int64_t total = -1,
                      std::optional<TableWrites> writes = std::nullopt) {
  LeaseTableData t;
  t.table = "leases";
  t.ok = true;
  t.total = total >= 0 ? total : static_cast<int64_t>(rows.size());
  t.rows = std::move(rows);
  t.writes = writes;
  return t;
}

// One table with its write counters (n_tup_upd, n_tup_del).
LeaseTableData Written(std::vector<LeaseRow> rows, int64_t updated, int64_t deleted) {
  return Leases(std::move(rows), -1, TableWrites{updated, deleted});
}

PollData LeasePoll(double now, LeaseTableData table) {
  PollData d = Poll(now, {}, {});
  table.now = now;
  d.leases = {std::move(table)};
  return d;
}

TEST(EventTrackerTest, LeaseTransitions) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}})));
  // No "acquired" for what already existed at the first poll.
  EXPECT_EQ(e.TotalLeaseTransitions(), 0);

  // a renewed by its holder; b new.
  e.Observe(LeasePoll(1005, Leases({{"a", "h1", 900, 1200}, {"b", "h9", 1001, 1300}})));
  EXPECT_EQ(e.Lease("a", "renewed"), 1);
  EXPECT_EQ(e.Lease("b", "acquired"), 1);
  EXPECT_EQ(e.TotalLeaseTransitions(), 2);

  // Nothing changed: nothing counted.
  e.Observe(LeasePoll(1010, Leases({{"a", "h1", 900, 1200}, {"b", "h9", 1001, 1300}})));
  EXPECT_EQ(e.TotalLeaseTransitions(), 2);

  // a's holder edited in place (taken_at unchanged) before h1's lease expired (1150 < 1200); b
  // gone.
  e.Observe(LeasePoll(1150, Leases({{"a", "h2", 900, 1250}})));
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.Lease("b", "released"), 1);

  // a taken by h3 once h2's lease had expired (1250 >= 1250).
  e.Observe(LeasePoll(1300, Leases({{"a", "h3", 1250, 1350}})));
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 1);
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.TotalLeaseTransitions(), 5);
}

// A restart of the exporter keeps the tables' last reads (SaveLeases, then RestoreLeases in the
// tracker of the next start): the first read after it is judged against the last one before.
TEST(EventTrackerTest, LeaseReadsKeptAcrossARestartAreJudgedAcrossTheGap) {
  Events before;
  const auto read_before =
      Written({{"a", "h1", 999, 1120}, {"b", "h5", 990, 1500}, {"c", "h7", 995, 1500}}, 10, 0);
  before.Observe(LeasePoll(1000, read_before));
  // Down 200 s: a expired and was taken by h2 after its expiry; b is still h5's; c was deleted
  // by h7 and taken by h8 while it was valid (the table counts one delete: a give-back).
  const auto read_after =
      Written({{"a", "h2", 1130, 1250}, {"b", "h5", 990, 1500}, {"c", "h8", 1190, 1800}}, 11, 1);
  Events after;
  after.tracker().RestoreLeases(before.tracker().SaveLeases());
  after.Observe(LeasePoll(1200, read_after));
  EXPECT_EQ(after.Lease("a", "expired_takeover"), 1);
  EXPECT_EQ(after.Lease("c", "handover"), 1);
  EXPECT_EQ(after.TotalLeaseTransitions(), 2) << "b, held by the same holder, is no transition";
  ASSERT_EQ(after.events().size(), 2u);
  // Without them, that read is a first read: nothing is judged.
  Events fresh;
  fresh.Observe(LeasePoll(1200, read_after));
  EXPECT_EQ(fresh.TotalLeaseTransitions(), 0);
}

// ---- Hand-overs and overlaps (a leases table given back with DELETE, the next round taking it at
// once)

TEST(EventTrackerTest, DeleteAndRetakeBetweenPollsIsAHandover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // h1 deleted its row at 1000.5, h2 inserted at 1000.55: a new holder before h1's expiry.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.55, 1120.55}}, 0, 1)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  e.Observe(LeasePoll(1030, Written({{"a", "h2", 1000.55, 1120.55}}, 0, 1)));
  EXPECT_EQ(e.Lease("a", "overlap"), 0);
  EXPECT_EQ(e.TotalLeaseTransitions(), 1);
}

TEST(EventTrackerTest, TakeWithoutGiveBackIsAnOverlapOnceTheCountersHadTimeToArrive) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 10, 0)));
  // An upsert that forgot `WHERE expires_at < now()`: one update, no delete.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.5, 1120.5}}, 11, 0)));
  for (double now = 1002; now < 1001 + kLeaseWritesDelaySeconds; now += 1) {
    e.Observe(LeasePoll(now, Written({{"a", "h2", 1000.5, 1120.5}}, 11, 0)));
    EXPECT_EQ(e.Lease("a", "overlap"), 0) << "judged before the counters could arrive, at " << now;
  }
  e.Observe(
      LeasePoll(1001 + kLeaseWritesDelaySeconds, Written({{"a", "h2", 1000.5, 1120.5}}, 11, 0)));
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.Lease("a", "handover"), 0);
  e.Observe(LeasePoll(1030, Written({{"a", "h2", 1000.5, 1120.5}}, 11, 0)));
  EXPECT_EQ(e.Lease("a", "overlap"), 1) << "counted once";
}

TEST(EventTrackerTest, CountersArrivingLateTurnAPendingChangeIntoAHandover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // The deleting backend had flushed less than a second before: its delete shows 9 s later.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.5, 1120.5}}, 0, 0)));
  e.Observe(LeasePoll(1005, Written({{"a", "h2", 1000.5, 1120.5}}, 0, 0)));
  e.Observe(LeasePoll(1010, Written({{"a", "h2", 1000.5, 1120.5}}, 0, 1)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  e.Observe(LeasePoll(1030, Written({{"a", "h2", 1000.5, 1120.5}}, 0, 1)));
  EXPECT_EQ(e.Lease("a", "overlap"), 0);
}

TEST(EventTrackerTest, HolderEditedInPlaceIsAnOverlapAtOnceWhateverTheCounters) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // UPDATE leases SET holder = 'intruder': taken_at unchanged, so nobody took the lease; the
  // deletes of other rows' clean-up prove nothing about it.
  e.Observe(LeasePoll(1001, Written({{"a", "intruder", 999, 1120}}, 1, 5)));
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.Lease("a", "handover"), 0);
}

TEST(EventTrackerTest, HolderEditedInPlaceAfterExpiryIsAnExpiredTakeover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 900, 990}}, 0, 0)));
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 900, 990}}, 1, 0)));
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 1);
  EXPECT_EQ(e.Lease("a", "overlap"), 0);
}

TEST(EventTrackerTest, ExpiryMovedToThePastIsAReleaseAndTheNextTakeAHandover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // UPDATE leases SET expires_at = now() WHERE name = 'a' AND holder = 'h1'
  e.Observe(LeasePoll(1001, Written({{"a", "h1", 999, 1000.5}}, 1, 0)));
  EXPECT_EQ(e.Lease("a", "released"), 1);
  EXPECT_EQ(e.Lease("a", "renewed"), 0);
  // Taken later by the upsert, after the moved expiry: a hand-over, not an expired takeover.
  e.Observe(LeasePoll(1040, Written({{"a", "h2", 1039, 1160}}, 2, 0)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 0);
  // A lease that simply runs out and is taken is still an expired takeover.
  e.Observe(LeasePoll(1200, Written({{"a", "h3", 1190, 1300}}, 3, 0)));
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 1);
}

TEST(EventTrackerTest, ExpiryGiveBackAndTakeBetweenPollsNeedTwoUpdates) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}, {"b", "h1", 999, 1120}}, 0, 0)));
  // a: given back and taken (two updates); b: taken without a give-back (one update).
  e.Observe(
      LeasePoll(1001, Written({{"a", "h2", 1000.6, 1120.6}, {"b", "h2", 1000.6, 1120.6}}, 3, 0)));
  for (double now = 1002; now <= 1001 + kLeaseWritesDelaySeconds; now += 1) {
    e.Observe(
        LeasePoll(now, Written({{"a", "h2", 1000.6, 1120.6}, {"b", "h2", 1000.6, 1120.6}}, 3, 0)));
  }
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.Lease("b", "overlap"), 1) << "three updates explain one give-back and take, not two";
}

TEST(EventTrackerTest, ADeleteSeenAsAReleaseIsNoEvidenceForAnotherLease) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}, {"c", "h9", 999, 1120}}, 0, 0)));
  // c deleted (seen: released); a taken without a give-back.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.5, 1120.5}}, 1, 1)));
  EXPECT_EQ(e.Lease("c", "released"), 1);
  e.Observe(
      LeasePoll(1001 + kLeaseWritesDelaySeconds, Written({{"a", "h2", 1000.5, 1120.5}}, 1, 1)));
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.Lease("a", "handover"), 0);
}

TEST(EventTrackerTest, SeveralRoundsBetweenTwoPollsAreOneHandover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // h1 -> h2 -> h3 between two polls: two deletes, one change seen.
  e.Observe(LeasePoll(1005, Written({{"a", "h3", 1004, 1124}}, 0, 2)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.TotalLeaseTransitions(), 1);
}

TEST(EventTrackerTest, WithoutCountersNothingIsAnOverlapButAnInPlaceEdit) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 999, 1120}, {"b", "h1", 999, 1120}})));
  // A standby, or track_counts off: no counters.
  e.Observe(LeasePoll(1001, Leases({{"a", "h2", 1000.5, 1120.5}, {"b", "h2", 999, 1120}})));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.Lease("b", "overlap"), 1);
}

TEST(EventTrackerTest, CounterResetIsNoEvidenceOfAnOverlap) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 500, 40)));
  // pg_stat_reset() between the polls.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.5, 1120.5}}, 1, 0)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.Lease("a", "overlap"), 0);
}

TEST(EventTrackerTest, CappedLeaseTableReportsNoAcquiredOrReleased) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}}, /*total=*/50)));
  // "b" shows up and "a" drops out of the capped rows: neither is a real acquire or release.
  e.Observe(LeasePoll(1005, Leases({{"b", "h2", 950, 1010}}, /*total=*/50)));
  EXPECT_EQ(e.TotalLeaseTransitions(), 0);
  // Changes to rows seen in both polls are still counted.
  e.Observe(LeasePoll(1010, Leases({{"b", "h2", 950, 1020}}, /*total=*/50)));
  EXPECT_EQ(e.Lease("b", "renewed"), 1);
}

TEST(EventTrackerTest, CappedThenCompleteDoesNotReportAcquired) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}}, /*total=*/2)));
  e.Observe(LeasePoll(1005, Leases({{"a", "h1", 900, 1100}, {"b", "h2", 800, 1200}})));
  EXPECT_EQ(e.Lease("b", "acquired"), 0);
}

TEST(EventTrackerTest, FailedLeaseReadIsNotARelease) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}})));
  LeaseTableData failed;
  failed.table = "leases";
  failed.ok = false;
  failed.error = "permission denied";
  e.Observe(LeasePoll(1005, failed));
  EXPECT_EQ(e.TotalLeaseTransitions(), 0);
  e.Observe(LeasePoll(1010, Leases({{"a", "h1", 900, 1100}})));
  EXPECT_EQ(e.TotalLeaseTransitions(), 0);
}

TEST(EventTrackerTest, LeaseTransitionsSurviveAServerRestart) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}})));
  PollData after = LeasePoll(1200, Leases({{"a", "h2", 1150, 1300}}));
  after.postmaster_start = kPostmasterStart + 10;
  e.Observe(after);
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 1);
}

TEST(EventTrackerTest, LeaseNamesAreCappedPerTable) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({})));
  std::vector<LeaseRow> rows;
  for (size_t i = 0; i < kMaxLeaseCounterNames + 5; ++i) {
    rows.push_back({"job-" + std::to_string(i), "h", 1000, 2000});
  }
  e.Observe(LeasePoll(1005, Leases(rows)));
  std::set<std::string> names;
  for (const auto& [k, v] : e.counters().lease_transitions) names.insert(std::get<1>(k));
  EXPECT_EQ(names.size(), kMaxLeaseCounterNames + 1);
  EXPECT_EQ(e.Lease("other", "acquired"), 5);
  EXPECT_EQ(e.TotalLeaseTransitions(), static_cast<double>(kMaxLeaseCounterNames + 5));
}

TEST(EventTrackerTest, RowLockLeaseEventsNameTheHoldingSessions) {
  // A row_lock table's row held by pid 41's transaction, then by pid 42's, then by none: each
  // event carries the pid and identity of the session whose transaction held the row.
  const auto row = [](const std::string& holder, int pid) {
    LeaseRow r{"job-7", holder, 1000, 0};
    r.row_locked = pid != 0;
    r.pid = pid;
    return r;
  };
  const auto poll = [](double now, std::vector<LeaseRow> rows, std::vector<Session> sessions) {
    PollData d = LeasePoll(now, Leases(std::move(rows)));
    d.sessions = std::move(sessions);
    return d;
  };
  Session worker1 = MakeSession(41, "idle in transaction", 1000);
  worker1.application_name = "worker-1";
  Session worker2 = MakeSession(42, "idle in transaction", 1004);
  worker2.application_name = "worker-2";
  Events e;
  e.Observe(poll(1000, {}, {worker1}));
  e.Observe(poll(1002, {row("pid 41", 41)}, {worker1}));
  e.Observe(poll(1006, {row("pid 42", 42)}, {worker1, worker2}));
  e.Observe(poll(1010, {}, {worker1, worker2}));
  std::vector<const Event*> lease;
  for (const Event& ev : e.events()) {
    if (std::string_view(EventKindName(ev.kind)).starts_with("lease_")) lease.push_back(&ev);
  }
  ASSERT_EQ(lease.size(), 3u);
  EXPECT_EQ(lease[0]->kind, EventKind::kLeaseAcquired);
  EXPECT_EQ(lease[0]->current.pid, 41);
  EXPECT_EQ(lease[0]->current.application_name, "worker-1");
  EXPECT_EQ(lease[1]->kind, EventKind::kLeaseHandover);
  EXPECT_EQ(lease[1]->previous.pid, 41);
  EXPECT_EQ(lease[1]->current.pid, 42);
  EXPECT_EQ(lease[1]->current.application_name, "worker-2");
  EXPECT_EQ(lease[2]->kind, EventKind::kLeaseReleased);
  EXPECT_EQ(lease[2]->previous.pid, 42);
  EXPECT_EQ(lease[2]->current.pid, 0);
}

TEST(EventTrackerTest, AJobQueuesEverNewIdsKeepTheSeriesBoundedOverDays) {
  // A job queue read as a lock table: a few claimed jobs at a time, each id seen for a few polls
  // and never again. 20,000 ids: the zero-seeded counters stop at kMaxSeededLeases names, the
  // counted ones at kMaxLeaseCounterNames, then "other".
  Events e;
  size_t after_cap = 0;
  for (int poll = 0; poll < 5000; ++poll) {
    std::vector<LeaseRow> rows;
    for (int j = 0; j < 4; ++j) {
      const int id = poll * 4 + j;
      rows.push_back({std::to_string(id), "worker", 1000.0 + poll, 0});
    }
    e.Observe(LeasePoll(1000.0 + poll, Leases(rows)));
    if (poll == 1000) after_cap = e.counters().lease_transitions.size();
  }
  std::set<std::string> names;
  for (const auto& [k, v] : e.counters().lease_transitions) names.insert(std::get<1>(k));
  EXPECT_LE(names.size(), kMaxLeaseCounterNames + 1);
  EXPECT_EQ(e.counters().lease_transitions.size(), after_cap) << "series grew after the cap";
  EXPECT_GT(e.Lease("other", "acquired"), 10'000);
}

// ---- The tiered poll ---------------------------------------------------------------------------

// What a collector reads at inventories only (the shared lock table's entries, say) is carried to
// the cheap polls after it, with the time of that read (the age the exporter shows), not across a
// restart; what every poll reads is not.
struct CountedAtInventory {
  static constexpr bool kReadAtInventory = true;
  int64_t entries = 0;
  double read_at = 0;
};
struct ReadEveryPoll {
  int64_t waiters = 0;
};

TEST(InventoryTierTest, CheapPollCarriesWhatTheLastInventoryAloneRead) {
  InventoryTier tier(std::chrono::seconds(30));
  auto inventory = std::make_shared<PollData>();
  inventory->postmaster_start = kPostmasterStart;
  inventory->now = kStart;
  *inventory->parts.Mutable<CountedAtInventory>() = {4000, kStart};
  inventory->parts.Mutable<ReadEveryPoll>()->waiters = 3;
  const SteadyClock::time_point t0{};
  tier.Complete(t0, &inventory);

  auto cheap = std::make_shared<PollData>();
  cheap->inventory = false;
  cheap->postmaster_start = kPostmasterStart;
  cheap->now = kStart + 10;
  tier.Complete(t0 + std::chrono::seconds(10), &cheap);
  const auto* carried = cheap->parts.Find<CountedAtInventory>();
  ASSERT_NE(carried, nullptr);
  EXPECT_EQ(carried->entries, 4000);
  EXPECT_EQ(carried->read_at, kStart);
  EXPECT_EQ(cheap->parts.Find<ReadEveryPoll>(), nullptr) << "read every poll: never carried";

  auto restarted = std::make_shared<PollData>();
  restarted->inventory = false;
  restarted->postmaster_start = kPostmasterStart + 5;
  restarted->now = kStart + 20;
  tier.Complete(t0 + std::chrono::seconds(20), &restarted);
  EXPECT_EQ(restarted->parts.Find<CountedAtInventory>(), nullptr);
}

// ---- The server's log first -------------------------------------------------------------------

// What a server log reader would have read so far: ends by session, readable or not, and how
// many times it read the log through.
class FakeLog : public SessionEndLog {
 public:
  std::optional<HoldEnd> EndOf(const SessionId& s) const override {
    const auto it = ends.find(s);
    if (it == ends.end()) return std::nullopt;
    return it->second;
  }
  bool readable() const override { return up; }
  uint64_t reads_through() const override { return reads; }
  std::vector<LoggedSessionEnd> EndsLoggedBetween(const std::string& datname, double from,
                                                  double to) const override {
    std::vector<LoggedSessionEnd> out;
    for (const auto& [time, end] : unseen) {
      if (datname == "appdb" && time >= from && time <= to) out.push_back(end);
    }
    return out;
  }

  std::map<SessionId, HoldEnd> ends;
  // Ends of sessions of appdb no poll saw, by log time.
  std::vector<std::pair<double, LoggedSessionEnd>> unseen;
  bool up = true;
  uint64_t reads = 0;
};

SessionId IdOf(const Session& s) { return {s.pid, s.backend_start}; }

const Event* FindEvent(const std::vector<Event>& events, EventKind kind, int pid) {
  for (const Event& e : events) {
    if (e.kind == kind && e.previous.pid == pid) return &e;
  }
  return nullptr;
}

TEST(ServerLogEvidenceTest, TheLogTellsATerminationFromACleanCloseInTheSameInterval) {
  // The race the counters lose: one holder is terminated and another of the same database closes
  // cleanly between two polls. One 'killed' end is counted for the database; only the log says
  // whose it is. The clean close is listed first, so the counters alone would pin it on it.
  const Session clean = MakeSession(10, "idle", kStart - 5);
  const Session killed = MakeSession(11, "idle", kStart - 5);
  for (const bool with_log : {false, true}) {
    Events e;
    auto log = std::make_shared<FakeLog>();
    if (with_log) e.set_log(log);
    e.Observe(Poll(kStart, {clean, killed}, {Held(10, 1), Held(11, 2)}));
    log->ends[IdOf(clean)] = HoldEnd::kCleanClose;
    log->ends[IdOf(killed)] = HoldEnd::kTerminated;
    e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
    const Event* lost = FindEvent(e.events(), EventKind::kLockLost, with_log ? 11 : 10);
    ASSERT_NE(lost, nullptr) << "with_log=" << with_log;
    EXPECT_EQ(lost->cause, EventCause::kTerminated);
    EXPECT_EQ(lost->evidence, with_log ? EndEvidence::kLog : EndEvidence::kCounters);
    EXPECT_EQ(e.TotalLost(), 1);
    EXPECT_EQ(e.Released("session_closed"), 1);
    if (with_log) {
      const Event* released = FindEvent(e.events(), EventKind::kLockReleased, 10);
      ASSERT_NE(released, nullptr);
      EXPECT_EQ(released->evidence, EndEvidence::kLogAndCounters);
    }
  }
}

TEST(ServerLogEvidenceTest, ACleanCloseTheLogShowsIsNeverALoss) {
  // Another session of the database was terminated (holding nothing, its end not in the log
  // yet): the holder's own disconnection line decides.
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder, MakeSession(20, "active", kStart - 1)}, {Held(10, 1)}));
  log->ends[IdOf(holder)] = HoldEnd::kCleanClose;
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(ServerLogEvidenceTest, AGoneHolderWaitsForTheLogThenTakesItsWord) {
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle in transaction", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  // Gone with no end counted and nothing in the log yet: the counters say a clean close, the
  // second read too; the log may still show otherwise.
  e.Observe(Poll(kStart + 5, {}, {}));
  EXPECT_EQ(e.holds().StateOf(Key(1), IdOf(holder)), HoldState::kAwaitingLog);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 0);
  log->ends[IdOf(holder)] = HoldEnd::kTransactionTimeout;
  e.Observe(Poll(kStart + 10, {}, {}));
  EXPECT_EQ(e.Lost("transaction_timeout"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
  const Event* lost = FindEvent(e.events(), EventKind::kLockLost, 10);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->evidence, EndEvidence::kLog);
}

TEST(ServerLogEvidenceTest, ASilentLogReadThroughFallsBackToTheCounters) {
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.holds().StateOf(Key(1), IdOf(holder)), HoldState::kAwaitingLog);
  log->reads += 1;  // a read that may have started before the wait: not enough
  e.Observe(Poll(kStart + 6, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.TotalLost(), 0);
  log->reads += 1;
  e.Observe(Poll(kStart + 7, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  const Event* lost = FindEvent(e.events(), EventKind::kLockLost, 10);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->evidence, EndEvidence::kCounters);
}

TEST(ServerLogEvidenceTest, AnUnreadableLogIsNotWaitedFor) {
  Events e;
  auto log = std::make_shared<FakeLog>();
  log->up = false;
  e.set_log(log);
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
}

TEST(ServerLogEvidenceTest, ALoggedFatalEndsAHoldWhileItsBackendIsStillListed) {
  // The backend wrote its FATAL line and released its locks; it is still in pg_stat_activity.
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  log->ends[IdOf(holder)] = HoldEnd::kIdleSessionTimeout;
  e.Observe(Poll(kStart + 5, {holder}, {}));
  EXPECT_EQ(e.Lost("idle_session_timeout"), 1);
}

TEST(ServerLogEvidenceTest, TakeoverAfterALoggedLoss) {
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  log->ends[IdOf(holder)] = HoldEnd::kTerminated;
  e.Observe(Poll(kStart + 5, {MakeSession(11, "idle", kStart + 4)}, {Held(11, 1)}));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
}

// ---- No cause in the log: a clean close or a vanished client ----------------------------------

TEST(NoCauseEndTest, TheAbandonedCountDecidesWhenItCanSayWhose) {
  // DecideNoCauseEnd(abandoned, lost_logged, no_cause)
  EXPECT_EQ(DecideNoCauseEnd(0, 0, 1), HoldEnd::kCleanClose) << "none abandoned";
  EXPECT_EQ(DecideNoCauseEnd(0, 0, 5), HoldEnd::kCleanClose) << "none abandoned, many ends";
  EXPECT_EQ(DecideNoCauseEnd(1, 0, 1), HoldEnd::kConnectionLost) << "the one such end";
  EXPECT_EQ(DecideNoCauseEnd(2, 0, 2), HoldEnd::kConnectionLost) << "every one vanished";
  EXPECT_EQ(DecideNoCauseEnd(1, 0, 2), HoldEnd::kUndetermined) << "one of two: whose?";
  EXPECT_EQ(DecideNoCauseEnd(1, 1, 1), HoldEnd::kCleanClose) << "the logged EOF took it";
  EXPECT_EQ(DecideNoCauseEnd(2, 1, 1), HoldEnd::kConnectionLost);
  EXPECT_EQ(DecideNoCauseEnd(3, 0, 2), HoldEnd::kUndetermined) << "more than it can explain";
}

// The event of `kind` for `pid` has `cause` and `evidence`.
void ExpectEvent(const std::vector<Event>& events, EventKind kind, int pid, EventCause cause,
                 EndEvidence evidence) {
  const Event* e = FindEvent(events, kind, pid);
  ASSERT_NE(e, nullptr) << EventKindName(kind) << " of pid " << pid;
  EXPECT_EQ(e->cause, cause);
  EXPECT_EQ(e->evidence, evidence) << EndEvidenceLabel(e->evidence);
}

// The holder of key 1 and its log: gone at the second poll, its disconnection line read, the
// database's abandoned count `abandoned` then.
struct NoCauseCase {
  Events e;
  std::shared_ptr<FakeLog> log = std::make_shared<FakeLog>();
  Session holder = MakeSession(10, "idle", kStart - 5);

  NoCauseCase() { e.set_log(log); }
  // Reads the log through once more, and polls with the counters as they are.
  void ReadAndPoll(double now, std::vector<Session> sessions = {},
                   std::vector<AdvisoryLock> locks = {}, int64_t abandoned = 0) {
    log->reads += 1;
    e.Observe(Poll(now, std::move(sessions), std::move(locks), Stats(0, 0, abandoned)));
  }
};

TEST(NoCauseEndTest, AHolderKilledWhileIdleIsConnectionLostAndItsKeyTakenOver) {
  // The client process was killed: its backend read EOF outside a transaction (logged at DEBUG1
  // only), counted one abandoned end and wrote its disconnection line.
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  const Session next = MakeSession(11, "idle", kStart + 4);
  c.e.Observe(Poll(kStart + 5, {next}, {Held(11, 1)}, Stats(0, 0, 1)));
  // The other ends of the interval may not be read yet: it waits for the log.
  EXPECT_EQ(c.e.holds().StateOf(Key(1), IdOf(c.holder)), HoldState::kAwaitingLog);
  EXPECT_EQ(c.e.TotalLost(), 0);
  c.ReadAndPoll(kStart + 6, {next}, {Held(11, 1)}, 1);
  EXPECT_EQ(c.e.TotalLost(), 0) << "a read that may have started before the wait";
  c.ReadAndPoll(kStart + 7, {next}, {Held(11, 1)}, 1);
  EXPECT_EQ(c.e.Lost("connection_lost"), 1);
  EXPECT_EQ(c.e.Released("session_closed"), 0);
  EXPECT_EQ(c.e.Takeovers(), 1);
  ExpectEvent(c.e.events(), EventKind::kLockLost, 10, EventCause::kConnectionLost,
              EndEvidence::kLogAndCounters);
}

TEST(NoCauseEndTest, ACleanCloseWithNothingAbandonedIsReleasedAtOnce) {
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  const Session next = MakeSession(11, "idle", kStart + 4);
  c.e.Observe(Poll(kStart + 5, {next}, {Held(11, 1)}));
  EXPECT_EQ(c.e.Released("session_closed"), 1);
  EXPECT_EQ(c.e.TotalLost(), 0);
  EXPECT_EQ(c.e.Handovers(), 1);
  EXPECT_EQ(c.e.Takeovers(), 0);
  ExpectEvent(c.e.events(), EventKind::kLockReleased, 10, EventCause::kSessionClosed,
              EndEvidence::kLogAndCounters);
}

TEST(NoCauseEndTest, TwoNoCauseEndsAndOneAbandonedAreUndeterminedNeverReleased) {
  // One holder closed cleanly, the other's client was killed, in the same interval and database:
  // one abandoned end, two disconnection lines. Each is undetermined (a warning loss), and the
  // keys' next holders are hand-overs: no takeover on a guess.
  NoCauseCase c;
  const Session other = MakeSession(12, "idle", kStart - 5);
  c.e.Observe(Poll(kStart, {c.holder, other}, {Held(10, 1), Held(12, 2)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  c.log->ends[IdOf(other)] = HoldEnd::kCleanClose;
  const Session a = MakeSession(20, "idle", kStart + 4), b = MakeSession(21, "idle", kStart + 4);
  const std::vector<AdvisoryLock> taken = {Held(20, 1), Held(21, 2)};
  c.e.Observe(Poll(kStart + 5, {a, b}, taken, Stats(0, 0, 1)));
  c.ReadAndPoll(kStart + 6, {a, b}, taken, 1);
  c.ReadAndPoll(kStart + 7, {a, b}, taken, 1);
  EXPECT_EQ(c.e.Lost("undetermined"), 2);
  EXPECT_EQ(c.e.Released("session_closed"), 0);
  EXPECT_EQ(c.e.Lost("connection_lost"), 0);
  EXPECT_EQ(c.e.Takeovers(), 0);
  EXPECT_EQ(c.e.Handovers(), 2);
  ExpectEvent(c.e.events(), EventKind::kLockLost, 12, EventCause::kUndetermined,
              EndEvidence::kLogAndCounters);
}

TEST(NoCauseEndTest, ASessionNoPollSawSharesTheCount) {
  // A client connected and vanished between the two polls: only the log knows it. With the
  // holder's disconnection line, two no-cause ends share one abandoned end.
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  c.log->unseen.push_back({kStart + 3, {{77, kStart + 2}, HoldEnd::kCleanClose}});
  c.e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 0, 1)));
  c.ReadAndPoll(kStart + 6, {}, {}, 1);
  c.ReadAndPoll(kStart + 7, {}, {}, 1);
  EXPECT_EQ(c.e.Lost("undetermined"), 1);
  EXPECT_EQ(c.e.Released("session_closed"), 0);
}

TEST(NoCauseEndTest, AnotherSessionsLoggedEofTakesTheAbandonedEnd) {
  // The other session lost its connection inside a transaction: its "unexpected EOF" line
  // (08006) names it; the holder's disconnection line then explains nothing abandoned.
  for (const int64_t abandoned : {1, 2}) {
    NoCauseCase c;
    const Session other = MakeSession(12, "idle in transaction", kStart - 1);
    c.e.Observe(Poll(kStart, {c.holder, other}, {Held(10, 1)}));
    c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
    c.log->ends[IdOf(other)] = HoldEnd::kConnectionLost;
    c.e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 0, abandoned)));
    c.ReadAndPoll(kStart + 6, {}, {}, abandoned);
    c.ReadAndPoll(kStart + 7, {}, {}, abandoned);
    EXPECT_EQ(c.e.Lost("connection_lost"), abandoned - 1) << abandoned;
    EXPECT_EQ(c.e.Released("session_closed"), 2 - abandoned) << abandoned;
  }
}

TEST(NoCauseEndTest, ACountThatCameAfterThePollsReadSettles) {
  // The backend counted its end after the poll read the counters and left before it read
  // pg_stat_activity: the count shows in the read right after the poll.
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  c.e.Observe(Poll(kStart + 5, {}, {}), Stats(0, 0, 1));
  c.ReadAndPoll(kStart + 6, {}, {}, 1);
  c.ReadAndPoll(kStart + 7, {}, {}, 1);
  EXPECT_EQ(c.e.Lost("connection_lost"), 1);
  EXPECT_EQ(c.e.Released("session_closed"), 0);
}

TEST(NoCauseEndTest, BeforeFourteenTheLineAloneIsAClose) {
  // 12/13 count no abandoned ends: a disconnection line stays a clean close (a documented limit).
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}, std::nullopt));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  c.e.Observe(Poll(kStart + 5, {}, {}, std::nullopt));
  c.log->reads += 2;
  c.e.Observe(Poll(kStart + 6, {}, {}, std::nullopt));
  EXPECT_EQ(c.e.Released("session_closed"), 1);
  ExpectEvent(c.e.events(), EventKind::kLockReleased, 10, EventCause::kSessionClosed,
              EndEvidence::kLog);
}

}  // namespace
}  // namespace pglock
