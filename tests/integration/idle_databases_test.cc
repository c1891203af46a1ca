// Series scale with activity: a server with 200 idle databases exposes no series that names one of
// them, and a database's counters appear with its first deadlock or blocking episode.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "exporter/poll/poller.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::PollAndScrape;
using testing::Sample;
using testing::SumPresent;
using testing::TestPoll;
using testing::TestSession;
using testing::WaitFor;

constexpr int kIdleDatabases = 200;

std::string IdleName(int i) {
  char name[32];
  std::snprintf(name, sizeof name, "idle_db_%03d", i);
  return name;
}

// Series whose labels name one of the idle databases.
int IdleSeries(const std::vector<Sample>& samples, std::string* example) {
  int n = 0;
  for (const Sample& s : samples) {
    for (const auto& [label, value] : s.labels) {
      if (value.rfind("idle_db_", 0) != 0) continue;
      if (n++ == 0) *example = s.name + "{" + label + "=\"" + value + "\"}";
    }
  }
  return n;
}

class IdleDatabases : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto started = std::chrono::steady_clock::now();
    TestSession admin(Pg().Dsn());
    // From template0 by copying its files: no WAL for every block, a few ms per database.
    const std::string how = Pg().VersionNum() >= 150000 ? " TEMPLATE template0 STRATEGY FILE_COPY"
                                                        : " TEMPLATE template0";
    for (int i = 0; i < kIdleDatabases; ++i) {
      admin.Query("CREATE DATABASE " + IdleName(i) + how);
    }
    std::printf("created %d databases in %.1f s\n", kIdleDatabases,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }

  static TargetConfig Target() {
    TargetConfig t;
    t.name = "idle";
    t.dsn = Pg().Dsn();
    return t;
  }

  Poller poller_{Target(), TestPoll()};
};

TEST_F(IdleDatabases, NoSeriesNamesAnIdleDatabaseUntilItHasSomethingToCount) {
  poller_.PollOnceForTest();  // the baseline of the server's counters
  std::vector<Sample> samples = PollAndScrape(poller_);
  ASSERT_EQ(SumPresent(samples, "pglock_up"), 1);
  std::string example;
  EXPECT_EQ(IdleSeries(samples, &example), 0) << example;
  std::printf("series in /metrics with %d idle databases: %zu\n", kIdleDatabases, samples.size());

  // A deadlock in one of them: its series appears, counting it.
  const std::string db = IdleName(7);
  Pg().Exec(
      "CREATE TABLE accounts(id int PRIMARY KEY, v int); "
      "INSERT INTO accounts VALUES (1, 0), (2, 0)",
      db);
  TestSession a(Pg().Dsn(db) + " application_name=transfer-a");
  TestSession b(Pg().Dsn(db) + " application_name=transfer-b");
  a.Query("BEGIN");
  b.Query("BEGIN");
  a.Query("UPDATE accounts SET v = v + 1 WHERE id = 1");
  b.Query("UPDATE accounts SET v = v + 1 WHERE id = 2");
  a.Send("UPDATE accounts SET v = v + 1 WHERE id = 2");
  b.Send("UPDATE accounts SET v = v + 1 WHERE id = 1");
  ASSERT_TRUE(WaitFor(15, [&] { return a.SendDone() && b.SendDone(); }));
  a.Query("ROLLBACK");
  b.Query("ROLLBACK");
  // A backend flushes its statistics when it goes idle, at most once a second (else within 10 s).
  ASSERT_TRUE(WaitFor(15, [&] {
    samples = PollAndScrape(poller_);
    return SumPresent(samples, "pglock_deadlocks_total", {{"datname", db}}).has_value();
  }));
  EXPECT_EQ(SumPresent(samples, "pglock_deadlocks_total", {{"datname", db}}), 1);

  // A blocking episode in another: the three outcomes of its database appear when it ends.
  const std::string db2 = IdleName(8);
  TestSession root(Pg().Dsn(db2) + " application_name=checkout");
  TestSession waiter(Pg().Dsn(db2) + " application_name=report");
  root.Query("BEGIN");
  root.Query("SELECT pg_advisory_xact_lock(42)");
  waiter.Send("SELECT pg_advisory_xact_lock(42)");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") ==
           "1";
  }));
  samples = PollAndScrape(poller_);
  EXPECT_FALSE(SumPresent(samples, "pglock_blocking_episodes_total", {{"datname", db2}}));
  root.Query("COMMIT");
  ASSERT_TRUE(WaitFor(10, [&] { return waiter.SendDone(); }));
  samples = PollAndScrape(poller_);
  EXPECT_EQ(SumPresent(samples, "pglock_blocking_episodes_total",
                       {{"datname", db2}, {"outcome", "released"}}),
            1);
  for (const char* other : {"root_ended", "waiters_left"}) {
    EXPECT_EQ(SumPresent(samples, "pglock_blocking_episodes_total",
                         {{"datname", db2}, {"outcome", other}}),
              0)
        << other;
  }

  // Every other idle database still has none.
  int named = 0;
  for (const Sample& s : samples) {
    for (const auto& [label, value] : s.labels) {
      if (value.rfind("idle_db_", 0) == 0 && value != db && value != db2) ++named;
    }
  }
  EXPECT_EQ(named, 0);
}

}  // namespace
}  // namespace pglock
