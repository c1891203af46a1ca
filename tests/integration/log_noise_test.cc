// The exporter's own lines in the server's log, counted in the server's jsonlog (15+) on a real
// server: a lock table that a config names but that does not exist yet (knex creates its lock table
// at its first migration), sits in a schema that does not exist, or that the exporter's role may
// not read, costs no ERROR line per poll, is still reported (pglock_lease_table_up 0, one line in
// the exporter's own log) and is read at the first poll after it can be; a statement that fails at
// every poll is retried after a backoff. Polls run every 100 ms: 120 of them are two minutes of
// 1 s polls, and the backoff counts in poll intervals.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "exporter/poll/poller.h"
#include "exporter/serverlog/jsonlog.h"
#include "exporter/serverlog/log_follower.h"
#include "exporter/serverlog/log_source.h"
#include "tests/support/log_capture.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/recipes.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::LogCapture;
using testing::Pg;
using testing::PollAndScrape;
using testing::TestPoll;
using testing::TestSession;
using testing::TestTarget;
using testing::Value;
using testing::WaitFor;

constexpr int kPolls = 120;
constexpr int kIntervalMs = 100;

// The ERROR records of the exporter's sessions in the server's jsonlog so far, and their messages.
struct ServerErrors {
  int count = 0;
  std::string messages;
  double seconds = 0;  // from the first try to the last
};

// The most tries that a backoff starting at `interval` (tries 1, 2, 4 ... intervals apart) makes
// in `seconds`: at 0, 1, 3, 7 ... intervals.
int MaxTries(double seconds, double interval) {
  return 1 + static_cast<int>(std::floor(std::log2(seconds / interval + 1)));
}

ServerErrors ExporterErrors() {
  ServerErrors out;
  JsonlogParser parser;
  LogRecord r;
  for (const auto& file : std::filesystem::directory_iterator(Pg().LogDir())) {
    if (file.path().extension() != ".json") continue;
    std::ifstream in(file.path());
    for (std::string line; std::getline(in, line);) {
      if (!parser.Parse(line, &r)) continue;
      if (r.error_severity != "ERROR" || r.application_name != "pglock_exporter") continue;
      ++out.count;
      if (out.messages.size() < 2000) out.messages += r.message + "\n";
    }
  }
  return out;
}

// Waits until the logging collector has written what every session sent it before now: a marker
// sent after is in the file (the collector writes its pipe in order).
void FlushServerLog() {
  static int n = 0;
  const std::string marker = "log-noise-marker-" + std::to_string(++n);
  Pg().Exec("DO $$ BEGIN RAISE WARNING '" + marker + "'; END $$");
  const bool seen = WaitFor(10, [&] {
    for (const auto& file : std::filesystem::directory_iterator(Pg().LogDir())) {
      if (file.path().extension() != ".json") continue;
      std::ifstream in(file.path());
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      if (text.find(marker) != std::string::npos) return true;
    }
    return false;
  });
  ASSERT_TRUE(seen) << "the server's log never showed " << marker;
}

// Polls kPolls times, kIntervalMs apart, and returns the ERROR lines the exporter caused.
ServerErrors PollAndCountErrors(Poller& poller) {
  FlushServerLog();
  const ServerErrors before = ExporterErrors();
  const auto started = std::chrono::steady_clock::now();
  auto last = started;
  for (int i = 0; i < kPolls; ++i) {
    last = std::chrono::steady_clock::now();
    poller.PollOnceForTest();
    std::this_thread::sleep_for(std::chrono::milliseconds(kIntervalMs));
  }
  FlushServerLog();
  ServerErrors after = ExporterErrors();
  after.count -= before.count;
  after.seconds = std::chrono::duration<double>(last - started).count();
  return after;
}

class LogNoise : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Pg().VersionNum() < 150000) GTEST_SKIP() << "the server's jsonlog is 15+";
    Pg().Exec(
        "DROP TABLE IF EXISTS knex_migrations_lock, secret_locks, flaky_locks; "
        "DROP ROLE IF EXISTS log_noise_watcher; "
        "CREATE ROLE log_noise_watcher LOGIN IN ROLE pg_monitor");
  }
  void TearDown() override {
    if (Pg().VersionNum() < 150000) return;
    Pg().Exec(
        "DROP TABLE IF EXISTS knex_migrations_lock, secret_locks, flaky_locks; "
        "DROP ROLE IF EXISTS log_noise_watcher");
  }
};

// The README's knex recipe before knex ran, a table in a schema that does not exist, and a table
// the exporter's role may not read: no ERROR line per poll, each reported all along, and each read
// at the first poll after it can be.
TEST_F(LogNoise, MissingOrUnreadableLockTablesCostNoErrorPerPoll) {
  Pg().Exec(
      "CREATE TABLE secret_locks (name text, holder text, taken_at timestamptz, "
      "expires_at timestamptz)");
  const TargetConfig target =
      TestTarget(Pg().Dsn("postgres", "log_noise_watcher"), std::string(testing::kKnexRecipe) + R"(
  [[targets.leases]]
  table = "jobs.leases"
  [[targets.leases]]
  table = "secret_locks"
)");
  LogCapture log;
  Poller poller(target, TestPoll({.interval_ms = kIntervalMs}));
  const ServerErrors errors = PollAndCountErrors(poller);
  std::printf(
      "ERROR lines caused by the exporter in %d polls of three missing or unreadable "
      "lock tables: %d\n%s",
      kPolls, errors.count, errors.messages.c_str());
  EXPECT_LE(errors.count, 3) << errors.messages;

  auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "knex_migrations_lock"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "jobs.leases"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "secret_locks"}}), 0);
  EXPECT_EQ(log.Count("relation \"knex_migrations_lock\" does not exist"), 1) << log.Text();
  EXPECT_EQ(log.Count("schema \"jobs\" does not exist"), 1) << log.Text();
  EXPECT_EQ(log.Count("permission denied for table secret_locks"), 1) << log.Text();

  // knex's first migration creates its table; the operator grants the read.
  Pg().Exec(std::string(testing::kKnexLockTableSql) +
            "; GRANT SELECT ON knex_migrations_lock, secret_locks TO log_noise_watcher");
  samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "knex_migrations_lock"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"table", "knex_migrations_lock"}, {"state", "held"}}),
            0);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "secret_locks"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "jobs.leases"}}), 0);
}

// An expression that fails on the table's rows fails the read at every try, an ERROR line each
// time (two: the read, then the probe that names the expression): retried after 1, 2, 4 ...
// intervals, the table reported down all along and logged once; read again once the data is fixed,
// within the backoff's delay at that time (at most twice the time it has been failing).
TEST_F(LogNoise, FailingStatementIsRetriedWithBackoff) {
  Pg().Exec(
      "CREATE TABLE flaky_locks (name text, flag integer); "
      "INSERT INTO flaky_locks VALUES ('a', 0)");
  const TargetConfig target = TestTarget(Pg().Dsn(), R"(
  [[targets.leases]]
  table = "flaky_locks"
  held_sql = "100 / flag > 0"
)");
  LogCapture log;
  Poller poller(target, TestPoll({.interval_ms = kIntervalMs}));
  const auto started = std::chrono::steady_clock::now();
  const ServerErrors errors = PollAndCountErrors(poller);
  std::printf("ERROR lines caused by the exporter in %d polls of a failing expression: %d\n%s",
              kPolls, errors.count, errors.messages.c_str());
  // Two lines a try, tries at 0, 1, 3, 7 ... intervals: 14 in 12 s, where a try at every poll
  // wrote 240 (the polls' own time stretches the 120 intervals on a loaded machine).
  EXPECT_LE(errors.count, 2 * MaxTries(errors.seconds, kIntervalMs / 1000.0))
      << errors.seconds << " s: " << errors.messages;
  EXPECT_GE(errors.count, 2) << "the failing read is not failing";

  auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "flaky_locks"}}), 0);
  EXPECT_EQ(log.Count("division by zero"), 1) << log.Text();

  Pg().Exec("UPDATE flaky_locks SET flag = 1");
  const double failing =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  bool up = false;
  EXPECT_TRUE(WaitFor(2 * failing + 1, [&] {
    samples = PollAndScrape(poller);
    up = Value(samples, "pglock_lease_table_up", {{"table", "flaky_locks"}}) == 1;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(kIntervalMs));
    return up;
  }));
  EXPECT_EQ(Value(samples, "pglock_leases", {{"table", "flaky_locks"}, {"state", "held"}}), 1);
}

// The server's log read over SQL by a role that may not list it: the read fails at every try, an
// ERROR line in the very log it reads each time; tried again after 1 s, then 2 s ..., the error
// returned meanwhile.
TEST_F(LogNoise, SqlLogSourceWithoutPrivilegeBacksOff) {
  LogFollower follower(MakeSqlLogSource(Pg().Dsn("postgres", "log_noise_watcher"),
                                        LogFormat::kJsonlog, std::chrono::seconds(5)),
                       LogFormat::kJsonlog);
  Pg().Exec("REVOKE EXECUTE ON FUNCTION pg_ls_logdir() FROM pg_monitor");
  FlushServerLog();
  const ServerErrors before = ExporterErrors();
  // 30 reads at the reader's pace of 200 ms: 6 s.
  const auto started = std::chrono::steady_clock::now();
  auto last = started;
  for (int i = 0; i < 30; ++i) {
    last = std::chrono::steady_clock::now();
    const Status s = follower.Poll([](const LogRecord&) {});
    EXPECT_NE(s.message().find("permission denied"), std::string::npos) << i << ": " << s.message();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  Pg().Exec("GRANT EXECUTE ON FUNCTION pg_ls_logdir() TO pg_monitor");
  FlushServerLog();
  const int errors = ExporterErrors().count - before.count;
  std::printf("ERROR lines caused by 30 reads of the log without the privilege: %d\n", errors);
  // Tries at 0, 1, 3 s (7 s on a loaded machine): 3, where a try at every read wrote 30.
  const double seconds = std::chrono::duration<double>(last - started).count();
  EXPECT_GE(errors, 1);
  EXPECT_LE(errors, MaxTries(seconds, 1.0)) << seconds << " s";
}

}  // namespace
}  // namespace pglock
