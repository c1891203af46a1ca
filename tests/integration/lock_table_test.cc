// The server's shared lock table against a real PostgreSQL with a small one (max_connections 20,
// max_locks_per_transaction 64): entries counted from the poll's read of pg_locks, the nominal
// size from the settings, the sessions filling it, and a session leaking session advisory locks
// until the server answers `out of shared memory`, with the exporter still seeing the table.
#include "exporter/collectors/lock_table.h"

#include <gtest/gtest.h>

#include <cstdio>

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

TargetConfig Target() {
  TargetConfig t;
  t.name = "it";
  t.dsn = Pg().Dsn();
  return t;
}

int64_t Setting(const std::string& name) {
  return std::stoll(Pg().Scalar("SELECT current_setting('" + name + "')"));
}

// The nominal size as the server's lock.c computes it, from the settings the server reports.
int64_t ExpectedSlots() {
  const int version = Pg().VersionNum();
  int64_t backends =
      Setting("max_connections") + Setting("max_worker_processes") + Setting("max_wal_senders");
  if (version >= 180000) {
    backends += Setting("autovacuum_worker_slots") + 2;
  } else {
    backends += Setting("autovacuum_max_workers") + (version >= 170000 ? 2 : 1);
  }
  return Setting("max_locks_per_transaction") * (backends + Setting("max_prepared_transactions"));
}

TEST(LockTable, SlotsFollowTheServersFormula) {
  Poller poller(Target(), TestPoll({.timeout_ms = 5000, .top_n = 5}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lock_table_slots", {{"target", "it"}}), ExpectedSlots());
  EXPECT_EQ(Value(samples, "pglock_lock_table_full", {{"target", "it"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_lock_manager_waiters", {{"target", "it"}}), 0);
}

TEST(LockTable, CountsEntriesOutsideTheFastPathBySessionAndType) {
  TestSession holder(Pg().Dsn() + " application_name=leaky-job");
  holder.Query("SELECT count(pg_advisory_lock(k)) FROM generate_series(1, 300) k");
  // A transaction holding locks on 40 relations: 16 fit a backend's fast-path slots up to 17 (more
  // from 18 on, sized by max_locks_per_transaction); the rest take entries of the shared table.
  std::string tables;
  for (int i = 1; i <= 40; ++i) {
    Pg().Exec("CREATE TABLE IF NOT EXISTS lock_table_t" + std::to_string(i) + " (x int)");
    tables += (i > 1 ? ", lock_table_t" : "lock_table_t") + std::to_string(i);
  }
  holder.Query("BEGIN");
  holder.Query("LOCK TABLE " + tables + " IN ACCESS SHARE MODE");
  const std::string held_shared =
      Pg().Scalar("SELECT count(*) FROM pg_locks WHERE pid = " + std::to_string(holder.Pid()) +
                  " AND NOT fastpath AND locktype <> 'advisory'");

  Poller poller(Target(), TestPoll({.timeout_ms = 5000, .top_n = 5}));
  const auto samples = PollAndScrape(poller);
  const std::string pid = std::to_string(holder.Pid());
  const auto advisory = Select(samples, "pglock_session_lock_table_entries",
                               {{"pid", pid}, {"locktype", "advisory"}});
  ASSERT_EQ(advisory.size(), 1u);
  EXPECT_EQ(advisory[0].value, 300);
  EXPECT_EQ(advisory[0].labels.at("application_name"), "leaky-job");
  EXPECT_EQ(advisory[0].labels.at("datname"), "postgres");
  EXPECT_EQ(advisory[0].labels.at("state"), "idle in transaction");
  const auto entries = Value(samples, "pglock_lock_table_entries", {{"target", "it"}});
  ASSERT_TRUE(entries.has_value());
  EXPECT_GE(*entries, 300 + std::stod(held_shared));
  EXPECT_EQ(Value(samples, "pglock_lock_table_last_good_age_seconds", {{"target", "it"}}), 0);
  holder.Query("ROLLBACK");
}

TEST(LockTable, TheExportersOwnBackendIsNeverCounted) {
  // The poll's own catalog locks spill past its fast-path slots: they are not a user's session.
  Poller poller(Target(), TestPoll({.timeout_ms = 5000, .top_n = 100}));
  const auto samples = PollAndScrape(poller);
  const std::string own = Pg().Scalar(
      "SELECT pid FROM pg_stat_activity WHERE application_name = 'pglock_exporter' LIMIT 1");
  ASSERT_FALSE(own.empty());
  EXPECT_TRUE(Select(samples, "pglock_session_lock_table_entries", {{"pid", own}}).empty());
  for (const Sample& s : Select(samples, "pglock_session_lock_table_entries", {})) {
    EXPECT_NE(s.labels.at("pid"), own);
  }
}

// Takes `n` more session advisory locks from `next` on; false (with *error) when the server
// refused one, the locks taken before it still held.
bool Leak(TestSession& leaker, int64_t* next, int n, std::string* error) {
  std::string ignored;
  const std::string sql = "SELECT count(pg_advisory_lock(k)) FROM generate_series(" +
                          std::to_string(*next) + ", " + std::to_string(*next + n - 1) + ") k";
  *next += n;
  return leaker.TryQuery(sql, &ignored, error);
}

TEST(LockTable, LeakedSessionLocksFillTheTableAndTheExporterStillSeesIt) {
  TestSession leaker(Pg().Dsn() + " application_name=leaky-worker");
  const std::string leaker_pid = std::to_string(leaker.Pid());
  const int64_t nominal = ExpectedSlots();  // a new connection fails once the table is full
  // Opened before the table fills: a new connection needs an entry too (its database lock).
  TestSession observer(Pg().Dsn());
  const std::string count_held =
      "SELECT count(*) FROM pg_locks WHERE pid = " + leaker_pid + " AND NOT fastpath";
  Poller poller(Target(), TestPoll({.timeout_ms = 5000, .top_n = 5}));
  double last_ratio = 0;
  bool warned_before_full = false;
  bool poll_failed = false;
  int64_t next = 1;
  std::string error;
  // Steps of 50 locks, a poll before each, until the server refuses a lock to either.
  for (int step = 0; step < 1000 && !poll_failed; ++step) {
    const auto samples = PollAndScrape(poller);
    if (Value(samples, "pglock_up", {{"target", "it"}}) != 1) {
      poll_failed = true;
      EXPECT_EQ(Value(samples, "pglock_lock_table_full", {{"target", "it"}}), 1);
      break;
    }
    const auto entries = Value(samples, "pglock_lock_table_entries", {{"target", "it"}});
    const auto slots = Value(samples, "pglock_lock_table_slots", {{"target", "it"}});
    ASSERT_TRUE(entries && slots);
    last_ratio = *entries / *slots;
    warned_before_full = warned_before_full || last_ratio > 0.7;
    if (!Leak(leaker, &next, 50, &error)) break;
  }
  const std::string held_then = observer.Query(count_held);
  std::printf(
      "first out of shared memory (%s): leaker holds %s locks, %lld nominal slots; the "
      "last good poll before it saw %.3f of them\n",
      poll_failed ? "the exporter's poll" : "the leaker", held_then.c_str(),
      static_cast<long long>(nominal), last_ratio);
  EXPECT_TRUE(warned_before_full) << "entries/slots never passed 0.7 before the table was full";
  // The leaker goes on until the server refuses it too: the table is full for every session.
  while (error.empty()) {
    if (!Leak(leaker, &next, 10, &error)) break;
    ASSERT_LT(next, 1000000);
  }
  ASSERT_NE(error.find("out of shared memory"), std::string::npos) << error;
  const std::string held = observer.Query(count_held);

  // The table full, the leaker holding everything: the exporter polls, or says the table is full
  // and names the leaker from a read of the table alone.
  const auto samples = PollAndScrape(poller);
  const bool up = Value(samples, "pglock_up", {{"target", "it"}}) == 1;
  std::printf("with the table full: pglock_up %d, pglock_lock_table_full %g\n", up ? 1 : 0,
              Value(samples, "pglock_lock_table_full", {{"target", "it"}}).value_or(-1));
  if (!up) {
    EXPECT_EQ(Value(samples, "pglock_lock_table_full", {{"target", "it"}}), 1);
  }
  const auto top = Select(samples, "pglock_session_lock_table_entries",
                          {{"pid", leaker_pid}, {"locktype", "advisory"}});
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].labels.at("application_name"), "leaky-worker");
  EXPECT_EQ(top[0].value, std::stod(held));
  const auto entries = Value(samples, "pglock_lock_table_entries", {{"target", "it"}});
  const auto slots = Value(samples, "pglock_lock_table_slots", {{"target", "it"}});
  ASSERT_TRUE(entries && slots);
  EXPECT_GT(*entries / *slots, 0.9);
  std::printf("entries %g of %g slots (%.3f)\n", *entries, *slots, *entries / *slots);

  leaker.Close();
  ASSERT_TRUE(testing::WaitFor(10, [&] {
    return Value(PollAndScrape(poller), "pglock_lock_table_full", {{"target", "it"}}) == 0;
  }));
}

}  // namespace
}  // namespace pglock

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new pglock::testing::PgEnvironment(
      {"max_connections = 20", "max_locks_per_transaction = 64"}));
  return RUN_ALL_TESTS();
}
