#include "exporter/snapshot/analyze.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exporter/collectors/activity.h"
#include "exporter/collectors/registry.h"
#include "exporter/config/holder_matcher.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/timeouts.h"

namespace pglock {
namespace {

constexpr uint32_t kAppDb = 16384;
constexpr double kNow = 1'700'000'000;

Session MakeSession(int pid, const std::string& state, const std::string& app = "app") {
  Session s;
  s.pid = pid;
  s.datid = kAppDb;
  s.datname = "appdb";
  s.usesysid = 10;
  s.usename = "alice";
  s.application_name = app;
  s.client_addr = "10.0.0.1";
  s.state = state;
  s.backend_start = kNow - 3600;
  s.state_change = kNow - 1;
  s.query_start = kNow - 1;
  if (state == "active" || state.rfind("idle in transaction", 0) == 0) s.xact_start = kNow - 1;
  return s;
}

AdvisoryKey BigintKey(int64_t key) {
  const auto u = static_cast<uint64_t>(key);
  return {kAppDb, static_cast<uint32_t>(u >> 32), static_cast<uint32_t>(u & 0xffffffffu), 1};
}

AdvisoryKey PairKey(int32_t key1, int32_t key2) {
  return {kAppDb, static_cast<uint32_t>(key1), static_cast<uint32_t>(key2), 2};
}

AdvisoryLock Held(int pid, AdvisoryKey key) {
  AdvisoryLock l;
  l.key = key;
  l.pid = pid;
  l.granted = true;
  return l;
}

AdvisoryLock Waiting(int pid, AdvisoryKey key, std::optional<double> waitstart) {
  AdvisoryLock l = Held(pid, key);
  l.granted = false;
  l.waitstart = waitstart;
  return l;
}

PollData BaseData() {
  PollData d;
  d.server_version = "15.4";
  d.server_version_num = 150004;
  d.postmaster_start = kNow - 86400;
  d.now = kNow;
  return d;
}

struct Result {
  TargetView view;
  std::map<std::string, int64_t> dropped;
};

Result AnalyzeData(const PollData& data, HoldHistory* history = nullptr, int top_n = 20,
                   const LockNames* names = nullptr, std::vector<LeaseTableRules> rules = {}) {
  HoldHistory local;
  AnalyzeOptions options;
  options.top_n = top_n;
  options.names = names;
  options.lease_rules = std::move(rules);
  Result r;
  r.view = Analyze(data, options, history != nullptr ? history : &local, &r.dropped);
  return r;
}

const HeldLock* FindHeld(const TargetView& v, int pid) {
  for (const HeldLock& h : v.held) {
    if (h.holder.pid == pid) return &h;
  }
  return nullptr;
}

// ActivityCollector's clients, as its part of the view.
const std::vector<ClientRow>& Clients(const TargetView& v) {
  static const std::vector<ClientRow> none;
  const ClientSessions* c = v.parts.Find<ClientSessions>();
  return c != nullptr ? c->rows : none;
}

const IdleHolder* FindIdle(const TargetView& v, int pid) {
  for (const IdleHolder& h : v.idle_holders) {
    if (h.holder.pid == pid) return &h;
  }
  return nullptr;
}

// ---- Lock labels ----------------------------------------------------------------------------

TEST(RenderAdvisoryKeyTest, BigintKeysAreSigned) {
  EXPECT_EQ(RenderAdvisoryKey({1, 0, 42, 1}), "42");
  EXPECT_EQ(RenderAdvisoryKey({1, 0xffffffffu, 0xffffffffu, 1}), "-1");
  EXPECT_EQ(RenderAdvisoryKey({1, 0x7fffffffu, 0xffffffffu, 1}), "9223372036854775807");
  EXPECT_EQ(RenderAdvisoryKey({1, 0x80000000u, 0, 1}), "-9223372036854775808");
  EXPECT_EQ(RenderAdvisoryKey({1, 1, 0, 1}), "4294967296");
  EXPECT_EQ(RenderAdvisoryKey(BigintKey(-123456789012345)), "-123456789012345");
}

TEST(RenderAdvisoryKeyTest, Int4PairsAreSigned) {
  EXPECT_EQ(RenderAdvisoryKey(PairKey(-5, -7)), "-5:-7");
  EXPECT_EQ(RenderAdvisoryKey(PairKey(7742, 0)), "7742:0");
  EXPECT_EQ(RenderAdvisoryKey(PairKey(std::numeric_limits<int32_t>::min(), 2147483647)),
            "-2147483648:2147483647");
}

TEST(LockLabelTest, ConfiguredNamesReplaceTheKey) {
  LockNames names;
  AddBigintName(-1, "sweep", &names);
  AddBigintName(int64_t{1} << 40, "big", &names);
  AddPairName(-5, -7, "report-daily", &names);
  EXPECT_EQ(LockLabel({kAppDb, 0xffffffffu, 0xffffffffu, 1}, &names), "sweep");
  EXPECT_EQ(LockLabel({kAppDb, 256, 0, 1}, &names), "big");
  // The database is not part of a name.
  EXPECT_EQ(LockLabel({kAppDb + 1, 0xffffffffu, 0xffffffffu, 1}, &names), "sweep");
  EXPECT_EQ(LockLabel(PairKey(-5, -7), &names), "report-daily");
  // Same classid/objid, other form: not the configured key.
  EXPECT_EQ(LockLabel({kAppDb, 0xfffffffbu, 0xfffffff9u, 1}, &names), "-17179869191");
  EXPECT_EQ(LockLabel({kAppDb, 0xffffffffu, 0xffffffffu, 2}, &names), "-1:-1");
  EXPECT_EQ(LockLabel(BigintKey(42), nullptr), "42");
}

TEST(AnalyzeTest, HeldLockUsesConfiguredName) {
  PollData d = BaseData();
  d.sessions = {MakeSession(10, "idle"), MakeSession(11, "idle")};
  d.locks = {Held(10, BigintKey(-1)), Held(11, PairKey(-5, -7))};
  LockNames names;
  AddBigintName(-1, "sweep", &names);
  const Result r = AnalyzeData(d, nullptr, 20, &names);
  ASSERT_EQ(r.view.held.size(), 2u);
  EXPECT_EQ(FindHeld(r.view, 10)->lock, "sweep");
  EXPECT_EQ(FindHeld(r.view, 11)->lock, "-5:-7");
}

// ---- Waits ----------------------------------------------------------------------------------

TEST(AnalyzeTest, WaiterWithTwoBlockersGivesTwoEdges) {
  PollData d = BaseData();
  Session waiter = MakeSession(10, "active", "worker");
  waiter.waiting_on_lock = waiter.advisory_wait = true;
  waiter.blocked_by = {20, 30};
  Session b1 = MakeSession(20, "idle in transaction", "holder-a");
  Session b2 = MakeSession(30, "idle", "holder-b");
  b2.xact_start.reset();
  b2.client_addr = "";
  d.sessions = {waiter, b1, b2};
  const AdvisoryKey key = BigintKey(77);
  AdvisoryLock s1 = Held(20, key), s2 = Held(30, key);
  s1.exclusive = s2.exclusive = false;
  d.locks = {s1, s2, Waiting(10, key, kNow - 12.5)};

  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.waits.size(), 2u);
  std::map<int, WaitEdge> by_blocker;
  for (const WaitEdge& w : r.view.waits) by_blocker[w.blocker.pid] = w;
  ASSERT_EQ(by_blocker.count(20), 1u);
  ASSERT_EQ(by_blocker.count(30), 1u);
  for (const auto& [pid, w] : by_blocker) {
    EXPECT_EQ(w.datname, "appdb");
    EXPECT_EQ(w.lock, "77");
    EXPECT_EQ(w.waiter.pid, 10);
    EXPECT_EQ(w.waiter.application_name, "worker");
    EXPECT_DOUBLE_EQ(w.seconds, 12.5);
  }
  EXPECT_EQ(by_blocker[20].blocker.application_name, "holder-a");
  EXPECT_EQ(by_blocker[20].blocker.state, "idle in transaction");
  EXPECT_EQ(by_blocker[30].blocker.application_name, "holder-b");
  EXPECT_EQ(by_blocker[30].blocker.client_addr, "");
  EXPECT_EQ(by_blocker[30].blocker.usename, "alice");

  const DatabaseAggregate& agg = r.view.databases.at("appdb");
  EXPECT_EQ(agg.advisory_waiters, 1);
  EXPECT_EQ(agg.advisory_locks_held, 2);
  EXPECT_DOUBLE_EQ(agg.advisory_wait_max, 12.5);
}

TEST(AnalyzeTest, BlockerNotInActivityKeepsItsPid) {
  PollData d = BaseData();
  Session waiter = MakeSession(10, "active");
  waiter.blocked_by = {99};
  d.sessions = {waiter};
  d.locks = {Waiting(10, BigintKey(1), kNow - 3)};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.waits.size(), 1u);
  EXPECT_EQ(r.view.waits[0].blocker.pid, 99);
  EXPECT_EQ(r.view.waits[0].blocker.application_name, "");
  EXPECT_EQ(r.view.waits[0].blocker.state, "");
}

TEST(AnalyzeTest, NullWaitstartOn14GivesZero) {
  PollData d = BaseData();
  Session waiter = MakeSession(10, "active");
  waiter.query_start = kNow - 100;
  waiter.blocked_by = {20};
  d.sessions = {waiter, MakeSession(20, "idle")};
  d.locks = {Held(20, BigintKey(5)), Waiting(10, BigintKey(5), std::nullopt)};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.waits.size(), 1u);
  EXPECT_DOUBLE_EQ(r.view.waits[0].seconds, 0);
  EXPECT_DOUBLE_EQ(r.view.databases.at("appdb").advisory_wait_max, 0);
}

TEST(AnalyzeTest, Pg13FallsBackToQueryStart) {
  PollData d = BaseData();
  d.server_version_num = 130011;
  Session waiter = MakeSession(10, "active");
  waiter.query_start = kNow - 60;
  waiter.blocked_by = {20};
  d.sessions = {waiter, MakeSession(20, "idle")};
  d.locks = {Held(20, BigintKey(5)), Waiting(10, BigintKey(5), std::nullopt)};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.waits.size(), 1u);
  EXPECT_DOUBLE_EQ(r.view.waits[0].seconds, 60);
  EXPECT_DOUBLE_EQ(r.view.databases.at("appdb").advisory_wait_max, 60);
}

TEST(AnalyzeTest, WaitstartInTheFutureIsClampedToZero) {
  PollData d = BaseData();
  Session waiter = MakeSession(10, "active");
  waiter.blocked_by = {20};
  d.sessions = {waiter, MakeSession(20, "idle")};
  d.locks = {Held(20, BigintKey(5)), Waiting(10, BigintKey(5), kNow + 0.2)};
  EXPECT_DOUBLE_EQ(AnalyzeData(d).view.waits[0].seconds, 0);
}

TEST(AnalyzeTest, DatabaseNamesComeFromActivityOrStats) {
  PollData d = BaseData();
  d.sessions = {MakeSession(10, "idle")};
  d.database_stats = std::vector<DatabaseStats>{{16500, "reports", 0, 0, 0}};
  AdvisoryLock other_db = Held(10, BigintKey(1));
  other_db.key.datid = 16500;
  AdvisoryLock unknown_db = Held(10, BigintKey(2));
  unknown_db.key.datid = 17000;
  d.locks = {other_db, unknown_db};
  const Result r = AnalyzeData(d);
  EXPECT_EQ(r.view.databases.at("reports").advisory_locks_held, 1);
  EXPECT_EQ(r.view.databases.at("17000").advisory_locks_held, 1);
  // A database with sessions but no locks still gets zero aggregates.
  EXPECT_EQ(r.view.databases.at("appdb").advisory_locks_held, 0);
}

// ---- Holders --------------------------------------------------------------------------------

TEST(AnalyzeTest, ActiveHolderAgeStartsAtFirstSight) {
  PollData d = BaseData();
  Session s = MakeSession(10, "active");
  s.xact_start = kNow - 500;
  d.sessions = {s};
  d.locks = {Held(10, BigintKey(1))};
  HoldHistory history;
  const Result r1 = AnalyzeData(d, &history);
  ASSERT_EQ(r1.view.held.size(), 1u);
  EXPECT_DOUBLE_EQ(r1.view.held[0].seconds, 0);

  d.now = kNow + 15;
  const Result r2 = AnalyzeData(d, &history);
  ASSERT_EQ(r2.view.held.size(), 1u);
  EXPECT_DOUBLE_EQ(r2.view.held[0].seconds, 15);
}

TEST(AnalyzeTest, IdleHolderOnFirstSightUsesStateChange) {
  PollData d = BaseData();
  Session s = MakeSession(10, "idle");
  s.xact_start.reset();
  s.state_change = kNow - 300;
  d.sessions = {s};
  d.locks = {Held(10, BigintKey(1))};
  HoldHistory history;
  EXPECT_DOUBLE_EQ(AnalyzeData(d, &history).view.held[0].seconds, 300);

  // Later polls keep the first-seen time even though state_change moved on.
  d.now = kNow + 20;
  d.sessions[0].state_change = kNow + 10;
  EXPECT_DOUBLE_EQ(AnalyzeData(d, &history).view.held[0].seconds, 320);
}

TEST(AnalyzeTest, XactStartLaterThanFirstSeenWins) {
  PollData d = BaseData();
  Session s = MakeSession(10, "active");
  s.xact_start = kNow - 10;
  d.sessions = {s};
  d.locks = {Held(10, BigintKey(1))};
  HoldHistory history;
  AnalyzeData(d, &history);  // first seen at kNow

  d.now = kNow + 100;
  d.sessions[0].xact_start = kNow + 60;  // a new transaction: a transaction lock is re-taken
  EXPECT_DOUBLE_EQ(AnalyzeData(d, &history).view.held[0].seconds, 40);
}

TEST(AnalyzeTest, HistoryForgetsReleasedLocksAndNewBackends) {
  PollData d = BaseData();
  d.sessions = {MakeSession(10, "active")};
  d.locks = {Held(10, BigintKey(1))};
  HoldHistory history;
  AnalyzeData(d, &history);
  EXPECT_EQ(history.first_seen.size(), 1u);

  // Released, then taken again: a new hold.
  d.now = kNow + 10;
  d.locks.clear();
  AnalyzeData(d, &history);
  EXPECT_TRUE(history.first_seen.empty());
  d.now = kNow + 20;
  d.locks = {Held(10, BigintKey(1))};
  EXPECT_DOUBLE_EQ(AnalyzeData(d, &history).view.held[0].seconds, 0);

  // Same pid, new backend: a new hold.
  d.now = kNow + 30;
  d.sessions[0].backend_start = kNow + 25;
  EXPECT_DOUBLE_EQ(AnalyzeData(d, &history).view.held[0].seconds, 0);
}

TEST(AnalyzeTest, KeepTopNKeepsTheMostSevereInStableOrder) {
  using Row = std::pair<int, std::string>;
  const auto more_severe = [](const Row& a, const Row& b) { return a.first > b.first; };
  std::vector<Row> rows = {{1, "a"}, {3, "b"}, {2, "c"}, {3, "d"}, {1, "e"}, {3, "f"}};
  EXPECT_EQ(KeepTopN(&rows, 4, more_severe), 2);
  EXPECT_EQ(rows, (std::vector<Row>{{3, "b"}, {3, "d"}, {3, "f"}, {2, "c"}}));
  rows = {{1, "a"}, {2, "b"}, {1, "c"}};
  EXPECT_EQ(KeepTopN(&rows, 20, more_severe), 0);
  EXPECT_EQ(rows, (std::vector<Row>{{2, "b"}, {1, "a"}, {1, "c"}}));
  // Many ties: the same rows, in the same order, as a stable sort.
  rows.clear();
  for (int i = 0; i < 200; ++i) rows.emplace_back((i * 7) % 5, std::to_string(i));
  std::vector<Row> sorted = rows;
  std::stable_sort(sorted.begin(), sorted.end(), more_severe);
  sorted.resize(60);
  EXPECT_EQ(KeepTopN(&rows, 60, more_severe), 140);
  EXPECT_EQ(rows, sorted);
}

TEST(AnalyzeTest, HistoryFollowsHoldsWhenRowsMoveComeAndGo) {
  PollData d = BaseData();
  d.sessions = {MakeSession(10, "active"), MakeSession(11, "active")};
  d.locks = {Held(10, BigintKey(1)), Held(10, BigintKey(2)), Held(11, BigintKey(3)),
             Held(11, BigintKey(4))};
  HoldHistory history;
  AnalyzeData(d, &history);  // all first seen at kNow

  // Key 5 taken and key 2 let go, then the rows in another order.
  d.now = kNow + 10;
  d.locks = {Held(10, BigintKey(1)), Held(11, BigintKey(5)), Held(11, BigintKey(3)),
             Held(11, BigintKey(4))};
  AnalyzeData(d, &history);
  d.now = kNow + 30;
  d.locks = {Held(11, BigintKey(4)), Held(11, BigintKey(3)), Held(10, BigintKey(1)),
             Held(11, BigintKey(5)), Held(10, BigintKey(2))};
  const Result r = AnalyzeData(d, &history);
  std::map<std::string, double> age;
  for (const HeldLock& h : r.view.held) age[h.lock] = h.seconds;
  EXPECT_EQ(age,
            (std::map<std::string, double>{{"1", 30}, {"2", 0}, {"3", 30}, {"4", 30}, {"5", 20}}));
  EXPECT_EQ(history.first_seen.size(), 5u);
}

TEST(AnalyzeTest, PollWithoutInventoryKeepsHistory) {
  PollData d = BaseData();
  d.sessions = {MakeSession(10, "active")};
  d.locks = {Held(10, BigintKey(1))};
  HoldHistory history;
  AnalyzeData(d, &history);

  PollData cheap = d;
  cheap.now = kNow + 5;
  cheap.inventory = false;
  cheap.locks.clear();
  const Result r = AnalyzeData(cheap, &history);
  EXPECT_FALSE(r.view.inventory);
  EXPECT_EQ(history.first_seen.size(), 1u);

  d.now = kNow + 10;
  EXPECT_DOUBLE_EQ(AnalyzeData(d, &history).view.held[0].seconds, 10);
}

AdvisoryLock HeldOutsideTransaction(int pid, AdvisoryKey key) {
  AdvisoryLock l = Held(pid, key);
  l.outside_transaction = true;
  return l;
}

// Scope comes from the lock read's proof (the holder idle across it), not from the holder's state
// at the activity read: 14 was idle there, then began a transaction and took its lock.
TEST(AnalyzeTest, ScopeIsSessionOnlyWhenHeldOutsideATransactionAcrossTheRead) {
  PollData d = BaseData();
  Session idle = MakeSession(10, "idle");
  idle.xact_start.reset();
  Session in_tx = MakeSession(11, "idle in transaction");
  Session hidden = MakeSession(12, "");
  hidden.xact_start.reset();
  Session entered = MakeSession(14, "idle");
  entered.xact_start.reset();
  d.sessions = {idle, in_tx, hidden, entered};
  d.locks = {HeldOutsideTransaction(10, BigintKey(1)), Held(11, BigintKey(2)),
             Held(12, BigintKey(3)), Held(13, BigintKey(4)),  // 13: not in pg_stat_activity
             Held(14, BigintKey(5))};
  const Result r = AnalyzeData(d);
  EXPECT_EQ(FindHeld(r.view, 10)->scope, "session");
  EXPECT_EQ(FindHeld(r.view, 11)->scope, "unknown");
  EXPECT_EQ(FindHeld(r.view, 12)->scope, "unknown");
  EXPECT_EQ(FindHeld(r.view, 13)->scope, "unknown");
  EXPECT_EQ(FindHeld(r.view, 14)->scope, "unknown");
  EXPECT_EQ(r.view.hidden_sessions, 1);
}

TEST(AnalyzeTest, HolderIdentityComesFromActivity) {
  PollData d = BaseData();
  Session s = MakeSession(10, "idle", "billing");
  s.usename = "bob";
  s.client_addr = "192.0.2.7";
  d.sessions = {s};
  d.locks = {Held(10, BigintKey(1))};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.held.size(), 1u);
  const HeldLock& h = r.view.held[0];
  EXPECT_EQ(h.datname, "appdb");
  EXPECT_EQ(h.holder.pid, 10);
  EXPECT_EQ(h.holder.application_name, "billing");
  EXPECT_EQ(h.holder.usename, "bob");
  EXPECT_EQ(h.holder.client_addr, "192.0.2.7");
  EXPECT_EQ(h.holder.state, "idle");
}

// ---- Idle in transaction --------------------------------------------------------------------

TEST(AnalyzeTest, IdleInTransactionHoldersAndWhatTheyHold) {
  PollData d = BaseData();
  Session advisory = MakeSession(10, "idle in transaction");
  advisory.state_change = kNow - 40;
  Session blocking = MakeSession(11, "idle in transaction (aborted)");
  blocking.state_change = kNow - 70;
  Session both = MakeSession(12, "idle in transaction");
  both.state_change = kNow - 5;
  Session nothing = MakeSession(13, "idle in transaction");
  nothing.state_change = kNow - 500;
  Session waiter = MakeSession(14, "active");
  waiter.blocked_by = {11, 12};
  d.sessions = {advisory, blocking, both, nothing, waiter};
  d.locks = {Held(10, BigintKey(1)), Held(12, BigintKey(2)), Waiting(14, BigintKey(2), kNow - 1)};

  const Result r = AnalyzeData(d);
  const DatabaseAggregate& agg = r.view.databases.at("appdb");
  EXPECT_EQ(agg.idle_in_transaction, 4);
  EXPECT_DOUBLE_EQ(agg.idle_in_transaction_max, 500);
  EXPECT_EQ(agg.idle_in_transaction_holders, 3);
  ASSERT_EQ(r.view.idle_holders.size(), 3u);
  EXPECT_EQ(FindIdle(r.view, 10)->holds, "advisory");
  EXPECT_DOUBLE_EQ(FindIdle(r.view, 10)->seconds, 40);
  EXPECT_EQ(FindIdle(r.view, 11)->holds, "blocking");
  EXPECT_EQ(FindIdle(r.view, 12)->holds, "advisory,blocking");
  EXPECT_EQ(FindIdle(r.view, 13), nullptr);
  // No timeout configured: nothing remains to count down.
  EXPECT_FALSE(FindIdle(r.view, 10)->remaining.has_value());
}

TEST(AnalyzeTest, IdleHolderRemainingUsesEffectiveTimeout) {
  PollData d = BaseData();
  Session s = MakeSession(10, "idle in transaction");
  s.state_change = kNow - 25;
  s.usesysid = 77;
  d.sessions = {s};
  d.locks = {Held(10, BigintKey(1))};
  d.settings = {{"idle_in_transaction_session_timeout", 600, "configuration file"}};
  d.overrides = {{"idle_in_transaction_session_timeout", 0, 77, "*", "alice", 60}};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.idle_holders.size(), 1u);
  ASSERT_TRUE(r.view.idle_holders[0].remaining.has_value());
  EXPECT_DOUBLE_EQ(*r.view.idle_holders[0].remaining, 35);

  // Overdue: negative.
  d.sessions[0].state_change = kNow - 61;
  EXPECT_DOUBLE_EQ(*AnalyzeData(d).view.idle_holders[0].remaining, -1);

  // Disabled by an override: no remaining time.
  d.overrides[0].seconds = 0;
  EXPECT_FALSE(AnalyzeData(d).view.idle_holders[0].remaining.has_value());
}

TEST(EffectiveTimeoutTest, PrecedenceDatabaseRoleThenRoleThenDatabaseThenAllThenServer) {
  const std::string name = "idle_in_transaction_session_timeout";
  const uint32_t db = 5, role = 7;
  const std::vector<ServerSetting> settings = {{name, 100, "default"},
                                               {"lock_timeout", 1, "default"}};
  std::vector<SettingOverride> overrides = {
      {name, 0, 0, "*", "*", 50},            // ALTER ROLE ALL SET
      {name, db, 0, "app", "*", 40},         // ALTER DATABASE app SET
      {name, 0, role, "*", "alice", 30},     // ALTER ROLE alice SET
      {name, db, role, "app", "alice", 20},  // ALTER ROLE alice IN DATABASE app SET
      {name, 6, role, "other", "alice", 1},  // another database
      {name, db, 8, "app", "bob", 2},        // another role
      {"idle_session_timeout", db, role, "app", "alice", 3},
  };
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, db, role, settings, overrides), 20);
  overrides.erase(overrides.begin() + 3);
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, db, role, settings, overrides), 30);
  overrides.erase(overrides.begin() + 2);
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, db, role, settings, overrides), 40);
  overrides.erase(overrides.begin() + 1);
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, db, role, settings, overrides), 50);
  overrides.erase(overrides.begin());
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, db, role, settings, overrides), 100);
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, db, role, {}, overrides), 0);
  EXPECT_DOUBLE_EQ(EffectiveTimeout("lock_timeout", db, role, settings, overrides), 1);
}

TEST(EffectiveTimeoutTest, OverrideOrderDoesNotMatter) {
  const std::string name = "idle_session_timeout";
  const std::vector<SettingOverride> overrides = {
      {name, 5, 7, "app", "alice", 20},
      {name, 0, 0, "*", "*", 50},
      {name, 0, 7, "*", "alice", 30},
  };
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, 5, 7, {}, overrides), 20);
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, 6, 7, {}, overrides), 30);
  EXPECT_DOUBLE_EQ(EffectiveTimeout(name, 6, 8, {}, overrides), 50);
}

// ---- Clients --------------------------------------------------------------------------------

TEST(AnalyzeTest, PoolOfIdleLockHoldersIsStarved) {
  PollData d = BaseData();
  for (int pid = 10; pid < 14; ++pid) {
    Session s = MakeSession(pid, "idle", "pool");
    s.xact_start.reset();
    d.sessions.push_back(s);
    d.locks.push_back(Held(pid, BigintKey(pid)));
  }
  // Another client: one session runs a statement while holding, one is idle without a lock.
  d.sessions.push_back(MakeSession(20, "active", "cron"));
  d.sessions.push_back(MakeSession(21, "idle", "cron"));
  d.locks.push_back(Held(20, BigintKey(99)));

  const Result r = AnalyzeData(d);
  ASSERT_EQ(Clients(r.view).size(), 2u);
  // Most idle lock holders first.
  const ClientRow& pool = Clients(r.view)[0];
  EXPECT_EQ(pool.key.application_name, "pool");
  EXPECT_EQ(pool.key.datname, "appdb");
  EXPECT_EQ(pool.key.client_addr, "10.0.0.1");
  EXPECT_EQ(pool.key.usename, "alice");
  EXPECT_EQ(pool.total, 4);
  EXPECT_EQ(pool.idle_lock_holders, 4);
  EXPECT_EQ(pool.sessions_by_state, (std::map<std::string, int>{{"idle", 4}}));
  const ClientRow& cron = Clients(r.view)[1];
  EXPECT_EQ(cron.key.application_name, "cron");
  EXPECT_EQ(cron.total, 2);
  EXPECT_EQ(cron.idle_lock_holders, 0);
  EXPECT_EQ(cron.sessions_by_state, (std::map<std::string, int>{{"active", 1}, {"idle", 1}}));
}

TEST(AnalyzeTest, ClientsSplitByAddressUserAndDatabase) {
  PollData d = BaseData();
  Session a = MakeSession(10, "idle");
  Session b = MakeSession(11, "idle");
  b.client_addr = "10.0.0.2";
  Session c = MakeSession(12, "idle");
  c.usename = "bob";
  Session e = MakeSession(13, "");  // same client as a, state hidden
  Session f = MakeSession(14, "idle");
  f.datid = kAppDb + 1;
  f.datname = "otherdb";
  d.sessions = {a, b, c, e, f};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(Clients(r.view).size(), 4u);
  int unknown_states = 0;
  for (const ClientRow& row : Clients(r.view)) {
    const auto it = row.sessions_by_state.find("unknown");
    if (it != row.sessions_by_state.end()) unknown_states += it->second;
  }
  EXPECT_EQ(unknown_states, 1);
}

// ---- top_n ----------------------------------------------------------------------------------

TEST(AnalyzeTest, TopNKeepsTheMostSevereAndCountsTheRest) {
  PollData d = BaseData();
  const double ages[] = {10, 500, 30, 400, 20};
  for (int i = 0; i < 5; ++i) {
    Session s = MakeSession(100 + i, "idle", "app" + std::to_string(i));
    s.xact_start.reset();
    s.state_change = kNow - ages[i];
    d.sessions.push_back(s);
    d.locks.push_back(Held(100 + i, BigintKey(i)));
  }
  // Three waiters behind pid 100 with different waits.
  const double waits[] = {5, 50, 25};
  for (int i = 0; i < 3; ++i) {
    Session w = MakeSession(200 + i, "active");
    w.blocked_by = {100};
    d.sessions.push_back(w);
    d.locks.push_back(Waiting(200 + i, BigintKey(0), kNow - waits[i]));
  }

  const Result r = AnalyzeData(d, nullptr, /*top_n=*/2);
  ASSERT_EQ(r.view.held.size(), 2u);
  EXPECT_DOUBLE_EQ(r.view.held[0].seconds, 500);
  EXPECT_DOUBLE_EQ(r.view.held[1].seconds, 400);
  EXPECT_EQ(r.dropped.at("pglock_advisory_lock_held_seconds"), 3);

  ASSERT_EQ(r.view.waits.size(), 2u);
  EXPECT_DOUBLE_EQ(r.view.waits[0].seconds, 50);
  EXPECT_DOUBLE_EQ(r.view.waits[1].seconds, 25);
  EXPECT_EQ(r.dropped.at("pglock_advisory_lock_wait_seconds"), 1);

  EXPECT_EQ(Clients(r.view).size(), 2u);
  EXPECT_EQ(r.dropped.at("pglock_client_sessions"), 4);  // 5 holder clients + 1 waiter client
  EXPECT_EQ(r.dropped.at("pglock_idle_in_transaction_holder_seconds"), 0);

  // Aggregates stay exact.
  const DatabaseAggregate& agg = r.view.databases.at("appdb");
  EXPECT_EQ(agg.advisory_locks_held, 5);
  EXPECT_EQ(agg.advisory_waiters, 3);
  EXPECT_DOUBLE_EQ(agg.advisory_wait_max, 50);
}

TEST(AnalyzeTest, TopNOfIdleHoldersPutsLeastTimeLeftFirst) {
  PollData d = BaseData();
  d.settings = {{"idle_in_transaction_session_timeout", 0, "default"}};
  // 10: no timeout (role 1), idle longest; 11: 100s timeout, 90 left; 12: 30s timeout, 5 left.
  Session a = MakeSession(10, "idle in transaction");
  a.usesysid = 1;
  a.state_change = kNow - 1000;
  Session b = MakeSession(11, "idle in transaction");
  b.usesysid = 2;
  b.state_change = kNow - 10;
  Session c = MakeSession(12, "idle in transaction");
  c.usesysid = 3;
  c.state_change = kNow - 25;
  d.sessions = {a, b, c};
  d.overrides = {{"idle_in_transaction_session_timeout", 0, 2, "*", "b", 100},
                 {"idle_in_transaction_session_timeout", 0, 3, "*", "c", 30}};
  d.locks = {Held(10, BigintKey(1)), Held(11, BigintKey(2)), Held(12, BigintKey(3))};

  const Result r = AnalyzeData(d, nullptr, /*top_n=*/2);
  ASSERT_EQ(r.view.idle_holders.size(), 2u);
  EXPECT_EQ(r.view.idle_holders[0].holder.pid, 12);
  EXPECT_DOUBLE_EQ(*r.view.idle_holders[0].remaining, 5);
  EXPECT_EQ(r.view.idle_holders[1].holder.pid, 11);
  EXPECT_EQ(r.dropped.at("pglock_idle_in_transaction_holder_seconds"), 1);
  EXPECT_EQ(r.view.databases.at("appdb").idle_in_transaction_holders, 3);
  EXPECT_DOUBLE_EQ(r.view.databases.at("appdb").idle_in_transaction_max, 1000);
}

TEST(KeepTopNTest, NothingDroppedUnderTheCap) {
  std::vector<int> rows = {3, 1, 2};
  EXPECT_EQ(KeepTopN(&rows, 5, [](int a, int b) { return a > b; }), 0);
  EXPECT_EQ(rows, (std::vector<int>{3, 2, 1}));
  EXPECT_EQ(KeepTopN(&rows, 1, [](int a, int b) { return a > b; }), 2);
  EXPECT_EQ(rows, (std::vector<int>{3}));
}

// ---- Leases ---------------------------------------------------------------------------------

LeaseTableData LeaseTable(const std::string& table, double now, std::vector<LeaseRow> rows) {
  LeaseTableData t;
  t.table = table;
  t.ok = true;
  t.now = now;
  t.total = static_cast<int64_t>(rows.size());
  for (const LeaseRow& r : rows) (r.expires_at > now ? t.held : t.expired) += 1;
  t.rows = std::move(rows);
  return t;
}

TEST(AnalyzeTest, LeaseViewsUseTheTablesClock) {
  PollData d = BaseData();
  const double table_now = kNow + 2;  // the table's own now(), not the poll's
  d.leases = {LeaseTable("public.leases", table_now,
                         {{"reindex", "web-1:4242:abc", table_now - 100, table_now + 60},
                          {"vacuum", "web-2:7:x", table_now - 400, table_now - 10}})};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.leases.size(), 1u);
  const LeaseTableView& t = r.view.leases[0];
  EXPECT_EQ(t.table, "public.leases");
  EXPECT_TRUE(t.ok);
  EXPECT_EQ(t.held, 1);
  EXPECT_EQ(t.expired, 1);
  EXPECT_TRUE(t.holder_labels.empty());
  ASSERT_EQ(t.leases.size(), 2u);
  EXPECT_EQ(t.leases[0].lease, "reindex");
  EXPECT_EQ(t.leases[0].holder, "web-1:4242:abc");
  EXPECT_EQ(t.leases[0].holder_parts, nullptr);
  EXPECT_TRUE(t.leases[0].held);
  EXPECT_DOUBLE_EQ(t.leases[0].age, 100);
  EXPECT_DOUBLE_EQ(t.leases[0].expires_in.value_or(0), 60);
  EXPECT_FALSE(t.leases[1].held);
  EXPECT_DOUBLE_EQ(t.leases[1].age, 400);
  EXPECT_DOUBLE_EQ(t.leases[1].expires_in.value_or(0), -10);
}

TEST(AnalyzeTest, LeaseExpiringExactlyNowIsNotHeld) {
  PollData d = BaseData();
  d.leases = {LeaseTable("t", kNow, {{"a", "h", kNow - 5, kNow}})};
  EXPECT_FALSE(AnalyzeData(d).view.leases[0].leases[0].held);
}

TEST(AnalyzeTest, HolderPatternSplitsTheHolder) {
  PollData d = BaseData();
  d.leases = {LeaseTable("public.leases", kNow,
                         {{"reindex", "web-1:4242:d1f0", kNow - 1, kNow + 1},
                          {"vacuum", "no colons here", kNow - 1, kNow + 1}}),
              LeaseTable("other", kNow, {{"x", "web-1:1:", kNow - 1, kNow + 1}})};
  LeaseTableRules rules;
  rules.table = "public.leases";
  rules.holder_labels = {"holder_host", "holder_pid"};
  rules.matcher = std::make_shared<HolderMatcher>("^([^:]+):([0-9]+):");
  const Result r = AnalyzeData(d, nullptr, 20, nullptr, {rules});
  ASSERT_EQ(r.view.leases.size(), 2u);
  const LeaseTableView& t = r.view.leases[0];
  EXPECT_EQ(t.holder_labels, rules.holder_labels);
  ASSERT_NE(t.leases[0].holder_parts, nullptr);
  EXPECT_EQ(*t.leases[0].holder_parts, (std::vector<std::string>{"web-1", "4242"}));
  // A holder the pattern does not match has none (each label is rendered "").
  EXPECT_EQ(t.leases[1].holder_parts, nullptr);
  EXPECT_EQ(t.leases[1].holder, "no colons here");
  // Rules apply to their own table only.
  EXPECT_TRUE(r.view.leases[1].holder_labels.empty());
  EXPECT_EQ(r.view.leases[1].leases[0].holder_parts, nullptr);
}

TEST(AnalyzeTest, FailedLeaseTableIsMarkedNotOk) {
  PollData d = BaseData();
  LeaseTableData t;
  t.table = "missing";
  t.ok = false;
  t.error = "relation does not exist";
  d.leases = {t};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.leases.size(), 1u);
  EXPECT_FALSE(r.view.leases[0].ok);
  EXPECT_TRUE(r.view.leases[0].leases.empty());
}

// A match's groups as a value to compare (nullopt: no match).
std::optional<std::vector<std::string>> Groups(const HolderMatcher::Parts& parts) {
  if (parts == nullptr) return std::nullopt;
  return *parts;
}

TEST(HolderMatcherTest, GroupsAndOptionalGroups) {
  HolderMatcher m("^([a-z]+)(-([0-9]+))?$");
  ASSERT_TRUE(m.valid());
  EXPECT_EQ(m.groups(), 3u);
  EXPECT_EQ(Groups(m.Match("web-12")), (std::vector<std::string>{"web", "-12", "12"}));
  EXPECT_EQ(Groups(m.Match("web")), (std::vector<std::string>{"web", "", ""}));
  EXPECT_EQ(Groups(m.Match("WEB")), std::nullopt);
}

TEST(HolderMatcherTest, EmptyOrInvalidPatternMatchesNothing) {
  HolderMatcher empty("");
  EXPECT_FALSE(empty.valid());
  EXPECT_EQ(Groups(empty.Match("anything")), std::nullopt);
  HolderMatcher invalid("([");
  EXPECT_FALSE(invalid.valid());
  EXPECT_EQ(invalid.groups(), 0u);
  EXPECT_EQ(Groups(invalid.Match("([")), std::nullopt);
}

TEST(HolderMatcherTest, InputIsCappedAndCutAtNul) {
  HolderMatcher m("^(a*)$");
  // Longer than kMaxInput: only the first kMaxInput bytes are matched.
  const std::string huge(HolderMatcher::kMaxInput + 100, 'a');
  const auto parts = m.Match(huge + "b");
  ASSERT_NE(parts, nullptr);
  EXPECT_EQ((*parts)[0].size(), HolderMatcher::kMaxInput);
  const auto cut = m.Match(std::string("aa\0bb", 5));
  ASSERT_NE(cut, nullptr);
  EXPECT_EQ((*cut)[0], "aa");
}

TEST(HolderMatcherTest, AnswersFromItsMemoAlikeAndStaysWithinItsBound) {
  HolderMatcher m("^([^:]+):([0-9]+):");
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(Groups(m.Match("web-1:42:x")), (std::vector<std::string>{"web-1", "42"}));
    EXPECT_EQ(Groups(m.Match("nope")), std::nullopt);
  }
  const size_t two = m.memo_bytes();
  EXPECT_GT(two, 0u);
  EXPECT_EQ(Groups(m.Match("web-1:42:x")), (std::vector<std::string>{"web-1", "42"}));
  EXPECT_EQ(m.memo_bytes(), two);  // asked again: nothing added
  // A hit is the memo's own answer, shared, not a copy of it.
  EXPECT_EQ(m.Match("web-1:42:x").get(), m.Match("web-1:42:x").get());
  // Many more distinct holders than the memo keeps, each as long as the matcher reads: every
  // answer still right, the memo never past its bound, and started again when full.
  size_t last = m.memo_bytes();
  bool restarted = false;
  for (int i = 0; i < 1000; ++i) {
    const std::string host = "h" + std::to_string(i) + std::string(900, 'x');
    const auto parts = m.Match(host + ":" + std::to_string(i) + ":");
    ASSERT_NE(parts, nullptr) << i;
    EXPECT_EQ((*parts)[0], host);
    EXPECT_EQ((*parts)[1], std::to_string(i));
    EXPECT_LE(m.memo_bytes(), HolderMatcher::kMaxMemoBytes);
    restarted = restarted || m.memo_bytes() < last;
    last = m.memo_bytes();
  }
  EXPECT_TRUE(restarted);
  EXPECT_EQ(Groups(m.Match("web-1:42:x")), (std::vector<std::string>{"web-1", "42"}));
}

// ---- Poolers --------------------------------------------------------------------------------

TEST(AnalyzeTest, PoolerSessionLocksCountOnlyLocksHeldOutsideATransactionAcrossTheRead) {
  PollData d = BaseData();
  Session outside = MakeSession(100, "idle");
  outside.xact_start.reset();
  Session inside = MakeSession(101, "idle in transaction");
  Session other = MakeSession(102, "idle");
  other.xact_start.reset();
  Session entered =
      MakeSession(103, "idle");  // idle at the activity read, not across the lock read
  entered.xact_start.reset();
  Session direct = MakeSession(200, "idle");
  direct.xact_start.reset();
  d.sessions = {outside, inside, other, entered, direct};
  d.locks = {HeldOutsideTransaction(100, BigintKey(1)),
             HeldOutsideTransaction(100, BigintKey(2)),
             Held(101, BigintKey(3)),
             Waiting(102, BigintKey(1), kNow - 1),
             Held(103, BigintKey(5)),
             HeldOutsideTransaction(200, BigintKey(4))};
  PoolerData p;
  p.name = "bouncer";
  p.ok = true;
  p.servers = {
      {"app", "alice", 100}, {"app", "alice", 101}, {"reports", "bob", 102}, {"app", "alice", 103}};
  d.poolers = {p};

  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.poolers.size(), 1u);
  const PoolerView& v = r.view.poolers[0];
  EXPECT_EQ(v.name, "bouncer");
  EXPECT_TRUE(v.ok);
  using Key = std::pair<std::string, std::string>;
  EXPECT_EQ(v.session_locks,
            (std::map<Key, int64_t>{{{"app", "alice"}, 2}, {{"reports", "bob"}, 0}}));
}

// ---- Waits of every lock type: the wait graph's edge cases ------------------------------------

LockWaitRow PendingRelation(int pid, const std::string& mode, double waitstart) {
  LockWaitRow r;
  r.pid = pid;
  r.locktype = "relation";
  r.mode = mode;
  r.datid = kAppDb;
  r.relation = "public.t";
  r.locktag = "relation:16384:16500";
  r.waitstart = waitstart;
  return r;
}

Session WaitingSession(int pid, std::vector<int> blocked_by) {
  Session s = MakeSession(pid, "active");
  s.waiting_on_lock = true;
  s.blocked_by = std::move(blocked_by);
  return s;
}

TEST(LockWaitsTest, DeadlockCycleHasNoRootAndEnds) {
  PollData d = BaseData();
  d.sessions = {WaitingSession(1, {2}), WaitingSession(2, {1})};
  d.lock_waits = {PendingRelation(1, "AccessExclusiveLock", kNow - 2),
                  PendingRelation(2, "AccessExclusiveLock", kNow - 1)};
  d.lock_waits[1].locktag = "relation:16384:16501";  // each waits for what the other holds
  const Result r = AnalyzeData(d);
  EXPECT_EQ(r.view.lock_waits.size(), 2u);
  EXPECT_TRUE(r.view.blocking_roots.empty());
  EXPECT_EQ(r.view.databases.at("appdb").lock_queue_depth_max, 2);
  EXPECT_EQ((r.view.lock_waits_by_type.at({"appdb", "relation"}).waiters), 2);
}

TEST(LockWaitsTest, CycleBehindARootCountsEachSessionOnce) {
  PollData d = BaseData();
  d.sessions = {WaitingSession(1, {2}), WaitingSession(2, {1, 100}),
                MakeSession(100, "idle in transaction")};
  d.lock_waits = {PendingRelation(1, "AccessExclusiveLock", kNow - 2),
                  PendingRelation(2, "AccessExclusiveLock", kNow - 1)};
  d.lock_waits[1].locktag = "relation:16384:16501";
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.blocking_roots.size(), 1u);
  EXPECT_EQ(r.view.blocking_roots[0].blocked_pids, (std::vector<int>{1, 2}));
  EXPECT_EQ(r.view.databases.at("appdb").lock_queue_depth_max, 2);
}

TEST(LockWaitsTest, BackgroundWorkerBlockerShowsItsBackendType) {
  PollData d = BaseData();
  d.sessions = {WaitingSession(1, {500})};
  d.lock_waits = {PendingRelation(1, "AccessExclusiveLock", kNow - 3)};
  LockParty av;
  av.pid = 500;
  av.backend_type = "autovacuum worker";
  av.datid = kAppDb;
  av.state = "active";
  av.since = kNow - 40;
  d.lock_parties = {av};
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.blocking_roots.size(), 1u);
  const BlockingRoot& root = r.view.blocking_roots[0];
  EXPECT_EQ(root.root.id.pid, 500);
  EXPECT_EQ(root.root.id.application_name, "autovacuum worker");
  EXPECT_EQ(root.root.backend_type, "autovacuum worker");
  EXPECT_DOUBLE_EQ(root.state_seconds, 40);
  EXPECT_EQ(root.blocked_pids, std::vector<int>{1});
  ASSERT_EQ(r.view.lock_waits.size(), 1u);
  EXPECT_DOUBLE_EQ(r.view.lock_waits[0].seconds, 3);
}

TEST(LockWaitsTest, WaitingParallelWorkerCountsAsItsLeader) {
  PollData d = BaseData();
  d.sessions = {MakeSession(10, "active", "report"), MakeSession(20, "idle in transaction")};
  for (const int pid : {11, 12}) {  // two workers of leader 10 wait for the same table
    LockParty w;
    w.pid = pid;
    w.leader_pid = 10;
    w.backend_type = "parallel worker";
    w.datid = kAppDb;
    w.waiting_on_lock = true;
    w.blocked_by = {20};
    d.lock_parties.push_back(w);
    d.lock_waits.push_back(PendingRelation(pid, "AccessShareLock", kNow - 5));
  }
  const Result r = AnalyzeData(d);
  EXPECT_EQ((r.view.lock_waits_by_type.at({"appdb", "relation"}).waiters), 1);
  ASSERT_EQ(r.view.lock_waits.size(), 1u);
  EXPECT_EQ(r.view.lock_waits[0].waiter.id.pid, 10);
  EXPECT_EQ(r.view.lock_waits[0].waiter.id.application_name, "report");
  EXPECT_EQ(r.view.lock_waits[0].blocker.id.pid, 20);
}

TEST(LockWaitsTest, PreparedBlockerIsTheOneWhoseTransactionIsWaitedFor) {
  PollData d = BaseData();
  d.sessions = {WaitingSession(1, {0})};
  LockWaitRow row;
  row.pid = 1;
  row.locktype = "transactionid";
  row.mode = "ShareLock";
  row.transactionid = "778";
  row.locktag = "transactionid:778";
  row.waitstart = kNow - 9;
  d.lock_waits = {row};
  for (const auto& [gid, xid] : {std::pair{"first", "777"}, std::pair{"second", "778"}}) {
    LockParty p;
    p.backend_type = "prepared transaction";
    p.datid = kAppDb;
    p.usename = "alice";
    p.state = "prepared";
    p.since = kNow - 100;
    p.gid = gid;
    p.xid = xid;
    d.lock_parties.push_back(p);
  }
  const Result r = AnalyzeData(d);
  ASSERT_EQ(r.view.blocking_roots.size(), 1u);
  EXPECT_EQ(r.view.blocking_roots[0].root.gid, "second");
  EXPECT_EQ(r.view.blocking_roots[0].root.id.pid, 0);
  EXPECT_EQ(r.view.blocking_roots[0].root.id.state, "prepared");
  EXPECT_DOUBLE_EQ(r.view.blocking_roots[0].state_seconds, 100);
  // A relation wait cannot say which of two prepared transactions holds it: an unnamed one.
  d.lock_waits = {PendingRelation(1, "AccessShareLock", kNow - 1)};
  const Result unnamed = AnalyzeData(d);
  ASSERT_EQ(unnamed.view.blocking_roots.size(), 1u);
  EXPECT_EQ(unnamed.view.blocking_roots[0].root.gid, "");
  EXPECT_EQ(unnamed.view.blocking_roots[0].root.datname, "appdb");
}

TEST(LockWaitsTest, EdgesAreCappedAtTopNLongestFirst) {
  PollData d = BaseData();
  d.sessions = {MakeSession(100, "idle in transaction")};
  for (int pid = 1; pid <= 5; ++pid) {
    d.sessions.push_back(WaitingSession(pid, {100}));
    d.lock_waits.push_back(PendingRelation(pid, "RowExclusiveLock", kNow - pid));
  }
  const Result r = AnalyzeData(d, nullptr, 2);
  ASSERT_EQ(r.view.lock_waits.size(), 2u);
  EXPECT_EQ(r.view.lock_waits[0].waiter.id.pid, 5);
  EXPECT_EQ(r.view.lock_waits[1].waiter.id.pid, 4);
  EXPECT_EQ(r.dropped.at("pglock_lock_wait_seconds"), 3);
  EXPECT_EQ((r.view.lock_waits_by_type.at({"appdb", "relation"}).waiters), 5);  // exact
  EXPECT_EQ(r.view.blocking_roots.at(0).blocked_pids.size(), 5u);
}

}  // namespace
}  // namespace pglock
