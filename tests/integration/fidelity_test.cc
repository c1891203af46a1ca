// Fidelity of the lock events under realistic timing: the poller runs on its
// own thread with a 1 s interval while ordinary lock patterns run in other sessions, each repeated
// at least 20 times, and must count no loss and no takeover; real losses of each cause are counted
// once, with one takeover when another session then takes the key; a session lock leaked through
// a PgBouncer in transaction mode stays counted in every sample while traffic flows through the
// same pool, and the next client that gets it re-entrantly is counted as having inherited it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "exporter/poll/poller.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/pgbouncer.h"
#include "tests/support/test_poll.h"

extern char** environ;

namespace pglock {
namespace {

using testing::Pg;
using testing::Sample;
using testing::Sum;
using testing::SumPresent;
using testing::TestPoll;
using testing::TestSession;
using testing::Value;
using testing::WaitFor;

using Clock = std::chrono::steady_clock;

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

LockNameConfig BigintName(const std::string& name, int64_t key) {
  LockNameConfig n;
  n.name = name;
  n.kind = LockNameConfig::Kind::kBigint;
  n.key = key;
  return n;
}

TargetConfig Target(std::vector<LockNameConfig> names) {
  TargetConfig t;
  t.name = "fidelity";
  t.dsn = Pg().Dsn();
  t.locks = std::move(names);
  return t;
}

// The shipped default interval is 5 s; the tests poll every second, a tighter timing than the
// default, with a generous deadline for a loaded machine.
// A poller on its own thread, as in production; tests read its published snapshots.
class LivePoller {
 public:
  explicit LivePoller(const TargetConfig& target)
      : poller_(target, TestPoll({.timeout_ms = 10000})) {
    poller_.Start();
  }

  std::shared_ptr<const TargetSnapshot> Latest() const { return poller_.Latest(); }

  // The exposition of the latest snapshot, checked by promtool when `check`.
  std::vector<Sample> Samples(bool check = false) const {
    if (check) return testing::CheckedSamples(poller_.Latest());
    return testing::ParseSamples(testing::Serialize({poller_.Latest()}));
  }

  // Waits until `n` more snapshots have been published (successful or not); false at the deadline.
  bool WaitPolls(int n, double seconds) const {
    auto last = poller_.Latest();
    int seen = 0;
    return WaitFor(seconds, [&] {
      auto cur = poller_.Latest();
      if (cur != last) {
        last = cur;
        ++seen;
      }
      return seen >= n;
    });
  }

  // The latest samples once `condition` holds on them, or when `seconds` pass.
  std::vector<Sample> WaitUntil(const std::function<bool(const std::vector<Sample>&)>& condition,
                                double seconds) const {
    std::vector<Sample> samples;
    WaitFor(seconds, [&] {
      samples = Samples();
      return condition(samples);
    });
    return Samples(/*check=*/true);
  }

 private:
  Poller poller_;
};

// A lock's counts; nullopt when its series are missing (the exporter starts them at 0 once it has
// seen the lock held), so that an expected 0 is not met by a series that is gone.
std::optional<double> Losses(const std::vector<Sample>& s, const std::string& lock,
                             const std::string& cause = "") {
  std::map<std::string, std::string> match = {{"lock", lock}};
  if (!cause.empty()) match["cause"] = cause;
  return SumPresent(s, "pglock_advisory_lock_losses_total", match);
}
std::optional<double> Takeovers(const std::vector<Sample>& s, const std::string& lock) {
  return SumPresent(s, "pglock_advisory_lock_takeovers_total", {{"lock", lock}});
}
std::optional<double> Releases(const std::vector<Sample>& s, const std::string& lock,
                               const std::string& reason) {
  return SumPresent(s, "pglock_advisory_lock_releases_total", {{"lock", lock}, {"reason", reason}});
}
std::optional<double> Handovers(const std::vector<Sample>& s, const std::string& lock) {
  return SumPresent(s, "pglock_advisory_lock_handovers_total", {{"lock", lock}});
}

bool SessionGone(int pid) {
  return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid)) ==
         "0";
}

// True once the exporter has published a snapshot showing `pid` holding an advisory lock.
bool ExporterSawHolder(const LivePoller& poller, int pid, double seconds) {
  return WaitFor(seconds, [&] {
    const auto snap = poller.Latest();
    if (!snap || !snap->view) return false;
    for (const HeldLock& h : snap->view->held) {
      if (h.holder.pid == pid) return true;
    }
    return false;
  });
}

double SessionsAbandoned() {
  return std::stod(Pg().Scalar("SELECT sum(sessions_abandoned) FROM pg_stat_database"));
}

// --- Normal patterns -----------------------------------------------------------------------------

constexpr int kRuns = 20;

// Work times spread over 0.2 .. 0.2 + spread seconds, in an order unrelated to the poll phase.
int WorkMs(int run, int spread_ms) { return 200 + (run * 379) % (spread_ms + 1); }

std::string Lock(int64_t key) { return "SELECT pg_advisory_lock(" + std::to_string(key) + ")"; }
std::string Unlock(int64_t key) { return "SELECT pg_advisory_unlock(" + std::to_string(key) + ")"; }
std::string Work(int ms) { return "SELECT pg_sleep(" + std::to_string(ms / 1000.0) + ")"; }
std::string App(const char* app) { return Pg().Dsn() + " application_name=" + app; }

// (a) A job library's unlock(): lock, work, unlock, close, all within one poll interval.
void UnlockThenClose(int64_t key) {
  for (int run = 0; run < kRuns; ++run) {
    TestSession s(App("job-unlock"));
    s.Query(Lock(key));
    s.Query(Work(WorkMs(run, 500)));
    EXPECT_EQ(s.Query(Unlock(key)), "t");
    s.Close();
    SleepMs(WorkMs(run + 7, 400));
  }
}

// (b) Lock, work, close the session without unlocking: a clean close releases the lock.
void CloseHolding(int64_t key) {
  for (int run = 0; run < kRuns; ++run) {
    TestSession s(App("job-close"));
    s.Query(Lock(key));
    s.Query(Work(WorkMs(run, 1300)));
    s.Close();
    SleepMs(300);
  }
}

// (c) Two workers contend; the second gets the lock when the first leaves (by unlocking, or by
// closing its session, in turn), works, unlocks and closes.
void Contend(int64_t key) {
  for (int run = 0; run < kRuns; ++run) {
    TestSession first(App("worker-1"));
    TestSession second(App("worker-2"));
    first.Query(Lock(key));
    second.Send(Lock(key));  // waits behind the first
    first.Query(Work(WorkMs(run, 700)));
    if (run % 2 == 0) {
      EXPECT_EQ(first.Query(Unlock(key)), "t");
    }
    first.Close();
    EXPECT_TRUE(WaitFor(10, [&] { return second.SendDone(); })) << "run " << run;
    second.Query(Work(WorkMs(run + 3, 700)));
    EXPECT_EQ(second.Query(Unlock(key)), "t");
    second.Close();
    SleepMs(200);
  }
}

// (d) A migration tool: a constant bigint key taken inside BEGIN, the schema changed, COMMIT, then
// unlocked and the session closed.
void Migrate(int64_t key) {
  for (int run = 0; run < kRuns; ++run) {
    TestSession s(App("migrate"));
    s.Query("BEGIN");
    s.Query(Lock(key));
    s.Query(Work(WorkMs(run, 900)));
    s.Query("ALTER TABLE fidelity_schema ADD COLUMN IF NOT EXISTS c" + std::to_string(run) +
            " int");
    s.Query("INSERT INTO fidelity_schema (version) VALUES (" + std::to_string(run) + ")");
    s.Query("COMMIT");
    EXPECT_EQ(s.Query(Unlock(key)), "t");
    s.Close();
    SleepMs(300);
  }
}

// (e) Transaction-scoped locks: two transactions per session, each taking the key with
// pg_advisory_xact_lock and releasing it at COMMIT.
void TransactionLocks(int64_t key) {
  for (int run = 0; run < kRuns; ++run) {
    TestSession s(App("xact-job"));
    for (int xact = 0; xact < 2; ++xact) {
      s.Query("BEGIN");
      s.Query("SELECT pg_advisory_xact_lock(" + std::to_string(key) + ")");
      s.Query(Work(WorkMs(run + xact, 500)));
      s.Query("COMMIT");
      SleepMs(100);
    }
    s.Close();
    SleepMs(200);
  }
}

// (f) A server that reaps idle sessions holding nothing with idle_session_timeout (14+): each
// reaped session is a fatal end in the same database as the patterns' clean closes.
void IdleSessionsReaped(const std::atomic<bool>* stop) {
  std::vector<std::unique_ptr<TestSession>> sessions;
  while (!stop->load()) {
    sessions.push_back(std::make_unique<TestSession>(Pg().Dsn("postgres", "idle_reaped") +
                                                     " application_name=idle"));
    sessions.back()->Query("SELECT 1");
    if (sessions.size() > 12) sessions.erase(sessions.begin());  // long since reaped
    SleepMs(700);
  }
}

struct Pattern {
  const char* lock;
  int64_t key;
  void (*run)(int64_t);
};

TEST(Fidelity, NormalPatternsCountNoLossAndNoTakeover) {
  const Pattern patterns[] = {{"unlock-then-close", 7001, UnlockThenClose},
                              {"close-holding", 7002, CloseHolding},
                              {"contending-workers", 7003, Contend},
                              {"migration", 7004, Migrate},
                              {"xact-lock", 7005, TransactionLocks}};
  std::vector<LockNameConfig> names;
  for (const Pattern& p : patterns) names.push_back(BigintName(p.lock, p.key));
  const bool reaper = Pg().VersionNum() >= 140000;  // idle_session_timeout is 14+
  if (reaper) {
    Pg().Exec("DROP ROLE IF EXISTS idle_reaped");
    Pg().Exec("CREATE ROLE idle_reaped LOGIN");
    Pg().Exec("ALTER ROLE idle_reaped SET idle_session_timeout = '3s'");
  }
  Pg().Exec("CREATE TABLE fidelity_schema (version int)");  // what the migrations change
  LivePoller poller(Target(names));
  ASSERT_TRUE(poller.WaitPolls(2, 30));
  const double fatal_before =
      Sum(poller.Samples(), "pglock_sessions_ended_total", {{"reason", "fatal"}});

  const auto started = Clock::now();
  std::atomic<bool> stop_reaper = false;
  std::thread reaper_thread;
  if (reaper) reaper_thread = std::thread(IdleSessionsReaped, &stop_reaper);
  std::vector<std::thread> threads;
  for (const Pattern& p : patterns) threads.emplace_back(p.run, p.key);
  for (std::thread& t : threads) t.join();
  stop_reaper = true;
  if (reaper_thread.joinable()) reaper_thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();

  // Let the exporter judge the last interval (on 14 up to kMaxCounterWaits inventories later).
  ASSERT_TRUE(poller.WaitPolls(5, 60));
  const auto s = poller.Samples(/*check=*/true);
  std::cout << "normal patterns, " << kRuns << " runs each, " << seconds << " s, 1 s polls:\n";
  for (const Pattern& p : patterns) {
    using ::testing::PrintToString;  // (n), or (nullopt) for a missing series
    std::cout << "  " << p.lock << ": losses " << PrintToString(Losses(s, p.lock)) << ", takeovers "
              << PrintToString(Takeovers(s, p.lock)) << ", releases unlocked "
              << PrintToString(Releases(s, p.lock, "unlocked")) << ", releases session_closed "
              << PrintToString(Releases(s, p.lock, "session_closed")) << ", handovers "
              << PrintToString(Handovers(s, p.lock)) << "\n";
    EXPECT_EQ(Losses(s, p.lock), 0) << p.lock;
    EXPECT_EQ(Takeovers(s, p.lock), 0) << p.lock;
    // The exporter saw the pattern at work: otherwise zero losses would prove nothing.
    EXPECT_GE(Releases(s, p.lock, "unlocked").value_or(0) +
                  Releases(s, p.lock, "session_closed").value_or(0) +
                  Handovers(s, p.lock).value_or(0),
              1)
        << p.lock;
  }
  EXPECT_GE(Releases(s, "close-holding", "session_closed"), 1);
  EXPECT_GE(Handovers(s, "contending-workers"), 1);
  EXPECT_EQ(SumPresent(s, "pglock_advisory_lock_losses_total"), 0);
  EXPECT_EQ(SumPresent(s, "pglock_advisory_lock_takeovers_total"), 0);
  Pg().Exec("DROP TABLE fidelity_schema");
  if (reaper) {
    const double reaped =
        Sum(s, "pglock_sessions_ended_total", {{"reason", "fatal"}}) - fatal_before;
    std::cout << "  idle sessions reaped by idle_session_timeout meanwhile: " << reaped << "\n";
    EXPECT_GE(reaped, 5) << "the reaper did not run: the patterns met no fatal session ends";
    Pg().Exec("DROP ROLE idle_reaped");
  }
}

// --- Real losses ---------------------------------------------------------------------------------

// Waits for the takeover after `taker` took the key; checks one loss of `cause` and one takeover,
// and that later polls count neither again.
void ExpectOneLossAndOneTakeover(const LivePoller& poller, const std::string& lock,
                                 const std::string& cause) {
  auto s = poller.WaitUntil([&](const auto& s) { return Takeovers(s, lock) > 0; }, 30);
  EXPECT_EQ(Losses(s, lock, cause), 1) << cause;
  EXPECT_EQ(Sum(s, "pglock_advisory_lock_losses_total"), 1) << "exactly one loss";
  EXPECT_EQ(Takeovers(s, lock), 1);
  EXPECT_EQ(SumPresent(s, "pglock_advisory_lock_releases_total", {{"lock", lock}}), 0)
      << "a loss is not a release";
  EXPECT_EQ(Handovers(s, lock), 0) << "a takeover is not a hand-over";
  ASSERT_TRUE(poller.WaitPolls(2, 30));
  s = poller.Samples();
  EXPECT_EQ(Sum(s, "pglock_advisory_lock_losses_total"), 1);
  EXPECT_EQ(Takeovers(s, lock), 1);
}

TEST(Fidelity, IdleSessionTimeoutIsALossAndTheNextRunATakeover) {
  if (Pg().VersionNum() < 140000) GTEST_SKIP() << "idle_session_timeout is PostgreSQL 14+";
  Pg().Exec("DROP ROLE IF EXISTS idle_holder");
  Pg().Exec("CREATE ROLE idle_holder LOGIN");
  Pg().Exec("ALTER ROLE idle_holder IN DATABASE postgres SET idle_session_timeout = '2s'");
  LivePoller poller(Target({BigintName("idle-job", 7101)}));
  ASSERT_TRUE(poller.WaitPolls(1, 30));  // the per-role setting is known before the lock is taken

  // An autocommit lock connection, left idle: the per-role timeout ends it.
  TestSession holder(Pg().Dsn("postgres", "idle_holder") + " application_name=idle-holder");
  holder.Query(Lock(7101));
  ASSERT_TRUE(ExporterSawHolder(poller, holder.Pid(), 10));
  ASSERT_TRUE(WaitFor(15, [&] { return SessionGone(holder.Pid()); }));
  TestSession next(App("idle-job-next"));
  EXPECT_EQ(next.Query("SELECT pg_try_advisory_lock(7101)"), "t");
  ExpectOneLossAndOneTakeover(poller, "idle-job", "idle_session_timeout");
  Pg().Exec("DROP ROLE idle_holder");
}

// A psql client process reading its SQL from a pipe that the test keeps open, so it stays
// connected and idle after the statements it was given.
class PsqlProcess {
 public:
  explicit PsqlProcess(const std::string& conninfo) {
    int fds[2];
    if (pipe(fds) != 0) return;
    std::string psql = "psql";
    if (const char* bindir = std::getenv("PGLOCK_PG_BINDIR")) {
      if (std::filesystem::exists(std::string(bindir) + "/psql"))
        psql = std::string(bindir) + "/psql";
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> args = {psql, "-X", "-q", "-v", "ON_ERROR_STOP=0", "-d", conninfo};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, psql.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid_ = 0;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[0]);
    stdin_ = fds[1];
  }
  ~PsqlProcess() {
    if (stdin_ >= 0) close(stdin_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  PsqlProcess(const PsqlProcess&) = delete;
  PsqlProcess& operator=(const PsqlProcess&) = delete;

  bool started() const { return pid_ > 0; }
  void Send(const std::string& sql) {
    const std::string line = sql + ";\n";
    EXPECT_EQ(write(stdin_, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }
  // SIGKILL: the client vanishes without a goodbye, as a crashed or OOM-killed process does.
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
  int stdin_ = -1;
};

TEST(Fidelity, ClientProcessKilledWhileHoldingIsConnectionLost) {
  if (Pg().VersionNum() < 140000) {
    GTEST_SKIP() << "needs pg_stat_database.sessions_abandoned (PostgreSQL 14+)";
  }
  LivePoller poller(Target({BigintName("killed-job", 7301)}));
  const double abandoned_before = SessionsAbandoned();
  PsqlProcess client(Pg().Dsn() + " application_name=killed-client");
  ASSERT_TRUE(client.started()) << "cannot run psql";
  client.Send(Lock(7301));
  std::string pid;
  ASSERT_TRUE(WaitFor(10, [&] {
    pid = Pg().Scalar(
        "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = "
        "'advisory' AND l.granted AND a.application_name = 'killed-client'");
    return !pid.empty();
  })) << "psql did not take the lock";
  ASSERT_TRUE(ExporterSawHolder(poller, std::stoi(pid), 10));
  client.Kill();
  // An idle backend notices the closed socket at once.
  ASSERT_TRUE(WaitFor(10, [&] { return SessionGone(std::stoi(pid)); }));
  EXPECT_TRUE(WaitFor(5, [&] { return SessionsAbandoned() > abandoned_before; }))
      << "pg_stat_database.sessions_abandoned did not count the killed client";
  TestSession next(App("killed-job-next"));
  EXPECT_EQ(next.Query("SELECT pg_try_advisory_lock(7301)"), "t");
  ExpectOneLossAndOneTakeover(poller, "killed-job", "connection_lost");
}

// --- A session lock leaked through a transaction pooler, under traffic
// ----------------------------

constexpr int64_t kLeakedKey = 7401;

// About 10 short transactions a second through the pool until *stop; counts those that ran on the
// server connection `pid`.
void Traffic(const testing::Pgbouncer* bouncer, const std::atomic<bool>* stop, int pid,
             std::atomic<int>* total, std::atomic<int>* on_pid) {
  TestSession s(bouncer->Dsn("postgres") + " application_name=traffic");
  while (!stop->load()) {
    s.Query("BEGIN");
    const std::string backend = s.Query("SELECT pg_backend_pid()");
    s.Query("SELECT count(*) FROM pg_class");
    s.Query("SELECT pg_sleep(0.04)");
    s.Query("COMMIT");
    ++*total;
    if (backend == std::to_string(pid)) ++*on_pid;
    SleepMs(60);
  }
}

const PooledLockRow* FindPooledLock(const TargetSnapshot& snap, const std::string& lock) {
  if (!snap.view) return nullptr;
  for (const PoolerView& p : snap.view->poolers) {
    for (const PooledLockRow& r : p.locks) {
      if (r.lock == lock) return &r;
    }
  }
  return nullptr;
}

double PooledLocks(const std::vector<Sample>& s) {
  return Value(s, "pglock_pooled_session_advisory_locks",
               {{"pooler", "pgb"}, {"database", "postgres"}, {"user", "postgres"}})
      .value_or(-1);
}

TEST(Fidelity, PooledLeakStaysCountedUnderTrafficAndTheNextClientInheritsIt) {
  testing::Pgbouncer bouncer({.pool_mode = "transaction", .default_pool_size = 2});
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  TargetConfig target = Target({});
  target.poolers = {{.name = "pgb", .admin_dsn = bouncer.Dsn("pgbouncer")}};
  LivePoller poller(target);
  const std::string lock = std::to_string(kLeakedKey);

  // A client takes a session lock through the pool and leaves: the lock stays on the server
  // connection.
  int leaked_pid = 0;
  {
    TestSession leaker(bouncer.Dsn("postgres") + " application_name=leaker");
    leaked_pid = std::stoi(
        leaker.Query("SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(" + lock + ")) l"));
  }
  ASSERT_TRUE(WaitFor(15, [&] {
    const auto snap = poller.Latest();
    return snap && FindPooledLock(*snap, lock) != nullptr;
  })) << "the exporter never saw the leaked lock";

  // 30 s of traffic through the same pool; every poll is sampled.
  std::atomic<bool> stop = false;
  std::atomic<int> transactions = 0, on_leaked = 0;
  std::thread traffic(Traffic, &bouncer, &stop, leaked_pid, &transactions, &on_leaked);
  int samples = 0, counted = 0, failed_polls = 0;
  std::vector<double> wrong;
  auto last = poller.Latest();
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < until) {
    SleepMs(50);
    const auto snap = poller.Latest();
    if (snap == last) continue;
    last = snap;
    if (!snap->up) {
      ++failed_polls;
      continue;
    }
    ++samples;
    const double n = PooledLocks(testing::ParseSamples(testing::Serialize({snap})));
    if (n == 1) {
      ++counted;
    } else {
      wrong.push_back(n);
    }
  }
  stop = true;
  traffic.join();
  std::cout << "pooled leak under traffic: " << transactions << " transactions in 30 s, "
            << on_leaked << " on the leaked server connection; gauge 1 in " << counted << " of "
            << samples << " samples (" << failed_polls << " failed polls)\n";
  EXPECT_EQ(counted, samples) << "pglock_pooled_session_advisory_locks flickered: "
                              << ::testing::PrintToString(wrong);
  EXPECT_GE(samples, 15);
  EXPECT_GE(transactions, 150);
  EXPECT_GE(on_leaked, 10) << "the traffic never used the leaked connection: nothing was tested";

  // A second client asks for the same lock. On the leaked server connection it gets it at once
  // (session locks are re-entrant); its transaction pins it there while the exporter looks.
  auto snap = poller.Latest();
  const double inherited_before =
      Sum(testing::ParseSamples(testing::Serialize({snap})),
          "pglock_pooled_session_lock_inherited_total", {{"pooler", "pgb"}});
  TestSession second(bouncer.Dsn("postgres") + " application_name=second-client");
  bool on_leaked_connection = false;
  for (int attempt = 0; attempt < 50 && !on_leaked_connection; ++attempt) {
    second.Query("BEGIN");
    on_leaked_connection = second.Query("SELECT pg_backend_pid()") == std::to_string(leaked_pid);
    if (!on_leaked_connection) {
      second.Query("ROLLBACK");
      SleepMs(50);
    }
  }
  ASSERT_TRUE(on_leaked_connection)
      << "the pool never gave the second client the leaked connection";
  EXPECT_EQ(second.Query("SELECT pg_try_advisory_lock(" + lock + ")"), "t")
      << "the leaked lock was not granted re-entrantly";
  const auto s = poller.WaitUntil(
      [&](const auto& s) {
        return Sum(s, "pglock_pooled_session_lock_inherited_total", {{"pooler", "pgb"}}) >
               inherited_before;
      },
      15);
  EXPECT_GE(Sum(s, "pglock_pooled_session_lock_inherited_total", {{"pooler", "pgb"}}),
            inherited_before + 1);
  EXPECT_EQ(PooledLocks(s), 1) << "the re-entrant take is the same lock";
  snap = poller.Latest();
  const PooledLockRow* row = FindPooledLock(*snap, lock);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->pid, leaked_pid);
  EXPECT_EQ(row->first_client.rfind("leaker", 0), 0u) << row->first_client;
  EXPECT_EQ(row->current_client.rfind("second-client", 0), 0u) << row->current_client;
  EXPECT_GE(row->inherited, 1);
  std::cout << "  second client: inherited_total " << inherited_before << " -> "
            << Sum(s, "pglock_pooled_session_lock_inherited_total", {{"pooler", "pgb"}})
            << ", first_client \"" << row->first_client << "\", current_client \""
            << row->current_client << "\"\n";
  second.Query("COMMIT");
  Pg().Exec("SELECT pg_terminate_backend(" + std::to_string(leaked_pid) + ")");
}

}  // namespace
}  // namespace pglock
