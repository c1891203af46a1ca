// Point-in-time lock health against a real PostgreSQL: real sessions hold, wait
// and sit idle in transaction; one poll of the real Poller; the exposition text is parsed back,
// checked value by value and passed through `promtool check metrics`.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "exporter/poll/poller.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::PollAndScrape;
using testing::Sample;
using testing::Select;
using testing::TestPoll;
using testing::TestSession;
using testing::Value;
using testing::WaitFor;

TargetConfig Target(const std::string& db = "postgres") {
  TargetConfig t;
  t.name = "it";
  t.dsn = Pg().Dsn(db);
  return t;
}

// Waits until `pid` waits on an advisory lock, as pg_stat_activity shows it.
void WaitUntilWaiting(int pid) {
  ASSERT_TRUE(WaitFor(10,
                      [&] {
                        return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                                           std::to_string(pid) + " AND wait_event = 'advisory'") ==
                               "1";
                      }))
      << "session " << pid << " never started waiting";
}

TEST(LockHealth, TargetUpWithServerVersion) {
  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_up", {{"target", "it"}}), 1);
  const auto info = Select(samples, "pglock_postgres_info");
  ASSERT_EQ(info.size(), 1u);
  const std::string version = info[0].labels.at("server_version");
  EXPECT_EQ(version, Pg().Scalar("SHOW server_version"));
  // The matrix (tests/matrix/run.sh) names the major it selected through PGLOCK_PG_BINDIR.
  if (const char* major = std::getenv("PGLOCK_PG_MAJOR")) {
    EXPECT_EQ(version.rfind(std::string(major) + ".", 0), 0u) << version;
  }
  EXPECT_EQ(info[0].value, 1);
}

TEST(LockHealth, WaiterBehindBigintHolderWithNegativeKey) {
  TestSession holder(Pg().Dsn() + " application_name=holder-app");
  TestSession waiter(Pg().Dsn() + " application_name=waiter-app");
  holder.Query("SELECT pg_advisory_lock(-42)");
  waiter.Send("SELECT pg_advisory_lock(-42)");
  WaitUntilWaiting(waiter.Pid());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));

  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  const auto edges = Select(samples, "pglock_advisory_lock_wait_seconds", {{"lock", "-42"}});
  ASSERT_EQ(edges.size(), 1u);
  const auto& e = edges[0].labels;
  EXPECT_EQ(e.at("waiter_pid"), std::to_string(waiter.Pid()));
  EXPECT_EQ(e.at("waiter_application_name"), "waiter-app");
  EXPECT_EQ(e.at("blocker_pid"), std::to_string(holder.Pid()));
  EXPECT_EQ(e.at("blocker_application_name"), "holder-app");
  EXPECT_EQ(e.at("blocker_client_addr"), "127.0.0.1");
  EXPECT_EQ(e.at("blocker_usename"), "postgres");
  EXPECT_EQ(e.at("blocker_state"), "idle");
  EXPECT_EQ(e.at("datname"), "postgres");
  // From pg_locks.waitstart: at least the 1.2 s slept above, well under a minute.
  EXPECT_GE(edges[0].value, 1.0);
  EXPECT_LT(edges[0].value, 60.0);
  EXPECT_EQ(Value(samples, "pglock_advisory_lock_waiters", {{"datname", "postgres"}}), 1);
  EXPECT_DOUBLE_EQ(
      *Value(samples, "pglock_advisory_lock_wait_seconds_max", {{"datname", "postgres"}}),
      edges[0].value);

  const auto held = Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "-42"}});
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].labels.at("pid"), std::to_string(holder.Pid()));
  EXPECT_EQ(held[0].labels.at("scope"), "session");  // idle, no transaction: a session lock
  EXPECT_EQ(held[0].labels.at("state"), "idle");
  EXPECT_GE(held[0].value, 1.0);  // first sight of an idle holder dates from its state_change

  holder.Query("SELECT pg_advisory_unlock(-42)");
  ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
}

TEST(LockHealth, QueuedWaitersPointAtTheHolderNotAtEachOther) {
  TestSession holder(Pg().Dsn()), first(Pg().Dsn()), second(Pg().Dsn());
  holder.Query("SELECT pg_advisory_lock(515)");
  first.Send("SELECT pg_advisory_lock(515)");
  WaitUntilWaiting(first.Pid());
  second.Send("SELECT pg_advisory_lock(515)");
  WaitUntilWaiting(second.Pid());
  // pg_blocking_pids() names the first waiter as a blocker of the second one too.
  EXPECT_EQ(
      Pg().Scalar("SELECT cardinality(pg_blocking_pids(" + std::to_string(second.Pid()) + "))"),
      "2");
  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  const auto edges = Select(samples, "pglock_advisory_lock_wait_seconds", {{"lock", "515"}});
  ASSERT_EQ(edges.size(), 2u);  // one per waiter, both to the holder
  for (const Sample& e : edges) {
    EXPECT_EQ(e.labels.at("blocker_pid"), std::to_string(holder.Pid()));
  }
  EXPECT_EQ(Value(samples, "pglock_advisory_lock_waiters", {{"datname", "postgres"}}), 2);
  holder.Close();
  ASSERT_TRUE(WaitFor(5, [&] { return first.SendDone(); }));
  first.Close();
  ASSERT_TRUE(WaitFor(5, [&] { return second.SendDone(); }));
}

TEST(LockHealth, TwoInt4KeysRenderSignedPair) {
  TestSession holder(Pg().Dsn());
  holder.Query("SELECT pg_advisory_lock(-5, -7)");
  holder.Query("SELECT pg_advisory_lock(2147483647, -2147483648)");
  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "-5:-7"}}).size(), 1u);
  EXPECT_EQ(
      Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "2147483647:-2147483648"}})
          .size(),
      1u);
}

TEST(LockHealth, SharedHoldersDoNotBlockEachOtherButBlockExclusive) {
  TestSession a(Pg().Dsn()), b(Pg().Dsn()), x(Pg().Dsn());
  a.Query("SELECT pg_advisory_lock_shared(100)");
  b.Query("SELECT pg_advisory_lock_shared(100)");
  {
    Poller poller(Target(), TestPoll());
    const auto samples = PollAndScrape(poller);
    EXPECT_EQ(Value(samples, "pglock_advisory_lock_waiters", {{"datname", "postgres"}}), 0);
    EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "100"}}).size(), 2u);
  }
  x.Send("SELECT pg_advisory_lock(100)");
  WaitUntilWaiting(x.Pid());
  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  const auto edges = Select(samples, "pglock_advisory_lock_wait_seconds",
                            {{"lock", "100"}, {"waiter_pid", std::to_string(x.Pid())}});
  ASSERT_EQ(edges.size(), 2u);  // one edge per shared holder
  std::set<std::string> blockers = {edges[0].labels.at("blocker_pid"),
                                    edges[1].labels.at("blocker_pid")};
  EXPECT_EQ(blockers, (std::set<std::string>{std::to_string(a.Pid()), std::to_string(b.Pid())}));
  a.Close();
  b.Close();
  ASSERT_TRUE(WaitFor(5, [&] { return x.SendDone(); }));
}

TEST(LockHealth, SharedWaiterBehindExclusiveHolderIsBlocked) {
  TestSession x(Pg().Dsn()), s(Pg().Dsn());
  x.Query("SELECT pg_advisory_lock(101)");
  s.Send("SELECT pg_advisory_lock_shared(101)");
  WaitUntilWaiting(s.Pid());
  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  const auto edges = Select(samples, "pglock_advisory_lock_wait_seconds", {{"lock", "101"}});
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].labels.at("blocker_pid"), std::to_string(x.Pid()));
  x.Close();
  ASSERT_TRUE(WaitFor(5, [&] { return s.SendDone(); }));
}

TEST(LockHealth, ConfiguredNamesReplaceKeysUsingServerHashes) {
  TargetConfig t = Target();
  LockNameConfig text_key;
  text_key.name = "rebuild:run";
  text_key.kind = LockNameConfig::Kind::kBigintText;
  text_key.key_text = "rebuild:run";
  LockNameConfig pair_text;
  pair_text.name = "report-daily";
  pair_text.kind = LockNameConfig::Kind::kPairText;
  pair_text.key1 = 7742;
  pair_text.key2_text = "report-daily";
  LockNameConfig bigint;
  bigint.name = "sweep";
  bigint.kind = LockNameConfig::Kind::kBigint;
  bigint.key = 42;
  t.locks = {text_key, pair_text, bigint};

  TestSession s(Pg().Dsn());
  s.Query("SELECT pg_advisory_lock(hashtextextended('rebuild:run', 0))");
  s.Query("SELECT pg_advisory_lock(7742, hashtext('report-daily'))");
  s.Query("SELECT pg_advisory_lock(42)");
  s.Query("SELECT pg_advisory_lock(43)");
  Poller poller(t, TestPoll());
  const auto samples = PollAndScrape(poller);
  for (const char* name : {"rebuild:run", "report-daily", "sweep", "43"}) {
    EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", name}}).size(), 1u)
        << name;
  }
}

TEST(LockHealth, IdleInTransactionHolderWithPerRoleTimeoutAndTimeLeft) {
  Pg().Exec("DROP ROLE IF EXISTS iit_worker");
  Pg().Exec("CREATE ROLE iit_worker LOGIN");
  // Precedence: database+role (60 s) beats role (2 h) beats database (10 min).
  Pg().Exec(
      "ALTER ROLE iit_worker IN DATABASE postgres SET idle_in_transaction_session_timeout = "
      "'1min'");
  Pg().Exec("ALTER ROLE iit_worker SET idle_in_transaction_session_timeout = '2h'");
  Pg().Exec("ALTER DATABASE postgres SET idle_in_transaction_session_timeout = '10min'");

  TestSession worker(Pg().Dsn("postgres", "iit_worker") + " application_name=rebuild");
  TestSession blocked(Pg().Dsn());
  worker.Query("BEGIN");
  worker.Query("SELECT pg_advisory_xact_lock(555)");
  blocked.Send("SELECT pg_advisory_lock(555)");
  WaitUntilWaiting(blocked.Pid());

  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  const std::map<std::string, std::string> who = {{"pid", std::to_string(worker.Pid())}};
  const auto holder = Select(samples, "pglock_idle_in_transaction_holder_seconds", who);
  ASSERT_EQ(holder.size(), 1u);
  EXPECT_EQ(holder[0].labels.at("holds"), "advisory,blocking");
  EXPECT_EQ(holder[0].labels.at("usename"), "iit_worker");
  EXPECT_EQ(holder[0].labels.at("application_name"), "rebuild");
  const auto remaining =
      Value(samples, "pglock_idle_in_transaction_timeout_remaining_seconds", who);
  ASSERT_TRUE(remaining.has_value());
  EXPECT_GT(*remaining, 50.0);
  EXPECT_LE(*remaining, 60.0);
  EXPECT_NEAR(*remaining + holder[0].value, 60.0, 0.01);
  EXPECT_GE(*Value(samples, "pglock_idle_in_transaction_lock_holders", {{"datname", "postgres"}}),
            1);
  EXPECT_GE(*Value(samples, "pglock_idle_in_transaction_sessions", {{"datname", "postgres"}}), 1);

  EXPECT_EQ(Value(samples, "pglock_setting_override_seconds",
                  {{"name", "idle_in_transaction_session_timeout"},
                   {"database", "postgres"},
                   {"role", "iit_worker"}}),
            60);
  EXPECT_EQ(Value(samples, "pglock_setting_override_seconds",
                  {{"name", "idle_in_transaction_session_timeout"},
                   {"database", "*"},
                   {"role", "iit_worker"}}),
            7200);
  EXPECT_EQ(Value(samples, "pglock_setting_override_seconds",
                  {{"name", "idle_in_transaction_session_timeout"},
                   {"database", "postgres"},
                   {"role", "*"}}),
            600);

  worker.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(5, [&] { return blocked.SendDone(); }));
  worker.Close();
  blocked.Close();
  Pg().Exec("ALTER DATABASE postgres RESET idle_in_transaction_session_timeout");
  Pg().Exec("DROP ROLE iit_worker");
}

TEST(LockHealth, PoolOfFourAllHoldingLocksShowsFourNextToFour) {
  std::vector<std::unique_ptr<TestSession>> pool;
  for (int i = 0; i < 4; ++i) {
    pool.push_back(std::make_unique<TestSession>(Pg().Dsn() + " application_name=billing-worker"));
    pool.back()->Query("SELECT pg_advisory_lock(9000 + " + std::to_string(i) + ")");
  }
  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  const std::map<std::string, std::string> client = {{"application_name", "billing-worker"},
                                                     {"usename", "postgres"},
                                                     {"client_addr", "127.0.0.1"}};
  auto sessions = client;
  sessions["state"] = "idle";
  EXPECT_EQ(Value(samples, "pglock_client_sessions", sessions), 4);
  EXPECT_EQ(Value(samples, "pglock_client_idle_lock_holding_sessions", client), 4);
}

TEST(LockHealth, SettingOverridesNormalisedToSecondsWhateverTheUnit) {
  Pg().Exec("DROP ROLE IF EXISTS units_a");
  Pg().Exec("DROP ROLE IF EXISTS units_b");
  Pg().Exec("CREATE ROLE units_a");
  Pg().Exec("CREATE ROLE units_b");
  Pg().Exec("ALTER ROLE units_a SET lock_timeout = '3500ms'");
  Pg().Exec("ALTER ROLE units_a SET statement_timeout = '1min'");
  Pg().Exec("ALTER ROLE units_b SET deadlock_timeout = 2000");    // bare number: milliseconds
  Pg().Exec("ALTER ROLE units_b SET tcp_keepalives_idle = 30");   // bare number: seconds
  const bool idle_session_timeout = Pg().VersionNum() >= 140000;  // new in 14
  if (idle_session_timeout) Pg().Exec("ALTER ROLE units_b SET idle_session_timeout = '10s'");
  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  auto override = [&](const char* role, const char* name) {
    return Value(samples, "pglock_setting_override_seconds", {{"role", role}, {"name", name}});
  };
  EXPECT_EQ(override("units_a", "lock_timeout"), 3.5);
  EXPECT_EQ(override("units_a", "statement_timeout"), 60);
  EXPECT_EQ(override("units_b", "deadlock_timeout"), 2);
  EXPECT_EQ(override("units_b", "tcp_keepalives_idle"), 30);
  if (idle_session_timeout) {
    EXPECT_EQ(override("units_b", "idle_session_timeout"), 10);
  }
  // Server values, not the exporter's own poll-time SET LOCALs.
  EXPECT_EQ(Value(samples, "pglock_setting_seconds", {{"name", "deadlock_timeout"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_setting_seconds", {{"name", "statement_timeout"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_setting_seconds", {{"name", "lock_timeout"}}), 0);
  Pg().Exec("DROP ROLE units_a");
  Pg().Exec("DROP ROLE units_b");
}

TEST(LockHealth, TopNKeepsOldestHoldersAndCountsTheRest) {
  TestSession s(Pg().Dsn());
  for (int i = 0; i < 6; ++i) s.Query("SELECT pg_advisory_lock(700 + " + std::to_string(i) + ")");
  Poller poller(Target(), TestPoll({.top_n = 3}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds").size(), 3u);
  EXPECT_EQ(Value(samples, "pglock_advisory_locks_held", {{"datname", "postgres"}}), 6);
  EXPECT_EQ(Value(samples, "pglock_series_dropped_total",
                  {{"metric", "pglock_advisory_lock_held_seconds"}}),
            3);
}

TEST(LockHealth, ExporterOwnSessionNeverAppears) {
  TestSession s(Pg().Dsn());
  s.Query("SELECT pg_advisory_lock(1)");
  Poller poller(Target(), TestPoll());
  const auto samples = PollAndScrape(poller);
  for (const Sample& x : samples) {
    for (const auto& [k, v] : x.labels) {
      EXPECT_NE(v, "pglock_exporter") << x.name << " has the exporter's own session";
    }
  }
}

TEST(LockHealth, LeasesTableWithHolderPattern) {
  Pg().Exec("DROP TABLE IF EXISTS leases");
  Pg().Exec(
      "CREATE TABLE leases (name text PRIMARY KEY, holder text NOT NULL, "
      "taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)");
  const char* take =
      "INSERT INTO leases (name, holder, taken_at, expires_at) "
      "VALUES ('%s', '%s', now() - interval '%d seconds', now() + interval '%d seconds') "
      "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, taken_at = excluded.taken_at, "
      "expires_at = excluded.expires_at WHERE leases.expires_at < now() RETURNING true";
  char sql[1024];
  const auto written = std::chrono::steady_clock::now();
  std::snprintf(sql, sizeof sql, take, "sweep", "host-a:1234:9f86d081884c7d65", 30, 90);
  Pg().Exec(sql);
  std::snprintf(sql, sizeof sql, take, "mail-checks", "host-b:77:aaaa", 200, -80);
  Pg().Exec(sql);

  TargetConfig t = Target();
  LeaseTableConfig lease;
  lease.table = "public.leases";
  lease.schema = "public";
  lease.relation = "leases";
  lease.holder_pattern = "^([^:]+):([0-9]+):";
  lease.holder_labels = {"holder_host", "holder_pid"};
  t.leases = {lease};
  Poller poller(t, TestPoll());
  const auto samples = PollAndScrape(poller);
  // The rows' times moved on by the time the poll read them: by at most what has passed since they
  // were written (a loaded machine stretches that, not the tolerance).
  const double passed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - written).count() + 0.05;
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "public.leases"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_held", {{"lease", "sweep"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_held", {{"lease", "mail-checks"}}), 0);
  const auto within = [&](const char* metric, const char* lease, double at_write, double sign) {
    const double v = *Value(samples, metric, {{"lease", lease}});
    EXPECT_GE(sign * (v - at_write), -0.05) << metric << " " << lease;
    EXPECT_LE(sign * (v - at_write), passed) << metric << " " << lease;
  };
  within("pglock_lease_age_seconds", "sweep", 30, 1);
  within("pglock_lease_expires_in_seconds", "sweep", 90, -1);
  within("pglock_lease_expires_in_seconds", "mail-checks", -80, -1);
  EXPECT_EQ(Value(samples, "pglock_lease_holder_info",
                  {{"lease", "sweep"}, {"holder_host", "host-a"}, {"holder_pid", "1234"}}),
            1);
  // The random per-call token is not a label: the pattern dropped it.
  for (const Sample& x : Select(samples, "pglock_lease_holder_info")) {
    EXPECT_EQ(x.labels.count("holder"), 0u);
  }
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "held"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "expired"}}), 1);
  Pg().Exec("DROP TABLE leases");
}

TEST(LockHealth, MissingLeaseTableOrColumnIsItsOwnErrorNotADownTarget) {
  Pg().Exec("DROP TABLE IF EXISTS odd_leases");
  Pg().Exec(
      "CREATE TABLE odd_leases (name text, owner text, taken_at timestamptz, expires_at "
      "timestamptz)");
  TargetConfig t = Target();
  LeaseTableConfig missing;
  missing.table = missing.relation = "no_such_table";
  LeaseTableConfig wrong_column;
  wrong_column.table = wrong_column.relation = "odd_leases";  // has owner, not holder
  t.leases = {missing, wrong_column};
  TestSession s(Pg().Dsn());
  s.Query("SELECT pg_advisory_lock(77)");
  Poller poller(t, TestPoll());
  poller.PollOnceForTest();
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "no_such_table"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "odd_leases"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_collector_errors_total", {{"collector", "lease:no_such_table"}}),
            2);
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "77"}}).size(), 1u);
  Pg().Exec("DROP TABLE odd_leases");
}

TEST(LockHealth, TieredPollSeesNewWaitersBetweenInventories) {
  PollConfig tiered = TestPoll();
  tiered.inventory_interval = Duration(60'000);
  Poller poller(Target(), tiered);
  TestSession holder(Pg().Dsn() + " application_name=tier-holder");
  auto gone = std::make_unique<TestSession>(Pg().Dsn());
  holder.Query("SELECT pg_advisory_lock(880)");
  gone->Query("SELECT pg_advisory_lock(881)");
  auto samples = PollAndScrape(poller);  // first poll: the inventory
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "880"}}).size(), 1u);
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "881"}}).size(), 1u);

  gone.reset();  // its holder series must go even without an inventory
  TestSession waiter(Pg().Dsn() + " application_name=tier-waiter");
  waiter.Send("SELECT pg_advisory_lock(880)");
  WaitUntilWaiting(waiter.Pid());
  samples = PollAndScrape(poller);  // a cheap poll: no inventory for another minute
  const auto edges = Select(samples, "pglock_advisory_lock_wait_seconds", {{"lock", "880"}});
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].labels.at("blocker_pid"), std::to_string(holder.Pid()));
  EXPECT_EQ(edges[0].labels.at("waiter_application_name"), "tier-waiter");
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "880"}}).size(), 1u);
  EXPECT_TRUE(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "881"}}).empty());
  // Events wait for the next inventory: the ended holder is not (yet) a release.
  EXPECT_EQ(testing::SumPresent(samples, "pglock_advisory_lock_releases_total"), 0);
  holder.Close();
  ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
}

}  // namespace
}  // namespace pglock
