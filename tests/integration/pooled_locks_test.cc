// Which advisory locks are judged session locks, against a real PostgreSQL behind a real PgBouncer
// in transaction mode (exporter/events/pooled_locks.h, the scope label of held locks): ordinary
// transaction-lock traffic on hot keys is never a session lock nor an inheritance, even when a
// connection idle at the activity read takes a transaction lock before pg_locks is read; a session
// lock leaked through the pool still is (with the fidelity test, which keeps it counted under
// traffic). PGLOCK_POOLED_SOAK_SECONDS runs the long measurement: hot-key traffic with a real leak
// injected every two minutes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <set>
#include <thread>

#include "exporter/http/oncall.h"
#include "exporter/http/page_text.h"
#include "exporter/poll/poller.h"
#include "exporter/snapshot/verdict.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/pgbouncer.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::Sample;
using testing::Sum;
using testing::TestPoll;
using testing::TestSession;
using testing::Value;
using testing::WaitFor;

using Clock = std::chrono::steady_clock;

const std::vector<int> kHotKeys = {5101, 5102};

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TargetConfig Target(const testing::Pgbouncer& bouncer) {
  TargetConfig t;
  t.name = "pooled";
  t.dsn = Pg().Dsn();
  t.poolers = {{.name = "pgb", .admin_dsn = bouncer.Dsn("pgbouncer")}};
  return t;
}

// Until *stop: transactions through the pool that each take one of the hot keys with
// pg_advisory_xact_lock and commit after hold_min..hold_max ms (0: a one-statement transaction
// that holds the key for a few ms, back to back).
void HotKeyClient(const std::string& dsn, int seed, int hold_min, int hold_max,
                  const std::atomic<bool>* stop, std::atomic<int>* transactions) {
  TestSession s(dsn);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> hold(hold_min, hold_max);
  std::uniform_int_distribution<size_t> key(0, kHotKeys.size() - 1);
  while (!stop->load()) {
    const std::string k = std::to_string(kHotKeys[key(rng)]);
    if (hold_max == 0) {
      s.Query("SELECT pg_advisory_xact_lock(" + k + "), pg_sleep(0.004)");
    } else {
      s.Query("BEGIN");
      s.Query("SELECT pg_advisory_xact_lock(" + k + ")");
      s.Query("SELECT pg_sleep(" + std::to_string(hold(rng) / 1000.0) + ")");
      s.Query("COMMIT");
    }
    ++*transactions;
  }
}

// What each published snapshot showed, counted by the sampler.
struct Tally {
  int samples = 0;
  int failed_polls = 0;
  int gauge_missing = 0;      // pglock_pooled_session_advisory_locks absent: not a zero
  int hot_pooled = 0;         // samples with a hot key counted as a pooled session lock
  int hot_session_scope = 0;  // held hot keys labelled scope="session"
  // Held hot keys whose holder was idle at the activity read: only transaction locks are taken
  // here, so each was taken between that read and the pg_locks read, what a rule judging by the
  // first read alone took for a session lock.
  int taken_between_reads = 0;
  double inherited_max = 0;  // pglock_pooled_session_lock_inherited_total
  std::set<std::string> leaks_counted;
  int leak_samples = 0;  // samples that counted at least one leaked (non-hot) lock
  // Samples whose poll proved a leaked lock session-scoped again (its holder idle across the
  // read of pg_locks: scope="session"); the others counted it on the earlier proof alone.
  int leak_reproved = 0;

  void Add(const Tally& o) {
    samples += o.samples;
    failed_polls += o.failed_polls;
    gauge_missing += o.gauge_missing;
    hot_pooled += o.hot_pooled;
    hot_session_scope += o.hot_session_scope;
    taken_between_reads += o.taken_between_reads;
    inherited_max = std::max(inherited_max, o.inherited_max);
    leaks_counted.insert(o.leaks_counted.begin(), o.leaks_counted.end());
    leak_samples += o.leak_samples;
    leak_reproved += o.leak_reproved;
  }
};

bool IsHotKey(const std::string& lock) {
  for (int k : kHotKeys) {
    if (lock == std::to_string(k)) return true;
  }
  return false;
}

void Count(const TargetSnapshot& snap, Tally* t) {
  if (!snap.up || !snap.view) {
    ++t->failed_polls;
    return;
  }
  ++t->samples;
  const auto samples =
      testing::ParseSamples(testing::Serialize({std::make_shared<TargetSnapshot>(snap)}));
  if (!Value(samples, "pglock_pooled_session_advisory_locks", {{"pooler", "pgb"}})) {
    ++t->gauge_missing;
  }
  t->inherited_max =
      std::max(t->inherited_max,
               Sum(samples, "pglock_pooled_session_lock_inherited_total", {{"pooler", "pgb"}}));
  bool hot = false;
  bool leak = false;
  for (const PoolerView& p : snap.view->poolers) {
    for (const PooledLockRow& r : p.locks) {
      if (IsHotKey(r.lock)) {
        hot = true;
      } else {
        leak = true;
        t->leaks_counted.insert(r.lock);
      }
    }
  }
  t->hot_pooled += hot ? 1 : 0;
  t->leak_samples += leak ? 1 : 0;
  bool reproved = false;
  for (const HeldLock& h : snap.view->held) {
    if (!IsHotKey(h.lock)) {
      reproved = reproved || h.scope == "session";
      continue;
    }
    if (h.scope == "session") ++t->hot_session_scope;
    if (h.holder.state == "idle") ++t->taken_between_reads;
  }
  t->leak_reproved += reproved ? 1 : 0;
}

// Pooled-lock inheritance events of the hot keys in the event log.
int HotKeyInheritances(const TargetSnapshot& snap) {
  int n = 0;
  if (!snap.events) return 0;
  for (const auto& e : *snap.events) {
    if (e->kind == EventKind::kPooledLockInherited && IsHotKey(e->lock)) ++n;
  }
  return n;
}

// No hot key was taken for a session lock, pooled or not, nor inherited; the pooled gauge was
// there in every sample (absent is not zero).
void ExpectNoHotKeySessionLock(const Tally& t, int inherited_events) {
  EXPECT_EQ(t.gauge_missing, 0);
  EXPECT_EQ(t.hot_pooled, 0);
  EXPECT_EQ(t.hot_session_scope, 0);
  EXPECT_EQ(t.inherited_max, 0);
  EXPECT_EQ(inherited_events, 0);
}

// Samples every snapshot the poller publishes until `until`, calling `tick` between samples.
Tally SampleUntil(
    const Poller& poller, Clock::time_point until, const std::function<void()>& tick = [] {}) {
  Tally t;
  auto last = poller.Latest();
  while (Clock::now() < until) {
    SleepMs(20);
    tick();
    const auto snap = poller.Latest();
    if (snap == last) continue;
    last = snap;
    Count(*snap, &t);
  }
  return t;
}

// `n` HotKeyClients through `bouncer`, each its own application, until Stop() or destruction.
class HotKeyTraffic {
 public:
  HotKeyTraffic(const testing::Pgbouncer& bouncer, int n, int hold_min, int hold_max) {
    for (int i = 0; i < n; ++i) {
      const std::string dsn =
          bouncer.Dsn("postgres") + " application_name=hot-client-" + std::to_string(i);
      clients_.emplace_back(HotKeyClient, dsn, i + 1, hold_min, hold_max, &stop_, &transactions_);
    }
  }
  ~HotKeyTraffic() { Stop(); }
  HotKeyTraffic(const HotKeyTraffic&) = delete;
  HotKeyTraffic& operator=(const HotKeyTraffic&) = delete;

  void Stop() {
    stop_ = true;
    for (auto& c : clients_) {
      if (c.joinable()) c.join();
    }
  }
  int transactions() const { return transactions_.load(); }

 private:
  std::atomic<bool> stop_ = false;
  std::atomic<int> transactions_ = 0;
  std::vector<std::thread> clients_;
};

TEST(PooledLocks, TransactionLocksOnHotKeysAreNeverSessionLocks) {
  testing::Pgbouncer bouncer({.pool_mode = "transaction", .default_pool_size = 2});
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  Poller poller(Target(bouncer), TestPoll({.interval_ms = 1000, .timeout_ms = 10000}));
  // The traffic first: before the pool's first server connection there is no database and user
  // to count pooled locks for, and the gauge is rightly absent.
  HotKeyTraffic traffic(bouncer, 4, 20, 200);
  ASSERT_TRUE(WaitFor(10, [&] { return traffic.transactions() > 0; }));
  poller.Start();
  const Tally t = SampleUntil(poller, Clock::now() + std::chrono::seconds(62));
  traffic.Stop();
  const int inherited_events = HotKeyInheritances(*poller.Latest());
  poller.Stop();
  std::cout << "hot-key transaction locks through a pool of 2: " << traffic.transactions()
            << " transactions, " << t.samples << " samples, " << t.hot_pooled
            << " with a pooled session lock, " << t.hot_session_scope << " scope=session, "
            << t.taken_between_reads << " taken between the reads, inherited_total "
            << t.inherited_max << "\n";
  EXPECT_GE(t.samples, 50);
  EXPECT_GE(traffic.transactions(), 400);
  ExpectNoHotKeySessionLock(t, inherited_events);
}

// One-statement transactions back to back: a connection idle at the activity read often takes
// its next transaction lock before pg_locks is read. The test polls fast until that happened
// three times (at most 180 s: on a loaded machine under AddressSanitizer it came once in 90 s),
// and no such lock may be judged a session lock; at least once, or nothing was tested.
TEST(PooledLocks, TransactionLockTakenBetweenTheReadsIsNotASessionLock) {
  testing::Pgbouncer bouncer({.pool_mode = "transaction", .default_pool_size = 2});
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  Poller poller(Target(bouncer), TestPoll({.interval_ms = 100, .timeout_ms = 10000}));
  // The traffic first: before the pool's first server connection there is no database and user
  // to count pooled locks for, and the gauge is rightly absent.
  HotKeyTraffic traffic(bouncer, 4, 0, 0);
  ASSERT_TRUE(WaitFor(10, [&] { return traffic.transactions() > 0; }));
  poller.Start();
  Tally t;
  const auto deadline = Clock::now() + std::chrono::seconds(180);
  while (Clock::now() < deadline && (t.taken_between_reads < 3 || t.samples < 100)) {
    t.Add(SampleUntil(poller, Clock::now() + std::chrono::seconds(5)));
  }
  traffic.Stop();
  const int inherited_events = HotKeyInheritances(*poller.Latest());
  poller.Stop();
  std::cout << "one-statement transaction locks: " << traffic.transactions() << " transactions, "
            << t.samples << " samples, " << t.taken_between_reads
            << " locks taken by a connection idle at the activity read, " << t.hot_pooled
            << " samples with a pooled session lock, " << t.hot_session_scope << " scope=session\n";
  EXPECT_GE(t.taken_between_reads, 1) << "the race never happened: nothing was tested";
  ExpectNoHotKeySessionLock(t, inherited_events);
}

// Whether the poller's latest snapshot counts `key` as a pooled session lock.
bool LeakCounted(const Poller& poller, const std::string& key) {
  const auto snap = poller.Latest();
  if (!snap || !snap->view) return false;
  for (const PoolerView& p : snap->view->poolers) {
    for (const PooledLockRow& r : p.locks) {
      if (r.lock == key) return true;
    }
  }
  return false;
}

// Once the exporter counts the leak of `key` on server backend `pid` (or after 30 s), a new
// client of the pool is placed on that connection (tried at most 400 times) and holds it in a
// transaction for 2.5 s: the client that inherits the lock. *placed counts placements;
// *inheritances those that follow the count: only a lock proven session-scoped is inherited (one
// placed after 30 s without a count frees the connection for the proof, but inherits nothing).
void PlaceHeir(const testing::Pgbouncer& bouncer, const Poller& poller, const std::string& key,
               int pid, std::atomic<int>* placed, std::atomic<int>* inheritances) {
  const bool counted = WaitFor(30, [&] { return LeakCounted(poller, key); });
  TestSession heir(bouncer.Dsn("postgres") + " application_name=heir-" + key);
  for (int attempt = 0; attempt < 400; ++attempt) {
    heir.Query("BEGIN");
    if (heir.Query("SELECT pg_backend_pid()") == std::to_string(pid)) {
      ++*placed;
      if (counted) ++*inheritances;
      SleepMs(2500);
      heir.Query("COMMIT");
      return;
    }
    heir.Query("ROLLBACK");
    SleepMs(20);
  }
}

// A session lock leaked through the pool is still proven, counted and inherited while hot-key
// transaction traffic flows through the same pool. With PGLOCK_POOLED_SOAK_SECONDS the run lasts
// that long with a new leak every two minutes; else one leak in 40 s.
// The leaker can get the server connection a hot-key client has just released, and PgBouncer
// gives that client back the connection released last: the leaked one. That client then keeps
// it in a transaction at every poll, so the leak is proven only once its heir, placed after 30 s
// without a count, commits and leaves the connection idle. Sampling goes on until every heir is
// done and two polls more: the count that follows the heir's commit is part of the run.
TEST(PooledLocks, LeaksAmongTransactionTrafficAreTheOnlyPooledLocks) {
  const char* soak = std::getenv("PGLOCK_POOLED_SOAK_SECONDS");
  const int seconds = soak != nullptr ? std::max(60, std::atoi(soak)) : 40;
  const int leak_every = soak != nullptr ? 120 : 1000;
  // Round robin: with PgBouncer's LIFO the four hot-key clients keep reusing the few connections
  // released last, the leaked one among them, which then is never idle at a poll (its leak never
  // proven, its heir never placed: the test failed so in parallel runs). Taking turns, every
  // connection is idle most of the time, as in a pool that is not saturated; whether a connection
  // the traffic never leaves idle is proven is AProvenLeakStaysCounted...'s and the runbook's.
  testing::Pgbouncer bouncer(
      {.pool_mode = "transaction", .default_pool_size = 20, .server_round_robin = true});
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  Poller poller(Target(bouncer), TestPoll({.interval_ms = 1000, .timeout_ms = 10000}));
  // The traffic first: before the pool's first server connection there is no database and user
  // to count pooled locks for, and the gauge is rightly absent.
  HotKeyTraffic traffic(bouncer, 4, 20, 200);
  ASSERT_TRUE(WaitFor(10, [&] { return traffic.transactions() > 0; }));
  poller.Start();
  const auto start = Clock::now();
  std::vector<std::string> leaked;
  std::vector<int> leaked_pids;
  std::vector<std::thread> heirs;
  std::atomic<int> heirs_placed = 0;
  std::atomic<int> heirs_after_count = 0;
  std::atomic<size_t> heirs_done = 0;
  auto leak = [&] {
    const std::string key = std::to_string(6000 + leaked.size());
    TestSession leaker(bouncer.Dsn("postgres") + " application_name=leaker");
    const int pid = std::stoi(
        leaker.Query("SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(" + key + ")) l"));
    leaked_pids.push_back(pid);
    leaked.push_back(key);
    // Once the exporter counts the leak, a new client is served by the leaked connection.
    heirs.emplace_back([&, key, pid] {
      PlaceHeir(bouncer, poller, key, pid, &heirs_placed, &heirs_after_count);
      ++heirs_done;
    });
  };  // the leaker leaves; its server connection, and the lock, stay in the pool
  Tally t = SampleUntil(poller, start + std::chrono::seconds(seconds), [&] {
    const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    if (static_cast<int>(leaked.size()) <= elapsed.count() / leak_every &&
        elapsed.count() + 20 < seconds) {
      leak();
    }
  });
  const auto heirs_deadline = Clock::now() + std::chrono::seconds(60);
  while (heirs_done.load() < heirs.size() && Clock::now() < heirs_deadline) {
    t.Add(SampleUntil(poller, Clock::now() + std::chrono::seconds(1)));
  }
  t.Add(SampleUntil(poller, Clock::now() + std::chrono::milliseconds(2500)));
  traffic.Stop();
  for (auto& h : heirs) h.join();
  const auto last = poller.Latest();
  int leak_inheritances = 0;
  for (const auto& e : *last->events) {
    if (e->kind == EventKind::kPooledLockInherited && !IsHotKey(e->lock)) ++leak_inheritances;
  }
  const int hot_inheritances = HotKeyInheritances(*last);
  poller.Stop();
  for (int pid : leaked_pids) Pg().Exec("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
  std::cout << seconds << " s of hot-key transaction traffic (" << traffic.transactions()
            << " transactions) with " << leaked.size() << " leaks: " << t.samples << " samples, "
            << t.hot_pooled << " with a hot key counted as a pooled session lock, "
            << hot_inheritances << " hot-key inheritances, " << t.leaks_counted.size() << " of "
            << leaked.size() << " leaks counted, " << leak_inheritances
            << " inheritances of leaked locks (" << heirs_placed << " heirs placed on purpose)\n";
  ASSERT_FALSE(leaked.empty());
  EXPECT_EQ(t.gauge_missing, 0);
  EXPECT_EQ(t.hot_pooled, 0);
  EXPECT_EQ(t.hot_session_scope, 0);
  EXPECT_EQ(hot_inheritances, 0);
  EXPECT_EQ(t.leaks_counted, std::set<std::string>(leaked.begin(), leaked.end()));
  ASSERT_GE(heirs_placed, 1) << "no client was ever served by a leaked connection";
  EXPECT_GE(leak_inheritances, heirs_after_count.load());
}

// Until *stop: through a pool of one server connection, `begin; select pg_sleep(0.15); commit;`
// then `pause_ms` outside any transaction: the connection is busy about 150 / (150 + pause_ms) of
// the time (plus the round trips).
void BusyPoolClient(const std::string& dsn, int pause_ms, const std::atomic<bool>* stop,
                    std::atomic<int>* transactions) {
  TestSession s(dsn);
  while (!stop->load()) {
    s.Query("BEGIN");
    s.Query("SELECT pg_sleep(0.15)");
    s.Query("COMMIT");
    ++*transactions;
    SleepMs(pause_ms);
  }
}

// A leaked session lock on a pool's only server connection stays counted in every sample while
// other clients' transactions keep that connection busy: once proven session-scoped, the lock is
// counted whatever the connection serves at later polls. Two levels of traffic: the pool busy
// about half and about nine tenths of the time.
TEST(PooledLocks, ALeakStaysCountedInEverySampleWhileTrafficKeepsThePoolBusy) {
  for (const int pause_ms : {150, 17}) {
    testing::Pgbouncer bouncer({.pool_mode = "transaction", .default_pool_size = 1});
    ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
    const std::string key = std::to_string(555 + pause_ms);
    {
      TestSession leaker(bouncer.Dsn("postgres") + " application_name=leaker");
      leaker.Query("SELECT pg_advisory_lock(" + key + ")");
    }  // the client leaves; the pool's one server connection keeps the lock
    Poller poller(Target(bouncer), TestPoll({.interval_ms = 1000, .timeout_ms = 10000}));
    std::atomic<bool> stop = false;
    std::atomic<int> transactions = 0;
    std::thread client(BusyPoolClient, bouncer.Dsn("postgres") + " application_name=busy", pause_ms,
                       &stop, &transactions);
    poller.Start();
    // The proof needs one poll that finds the connection idle across its read of pg_locks.
    const bool proven = WaitFor(60, [&] { return LeakCounted(poller, key); });
    int counted = 0;
    Tally t;
    if (proven) {
      t = SampleUntil(poller, Clock::now() + std::chrono::seconds(30));
      counted = static_cast<int>(t.leaks_counted.size());
    }
    const int busy = transactions.load();
    stop = true;
    client.join();
    poller.Stop();
    std::cout << "pool busy with a " << pause_ms << " ms pause between 150 ms transactions ("
              << busy << " transactions): proven " << proven << ", " << t.samples
              << " samples, leak counted in " << t.leak_samples << ", proven again in "
              << t.leak_reproved << "\n";
    ASSERT_TRUE(proven) << "the leak was never proven session-scoped (pause " << pause_ms << ")";
    EXPECT_GE(t.samples, 25);
    EXPECT_EQ(t.leak_samples, t.samples) << "pause " << pause_ms;
    EXPECT_EQ(counted, 1);
    EXPECT_EQ(t.failed_polls, 0);
  }
}

// Until *stop: `begin; select pg_sleep(0.15); commit;` as one query string, back to back.
void QueuedClient(const std::string& dsn, const std::atomic<bool>* stop,
                  std::atomic<int>* transactions) {
  TestSession s(dsn);
  while (!stop->load()) {
    s.Query("BEGIN; SELECT pg_sleep(0.15); COMMIT;");
    ++*transactions;
  }
}

// A leak proven while the pool was quiet stays counted in every sample once three clients queue
// behind the pool's one server connection: PgBouncer hands the connection from one transaction to
// the next, so no poll finds it idle across its read of pg_locks and none proves the lock again.
// The count must rest on the first proof alone, as long as the same backend holds the key.
TEST(PooledLocks, AProvenLeakStaysCountedWhileQueuedClientsNeverLeaveThePoolIdle) {
  testing::Pgbouncer bouncer({.pool_mode = "transaction", .default_pool_size = 1});
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  const std::string key = "777";
  {
    TestSession leaker(bouncer.Dsn("postgres") + " application_name=leaker");
    leaker.Query("SELECT pg_advisory_lock(" + key + ")");
  }  // the client leaves; the pool's one server connection keeps the lock
  Poller poller(Target(bouncer), TestPoll({.interval_ms = 1000, .timeout_ms = 10000}));
  poller.Start();
  // No traffic yet: the first poll finds the connection idle and proves the lock.
  ASSERT_TRUE(WaitFor(20, [&] { return LeakCounted(poller, key); }))
      << "the leak was not proven on a quiet pool";
  std::atomic<bool> stop = false;
  std::atomic<int> transactions = 0;
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back(QueuedClient,
                         bouncer.Dsn("postgres") + " application_name=queued-" + std::to_string(i),
                         &stop, &transactions);
  }
  ASSERT_TRUE(WaitFor(10, [&] { return transactions.load() >= 3; }));
  const Tally t = SampleUntil(poller, Clock::now() + std::chrono::seconds(30));
  stop = true;
  for (auto& c : clients) c.join();
  poller.Stop();
  std::cout << "three clients queued behind a pool of one (" << transactions.load()
            << " transactions): " << t.samples << " samples, leak counted in " << t.leak_samples
            << ", proven again in " << t.leak_reproved << "\n";
  EXPECT_GE(t.samples, 25);
  EXPECT_EQ(t.failed_polls, 0);
  EXPECT_EQ(t.gauge_missing, 0);
  EXPECT_EQ(t.leak_samples, t.samples);
  EXPECT_EQ(t.leaks_counted, std::set<std::string>{key});
  // Else the pool was idle at the polls and the test showed nothing the proof itself does not.
  EXPECT_LE(t.leak_reproved * 10, t.samples) << "the queued clients left the pool idle";
}

// Polls until the key is no longer held, then a little longer so the end is judged; returns the
// last samples.
std::vector<Sample> PollUntilGone(Poller& poller, const std::string& key) {
  std::vector<Sample> s;
  WaitFor(20, [&] {
    s = testing::PollAndScrape(poller);
    SleepMs(300);
    return testing::Select(s, "pglock_advisory_lock_held_seconds", {{"lock", key}}).empty();
  });
  for (int i = 0; i < 2; ++i) {
    SleepMs(600);
    s = testing::PollAndScrape(poller);
  }
  return s;
}

// The pooled-leak runbook's order: RECONNECT on the PgBouncer console closes the leaked server
// connection with a normal goodbye, a release that pages nothing, and so does KILL for a server
// connection idle in the pool; pg_terminate_backend, the last resort, is a loss
// (PglockAdvisoryLockLost). Each mode leaks its own key.
TEST(PooledLocks, PoolerReconnectAndKillReleaseALeakedLockTerminateLosesIt) {
  testing::Pgbouncer bouncer;
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  std::vector<std::pair<std::string, std::string>> modes = {{"RECONNECT", "5301"},
                                                            {"KILL", "5302"}};
  // Before 14 no session counter tells a terminated session from a closed one.
  const bool counters = Pg().VersionNum() >= 140000;
  if (counters) modes.emplace_back("terminate", "5303");
  TargetConfig t = Target(bouncer);
  for (const auto& [mode, key] : modes) {  // counters are kept per configured name
    LockNameConfig name;
    name.name = key;
    name.key = std::stoll(key);
    t.locks.push_back(name);
  }
  Poller poller(t, TestPoll({.interval_ms = 500, .timeout_ms = 10000}));
  for (const auto& [mode, key] : modes) {
    std::string pid;
    {
      TestSession leaker(bouncer.Dsn("postgres") + " application_name=leaker");
      pid = leaker.Query("SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(" + key + ")) l");
    }  // the client leaves; its server connection, and the lock, stay in the pool
    ASSERT_TRUE(WaitFor(
        20,
        [&] {
          const auto s = testing::PollAndScrape(poller);
          SleepMs(300);
          return Value(s, "pglock_pooled_session_advisory_locks", {{"pooler", "pgb"}}).value_or(0) >
                 0;
        }))
        << mode << ": the leak was never counted";
    if (mode == "terminate") {
      Pg().Exec("SELECT pg_terminate_backend(" + pid + ")");
    } else {
      TestSession admin(bouncer.Dsn("pgbouncer"));
      admin.Query(mode + " postgres");
      if (mode == "KILL") admin.Query("RESUME postgres");
    }
    const auto s = PollUntilGone(poller, key);
    const double released = Sum(s, "pglock_advisory_lock_releases_total",
                                {{"lock", key}, {"reason", "session_closed"}});
    const double lost = Sum(s, "pglock_advisory_lock_losses_total", {{"lock", key}});
    std::cout << mode << ": released " << released << ", lost " << lost << "\n";
    EXPECT_EQ(released, mode == "terminate" ? 0 : 1) << mode;
    EXPECT_EQ(lost, mode == "terminate" ? 1 : 0) << mode;
    // The pool holds no session lock any more (its series goes with the last one).
    EXPECT_EQ(Sum(s, "pglock_pooled_session_advisory_locks", {{"pooler", "pgb"}}), 0) << mode;
  }
  if (counters) {
    EXPECT_EQ(Sum(testing::PollAndScrape(poller), "pglock_advisory_lock_losses_total",
                  {{"lock", "5303"}, {"cause", "terminated"}}),
              1);
  }
}

// Events of `kind` (of sessions of application `app`, when given) in the poller's event log, and
// the locks they tell of (their counts summed).
std::pair<int, int64_t> EventsOf(const Poller& poller, const std::string& kind,
                                 const std::string& app = "") {
  std::pair<int, int64_t> n{0, 0};
  for (const auto& e : *poller.Latest()->events) {
    if (EventKindName(e->kind) != kind || (!app.empty() && e->previous.application_name() != app))
      continue;
    ++n.first;
    n.second += e->count;
  }
  return n;
}

// One incident, one story: a client leaks 6,000 session locks on a pooled connection, another
// client inherits them, the runbook's RECONNECT releases them. Each step is one event with its
// count (not 6,000), the inheritance counts once (a connection that served another client), and
// the loss and blocking episode logged before the flood are still in the event log.
TEST(PooledLocks, AThousandsOfLocksLeakIsOneEventPerStepAndKeepsWhatCameBefore) {
  testing::Pgbouncer bouncer({.pool_mode = "transaction", .default_pool_size = 1});
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  Poller poller(Target(bouncer), TestPoll({.interval_ms = 500, .timeout_ms = 10000}));
  const auto poll = [&] {
    poller.PollOnceForTest();
    SleepMs(200);
  };
  // Before the flood: a blocking episode, and (14+: its cause is known) a lost lock.
  {
    TestSession holder(Pg().Dsn() + " application_name=episode-root");
    TestSession waiter(Pg().Dsn() + " application_name=episode-waiter");
    holder.Query("SELECT pg_advisory_lock(4243)");
    waiter.Send("SELECT pg_advisory_lock(4243)");
    ASSERT_TRUE(WaitFor(10, [&] {
      poll();
      return poller.Latest()->view && !poller.Latest()->view->all_blocking_roots.empty();
    }));
    holder.Query("SELECT pg_advisory_unlock(4243)");
    ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
  }
  const bool counters = Pg().VersionNum() >= 140000;
  if (counters) {
    TestSession victim(Pg().Dsn() + " application_name=victim");
    victim.Query("SELECT pg_advisory_lock(4242)");
    poll();
    Pg().Exec("SELECT pg_terminate_backend(" + std::to_string(victim.Pid()) + ")");
  }
  ASSERT_TRUE(WaitFor(15, [&] {
    poll();
    return EventsOf(poller, "blocking_episode").first > 0 &&
           (!counters || EventsOf(poller, "lock_lost").first > 0);
  }));
  {
    TestSession leaker(bouncer.Dsn("postgres") + " application_name=leaker");
    leaker.Query("SELECT count(pg_advisory_lock(g)) FROM generate_series(100000, 105999) g");
  }
  ASSERT_TRUE(WaitFor(20, [&] {
    poll();
    const auto s = testing::ParseSamples(testing::Serialize({poller.Latest()}));
    return Value(s, "pglock_pooled_session_advisory_locks", {{"pooler", "pgb"}}).value_or(0) ==
           6000;
  }));
  TestSession heir(bouncer.Dsn("postgres") + " application_name=heir");
  heir.Query("SELECT 1");  // the pool's only server connection: the leaker's
  ASSERT_TRUE(WaitFor(20, [&] {
    poll();
    return EventsOf(poller, "pooled_lock_inherited").first > 0;
  }));
  // With 6,000 leaked locks held and inherited, the pages stay within their budget.
  const SnapshotList during{poller.Latest()};
  const size_t page = RenderLocksPage(during, {}).size(), api = RenderLocksJson(during, {}).size();
  std::cout << "/locks " << page << " bytes, /api/v1/locks " << api << " bytes\n";
  EXPECT_LT(page, 200u << 10);
  EXPECT_LT(api, 200u << 10);
  // One source of advice: a session waiting for a leaked lock, and the series whose advice the
  // alerts print, say the pooler's RECONNECT (KILL while a client keeps the connection in a
  // transaction) for the leaking connection, as a blocking root and as the lock table's filler, in
  // the words /locks prints after "Do:".
  TestSession blocked(Pg().Dsn() + " application_name=blocked");
  blocked.Send("SELECT pg_advisory_lock(100000)");
  ASSERT_TRUE(WaitFor(20, [&] {
    poll();
    const auto& v = poller.Latest()->view;
    return v && !v->blocking_roots.empty();
  }));
  const BlockingRoot& root = poller.Latest()->view->blocking_roots[0];
  EXPECT_EQ(root.verdict.command, "RECONNECT postgres");
  const auto verdicts = testing::ParseSamples(testing::Serialize({poller.Latest()}));
  for (const char* seen_as : {"blocking_root", "lock_table_session"}) {
    EXPECT_EQ(Value(verdicts, "pglock_session_verdict_info",
                    {{"seen_as", seen_as},
                     {"pid", std::to_string(root.root.id.pid)},
                     {"action", "pooler_reconnect"},
                     {"command", "RECONNECT postgres"},
                     {"then_command", "KILL postgres"},
                     {"pooler", "pgb"},
                     {"advice", VerdictAdvice(root.verdict)}}),
              1)
        << seen_as;
  }
  EXPECT_TRUE(VerdictAdvice(root.verdict).starts_with("RECONNECT postgres on PgBouncer pgb's"))
      << VerdictAdvice(root.verdict);
  std::string locks = RenderLocksPage({poller.Latest()}, {});
  for (const std::string tag : {"<code class=cmd>", "</code>"}) {
    for (size_t at; (at = locks.find(tag)) != std::string::npos;) locks.erase(at, tag.size());
  }
  EXPECT_NE(locks.find("<b>Do:</b> " + H(VerdictAdvice(root.verdict)) + "<br>"), std::string::npos)
      << locks;
  TestSession admin(bouncer.Dsn("pgbouncer"));
  admin.Query("RECONNECT postgres");
  heir.Query("SELECT 1");  // returned to the pool after this: RECONNECT closes it
  ASSERT_TRUE(WaitFor(20, [&] {
    poll();
    return EventsOf(poller, "lock_released", "heir").second >= 6000;
  }));
  poll();
  const auto s = testing::ParseSamples(testing::Serialize({poller.Latest()}));
  EXPECT_EQ(Sum(s, "pglock_pooled_session_lock_inherited_total", {{"pooler", "pgb"}}), 1);
  const auto inherited = EventsOf(poller, "pooled_lock_inherited");
  const auto released = EventsOf(poller, "lock_released", "heir");
  std::cout << "6,000-lock leak: " << inherited.first << " inheritance event(s) for "
            << inherited.second << " locks, " << released.first << " release event(s) for "
            << released.second << " locks, " << poller.Latest()->events->size() << " events kept\n";
  EXPECT_EQ(inherited.first, 1);
  EXPECT_EQ(inherited.second, 6000);
  EXPECT_EQ(released.first, 1);
  EXPECT_EQ(released.second, 6000);
  EXPECT_TRUE(WaitFor(5, [&] { return blocked.SendDone(); })) << "RECONNECT freed the waiter";
  EXPECT_GE(EventsOf(poller, "blocking_episode").first, 1);
  if (counters) {
    EXPECT_EQ(EventsOf(poller, "lock_lost").first, 1);
  }
}

}  // namespace
}  // namespace pglock
