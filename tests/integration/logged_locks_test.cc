// What the server's log tells of locks between polls, on a real server (log_lock_waits on,
// deadlock_timeout 1 s): a row-lock wait of 2 s that no poll sees, an advisory wait by its name,
// a lock timeout by role, a three-session deadlock with every process, and PostgreSQL 18's
// log_lock_failures naming the holder of a failed NOWAIT.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "exporter/http/oncall_select.h"
#include "exporter/poll/poller.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::PollAndScrape;
using testing::Sample;
using testing::Sum;
using testing::TestPoll;
using testing::TestSession;
using testing::WaitFor;

TargetConfig Target() {
  return testing::TestTarget(Pg().Dsn(),
                             "[[targets.locks]]\nname = \"nightly-report\"\nkey = 4242\n"
                             "[targets.server_log]\npath = \"" +
                                 Pg().LogDir() +
                                 "\"\nformat = \"csvlog\"\n"
                                 "read_interval = \"200ms\"\n");
}

// A poller whose log reader has read to the end of the log once: what was there before is not
// read as new.
std::unique_ptr<Poller> StartedPoller() {
  auto poller = std::make_unique<Poller>(Target(), TestPoll({.interval_ms = 5000}));
  EXPECT_TRUE(WaitFor(5, [&] { return poller->server_log()->reads_through() > 0; }));
  poller->PollOnceForTest();
  return poller;
}

// Polls (every 300 ms, 15 s at most) until an event of `kind` is in the poller's log.
std::shared_ptr<const Event> PollUntilEvent(Poller& poller, const std::string& kind) {
  std::shared_ptr<const Event> found;
  WaitFor(15, [&] {
    poller.PollOnceForTest();
    const auto snap = poller.Latest();
    for (const auto& e : *snap->events) {
      if (EventKindName(e->kind) == kind) found = e;
    }
    if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return found != nullptr;
  });
  return found;
}

class LoggedLocks : public ::testing::Test {
 protected:
  void SetUp() override {
    Pg().Exec("DROP TABLE IF EXISTS jobs");
    Pg().Exec("CREATE TABLE jobs (id int PRIMARY KEY, state text)");
    Pg().Exec("INSERT INTO jobs SELECT g, 'new' FROM generate_series(1, 3) g");
  }
};

TEST_F(LoggedLocks, ARowLockWaitBetweenTwoPollsIsCountedWithWaiterHolderAndDuration) {
  auto poller = StartedPoller();
  TestSession holder(Pg().Dsn() + " application_name=worker-a");
  TestSession waiter(Pg().Dsn() + " application_name=worker-b");
  holder.Query("BEGIN");
  holder.Query("UPDATE jobs SET state = 'a' WHERE id = 1");
  waiter.Send("UPDATE jobs SET state = 'b' WHERE id = 1");
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  holder.Query("COMMIT");
  ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
  const auto e = PollUntilEvent(*poller, "lock_wait");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->current.pid, waiter.Pid());
  EXPECT_EQ(e->current.application_name(), "worker-b");
  EXPECT_EQ(e->previous.pid, holder.Pid());
  EXPECT_EQ(e->outcome, EventOutcome::kAcquired);
  EXPECT_NEAR(e->duration, 2.0, 0.5);
  EXPECT_NE(e->detail.str().find("between polls"), std::string::npos) << e->detail;
  const auto samples = PollAndScrape(*poller);
  EXPECT_EQ(Sum(samples, "pglock_logged_lock_waits_total", {{"locktype", "transactionid"}}), 1);
  EXPECT_EQ(Sum(samples, "pglock_logged_lock_wait_seconds_count", {{"locktype", "transactionid"}}),
            1);
}

// The second waiter for a row waits for the row's tuple lock, which the log names by OID
// ("tuple (0,1) of relation 16407 of database 5"): its logged wait is named as the poll named it
// while it waited (schema.table), so `?lock=public.jobs` finds both.
TEST_F(LoggedLocks, ARowWaitIsNamedByItsTableAsThePollNamesIt) {
  auto poller = StartedPoller();
  TestSession holder(Pg().Dsn() + " application_name=worker-a");
  TestSession first(Pg().Dsn() + " application_name=worker-b");
  TestSession second(Pg().Dsn() + " application_name=worker-c");
  holder.Query("BEGIN");
  holder.Query("UPDATE jobs SET state = 'a' WHERE id = 1");
  first.Send("UPDATE jobs SET state = 'b' WHERE id = 1");
  ASSERT_TRUE(WaitFor(5, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " +
                       std::to_string(first.Pid())) == "1";
  }));
  second.Send("UPDATE jobs SET state = 'c' WHERE id = 1");
  ASSERT_TRUE(WaitFor(5, [&] {
    return Pg().Scalar("SELECT locktype FROM pg_locks WHERE NOT granted AND pid = " +
                       std::to_string(second.Pid())) == "tuple";
  }));
  poller->PollOnceForTest();
  std::string polled;  // what the poll names the second waiter's lock
  for (const LockWaitEdge& w : poller->Latest()->view->lock_waits) {
    if (w.waiter.id.pid == second.Pid()) polled = w.relation;
  }
  EXPECT_EQ(polled, "public.jobs");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past deadlock_timeout
  holder.Query("COMMIT");
  ASSERT_TRUE(WaitFor(5, [&] { return first.SendDone(); }));
  ASSERT_TRUE(WaitFor(5, [&] { return second.SendDone(); }));
  std::shared_ptr<const Event> logged;
  WaitFor(15, [&] {
    poller->PollOnceForTest();
    for (const auto& e : *poller->Latest()->events) {
      if (e->kind == EventKind::kLockWait && e->current.pid == second.Pid()) logged = e;
    }
    if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return logged != nullptr;
  });
  ASSERT_NE(logged, nullptr);
  EXPECT_EQ(logged->lock, polled);
  EXPECT_NE(logged->detail.str().find("tuple (0,1) of relation "), std::string::npos)
      << logged->detail;
  const std::vector<TargetPart> parts =
      SelectTargetParts({poller->Latest()}, LocksFilter{"", "public.jobs"});
  ASSERT_EQ(parts.size(), 1u);
  bool found = false;
  for (const Event* e : parts[0].events) found = found || e == logged.get();
  EXPECT_TRUE(found) << "?lock=public.jobs does not find the logged wait";
}

TEST_F(LoggedLocks, AnAdvisoryWaitIsCountedByTheKeysName) {
  auto poller = StartedPoller();
  TestSession holder(Pg().Dsn() + " application_name=report-1");
  TestSession waiter(Pg().Dsn() + " application_name=report-2");
  holder.Query("SELECT pg_advisory_lock(4242)");
  waiter.Send("SELECT pg_advisory_lock(4242)");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  holder.Query("SELECT pg_advisory_unlock(4242)");
  ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
  const auto e = PollUntilEvent(*poller, "lock_wait");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->lock, "nightly-report");
  EXPECT_EQ(e->previous.pid, holder.Pid());
  const auto samples = PollAndScrape(*poller);
  EXPECT_EQ(Sum(samples, "pglock_logged_lock_waits_total",
                {{"locktype", "advisory"}, {"lock", "nightly-report"}}),
            1);
}

TEST_F(LoggedLocks, ALockTimeoutIsCountedByRoleWithItsBlocker) {
  Pg().Exec("DROP ROLE IF EXISTS deployer");
  Pg().Exec("CREATE ROLE deployer LOGIN SUPERUSER");
  auto poller = StartedPoller();
  TestSession holder(Pg().Dsn() + " application_name=long-report");
  holder.Query("BEGIN");
  holder.Query("SELECT count(*) FROM jobs");
  TestSession deploy(Pg().Dsn("postgres", "deployer") + " application_name=migrate");
  deploy.Query("SET lock_timeout = '1500ms'");
  EXPECT_NE(deploy.QueryError("ALTER TABLE jobs ADD COLUMN note text"), "");
  holder.Query("COMMIT");
  const auto e = PollUntilEvent(*poller, "lock_timeout");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->cause, EventCause::kLockTimeout);
  EXPECT_EQ(e->current.pid, deploy.Pid());
  EXPECT_EQ(e->current.usename(), "deployer");
  EXPECT_EQ(e->previous.pid, holder.Pid());
  EXPECT_EQ(e->lock, "public.jobs");  // as a poll names the relation, not by its OID
  const auto samples = PollAndScrape(*poller);
  EXPECT_EQ(Sum(samples, "pglock_lock_timeouts_total", {{"usename", "deployer"}}), 1);
}

TEST_F(LoggedLocks, AThreeSessionDeadlockNamesEveryProcessAndLock) {
  auto poller = StartedPoller();
  std::vector<std::unique_ptr<TestSession>> s;
  for (int i = 0; i < 3; ++i) {
    s.push_back(
        std::make_unique<TestSession>(Pg().Dsn() + " application_name=cycle-" + std::to_string(i)));
    s[i]->Query("BEGIN");
    s[i]->Query("UPDATE jobs SET state = 'x' WHERE id = " + std::to_string(i + 1));
  }
  // Each takes the next one's row: a cycle of three.
  for (int i = 0; i < 3; ++i) {
    s[i]->Send("UPDATE jobs SET state = 'y' WHERE id = " + std::to_string((i + 1) % 3 + 1));
  }
  ASSERT_TRUE(WaitFor(10, [&] {
    int done = 0;
    for (auto& x : s) done += x->SendDone() ? 1 : 0;
    return done >= 1;
  }));
  const auto e = PollUntilEvent(*poller, "deadlock");
  for (auto& x : s) x->Close();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->evidence, EndEvidence::kLog);
  int named = 0;
  for (const std::string part : {"pid ", "waits for ShareLock on transaction"}) {
    EXPECT_NE(e->detail.str().find(part), std::string::npos) << e->detail;
  }
  for (size_t at = 0; (at = e->detail.str().find(" waits for ", at)) != std::string::npos; ++at)
    ++named;
  EXPECT_EQ(named, 3) << e->detail;
}

TEST_F(LoggedLocks, LogLockFailuresNameTheHolderOfAFailedNowait) {
  if (Pg().VersionNum() < 180000) GTEST_SKIP() << "log_lock_failures is 18+";
  auto poller = StartedPoller();
  TestSession holder(Pg().Dsn() + " application_name=holder");
  holder.Query("BEGIN");
  holder.Query("SELECT * FROM jobs WHERE id = 2 FOR UPDATE");
  TestSession nowait(Pg().Dsn() + " application_name=nowait");
  nowait.Query("SET log_lock_failures = on");
  EXPECT_NE(nowait.QueryError("SELECT * FROM jobs WHERE id = 2 FOR UPDATE NOWAIT"), "");
  holder.Query("COMMIT");
  const auto e = PollUntilEvent(*poller, "lock_timeout");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->cause, EventCause::kNowaitFailed);
  EXPECT_EQ(e->current.pid, nowait.Pid());
  EXPECT_EQ(e->previous.pid, holder.Pid());
}

// Events of `kind` (and `outcome`, when given; of waiters whose application starts with
// `app_prefix`, when given) in the poller's event log.
int CountEvents(const Poller& poller, const std::string& kind, const std::string& outcome = "",
                const std::string& app_prefix = "") {
  int n = 0;
  for (const auto& e : *poller.Latest()->events) {
    n += EventKindName(e->kind) == kind &&
                 (outcome.empty() || EventOutcomeName(e->outcome) == outcome) &&
                 e->current.application_name().starts_with(app_prefix)
             ? 1
             : 0;
  }
  return n;
}

// One wait of `seconds` on a row (odd i) or on the named advisory key (even i).
void InjectWait(int i, double seconds) {
  TestSession holder(Pg().Dsn() + " application_name=holder-" + std::to_string(i));
  TestSession waiter(Pg().Dsn() + " application_name=waiter-" + std::to_string(i));
  const bool row = i % 2 == 1;
  holder.Query(row ? "BEGIN" : "SELECT pg_advisory_lock(4242)");
  if (row) holder.Query("UPDATE jobs SET state = 'h' WHERE id = 1");
  waiter.Send(row ? "UPDATE jobs SET state = 'w' WHERE id = 1" : "SELECT pg_advisory_lock(4242)");
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(seconds * 1000)));
  holder.Query(row ? "COMMIT" : "SELECT pg_advisory_unlock(4242)");
  ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
}

void InjectLockTimeout() {
  TestSession holder(Pg().Dsn() + " application_name=report");
  holder.Query("BEGIN");
  holder.Query("SELECT count(*) FROM jobs");
  TestSession deploy(Pg().Dsn() + " application_name=migrate");
  deploy.Query("SET lock_timeout = '2s'");
  EXPECT_NE(deploy.QueryError("ALTER TABLE jobs ADD COLUMN note text"), "");
}

void InjectDeadlock() {
  TestSession a(Pg().Dsn() + " application_name=dl-a"), b(Pg().Dsn() + " application_name=dl-b");
  a.Query("BEGIN");
  b.Query("BEGIN");
  a.Query("UPDATE jobs SET state = 'a' WHERE id = 2");
  b.Query("UPDATE jobs SET state = 'b' WHERE id = 3");
  a.Send("UPDATE jobs SET state = 'a' WHERE id = 3");
  b.Send("UPDATE jobs SET state = 'b' WHERE id = 2");
  ASSERT_TRUE(WaitFor(10, [&] { return a.SendDone() || b.SendDone(); }));
}

TEST_F(LoggedLocks, AWorkloadOfWaitsTimeoutsAndDeadlocksIsCountedExactly) {
  // A poll every 5 s, waits of 1.5 to 4 s (row and advisory, longer than deadlock_timeout: the
  // log shows none shorter), lock timeouts of 2 s, two deadlocks. PGLOCK_WORKLOAD_SECONDS sets
  // the run's length (default 40).
  const char* env = std::getenv("PGLOCK_WORKLOAD_SECONDS");
  const double seconds = env != nullptr ? std::atof(env) : 40;
  Poller poller(Target(), TestPoll({.interval_ms = 5000}));
  ASSERT_TRUE(WaitFor(5, [&] { return poller.server_log()->reads_through() > 0; }));
  poller.Start();
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> wait_seconds(1.5, 4.0);
  int waits = 0, timeouts = 0, deadlocks = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (int i = 0; elapsed() < seconds; ++i) {
    InjectWait(i, wait_seconds(rng));
    ++waits;
    if (i % 3 == 2) {
      InjectLockTimeout();
      ++timeouts;
    }
    if (deadlocks < 2 && elapsed() > seconds * (deadlocks + 1) / 3) {
      InjectDeadlock();
      ++deadlocks;
    }
  }
  // Every wait, timeout and deadlock line read and judged by a poll.
  WaitFor(20, [&] {
    return CountEvents(poller, "lock_wait", "acquired", "waiter-") >= waits &&
           CountEvents(poller, "lock_timeout") >= timeouts &&
           CountEvents(poller, "deadlock") >= deadlocks;
  });
  std::this_thread::sleep_for(std::chrono::seconds(6));  // one more poll: nothing counted twice
  const auto samples = testing::ParseSamples(testing::Serialize({poller.Latest()}));
  const double counted_waits = Sum(samples, "pglock_logged_lock_waits_total");
  const double counted_timeouts = Sum(samples, "pglock_lock_timeouts_total");
  const int acquired = CountEvents(poller, "lock_wait", "acquired", "waiter-");
  // A deadlock's survivor logs a wait of its own when its deadlock_timeout fired before the
  // victim was cancelled: a real wait over deadlock_timeout, counted as such.
  const int survivors = CountEvents(poller, "lock_wait", "", "dl-");
  std::printf(
      "workload: %.0f s, 5 s polls: %d waits injected, %d acquired-wait events; %d lock timeouts "
      "injected, %.0f counted; %d deadlocks injected, %d deadlock events (%d survivor waits); "
      "pglock_logged_lock_waits_total %.0f\n",
      elapsed(), waits, acquired, timeouts, counted_timeouts, deadlocks,
      CountEvents(poller, "deadlock"), survivors, counted_waits);
  EXPECT_EQ(acquired, waits);
  EXPECT_EQ(CountEvents(poller, "lock_wait"), waits + survivors);
  EXPECT_EQ(counted_timeouts, timeouts);
  EXPECT_EQ(CountEvents(poller, "lock_timeout"), timeouts);
  EXPECT_EQ(CountEvents(poller, "deadlock"), deadlocks);
  // Each wait once: the injected ones, the timeouts' (lock_timeout outlasts deadlock_timeout),
  // the deadlocks' victims and survivors.
  EXPECT_EQ(counted_waits, waits + timeouts + deadlocks + survivors);
  poller.Stop();
}

}  // namespace
}  // namespace pglock
