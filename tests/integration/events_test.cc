// Events between polls (lock events and lease transitions) against a real PostgreSQL with real
// timeouts of a few seconds: a lock dropped by idle_in_transaction_session_timeout and taken by
// another run, terminations, clean unlocks, disconnects, the leases table's sequence of
// transitions, session end counters and a real PgBouncer in transaction mode.
#include <gtest/gtest.h>

#include <thread>

#include "exporter/poll/poller.h"
#include "tests/support/delay_proxy.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/pgbouncer.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::PollAndScrape;
using testing::Sample;
using testing::Select;
using testing::Sum;
using testing::SumPresent;
using testing::TestPoll;
using testing::TestSession;
using testing::Value;
using testing::WaitFor;

// The server's log is read (csvlog here, every version has it): session ends are judged on its
// word, exact whatever else ends in the same interval.
TargetConfig Target() {
  TargetConfig t;
  t.name = "ev";
  t.dsn = Pg().Dsn();
  t.server_log.path = Pg().LogDir();
  t.server_log.format = "csvlog";
  t.server_log.read_interval = Duration(200);
  LockNameConfig rebuild;
  rebuild.name = "rebuild:run";
  rebuild.kind = LockNameConfig::Kind::kBigintText;
  rebuild.key_text = "rebuild:run";
  t.locks = {rebuild};
  return t;
}

double Losses(const std::vector<Sample>& s, const std::string& cause, const std::string& lock) {
  return Sum(s, "pglock_advisory_lock_losses_total", {{"cause", cause}, {"lock", lock}});
}

// Polls every 300 ms until `condition` holds on the scraped samples (or 15 s pass).
std::vector<Sample> PollUntil(Poller& poller,
                              const std::function<bool(const std::vector<Sample>&)>& condition) {
  std::vector<Sample> samples;
  WaitFor(15, [&] {
    samples = PollAndScrape(poller);
    if (condition(samples)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return false;
  });
  return samples;
}

TEST(Events, IdleInTransactionTimeoutDropsLockAndAnotherRunTakesIt) {
  Pg().Exec("DROP ROLE IF EXISTS rebuild_job");
  Pg().Exec("CREATE ROLE rebuild_job LOGIN");
  Pg().Exec(
      "ALTER ROLE rebuild_job IN DATABASE postgres SET idle_in_transaction_session_timeout = '2s'");
  Poller poller(Target(), TestPoll({.interval_ms = 500}));

  TestSession first(Pg().Dsn("postgres", "rebuild_job") + " application_name=rebuild-1");
  first.Query("BEGIN");  // the driver's implicit transaction, never committed
  EXPECT_EQ(first.Query("SELECT pg_try_advisory_lock(hashtextextended('rebuild:run', 0))"), "t");
  auto samples = PollAndScrape(poller);
  const auto remaining = Value(samples, "pglock_idle_in_transaction_timeout_remaining_seconds",
                               {{"pid", std::to_string(first.Pid())}});
  ASSERT_TRUE(remaining.has_value());
  EXPECT_LE(*remaining, 2.0);

  // Keep polling while the server ends the idle transaction; then the second run takes the key.
  std::unique_ptr<TestSession> second;
  samples = PollUntil(poller, [&](const std::vector<Sample>& s) {
    if (!second && Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                               std::to_string(first.Pid())) == "0") {
      second = std::make_unique<TestSession>(Pg().Dsn() + " application_name=rebuild-2");
      EXPECT_EQ(second->Query("SELECT pg_try_advisory_lock(hashtextextended('rebuild:run', 0))"),
                "t");
    }
    // sessions_fatal (14+) is flushed by the ended backend after its locks are gone: wait for it.
    const bool fatal_counted = Pg().VersionNum() < 140000 ||
                               Sum(s, "pglock_sessions_ended_total", {{"reason", "fatal"}}) >= 1;
    return Sum(s, "pglock_advisory_lock_takeovers_total", {{"lock", "rebuild:run"}}) > 0 &&
           fatal_counted;
  });
  EXPECT_EQ(Losses(samples, "idle_in_transaction_timeout", "rebuild:run"), 1);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_losses_total"), 1) << "exactly one loss";
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_takeovers_total", {{"lock", "rebuild:run"}}), 1);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_releases_total", {{"lock", "rebuild:run"}}),
            0)
      << "a loss is not a release";
  if (Pg().VersionNum() >= 140000) {  // pg_stat_database.sessions_fatal is 14+
    EXPECT_GE(Sum(samples, "pglock_sessions_ended_total", {{"reason", "fatal"}}), 1);
  }

  // Later polls do not count the same events again.
  samples = PollAndScrape(poller);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_losses_total"), 1);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_takeovers_total"), 1);
  second.reset();
  first.Close();
  Pg().Exec("DROP ROLE rebuild_job");
}

TEST(Events, TerminateBackendIsATerminatedLoss) {
  if (Pg().VersionNum() < 140000) {
    GTEST_SKIP() << "needs pg_stat_database.sessions_killed (PostgreSQL 14+)";
  }
  Poller poller(Target(), TestPoll({.interval_ms = 500}));
  TestSession victim(Pg().Dsn() + " application_name=victim");
  victim.Query("SELECT pg_advisory_lock(31337)");
  auto samples = PollAndScrape(poller);
  const double killed_before = Sum(samples, "pglock_sessions_ended_total", {{"reason", "killed"}});
  Pg().Scalar("SELECT pg_terminate_backend(" + std::to_string(victim.Pid()) + ")");
  // The server writes the FATAL line and drops the session's locks before the ended backend
  // flushes its statistics, so sessions_killed may rise a poll after the loss is judged.
  samples = PollUntil(poller, [&](const std::vector<Sample>& s) {
    return Sum(s, "pglock_advisory_lock_losses_total") > 0 &&
           Sum(s, "pglock_sessions_ended_total", {{"reason", "killed"}}) > killed_before;
  });
  EXPECT_EQ(Losses(samples, "terminated", "unnamed"), 1);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_losses_total"), 1);
  EXPECT_EQ(Sum(samples, "pglock_sessions_ended_total", {{"reason", "killed"}}), killed_before + 1);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_takeovers_total"), 0);
  // The next run takes the key: one takeover, not a hand-over, and counted once.
  TestSession next(Pg().Dsn() + " application_name=next-run");
  EXPECT_EQ(next.Query("SELECT pg_try_advisory_lock(31337)"), "t");
  samples = PollUntil(poller, [](const std::vector<Sample>& s) {
    return Sum(s, "pglock_advisory_lock_takeovers_total") > 0;
  });
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_takeovers_total", {{"lock", "unnamed"}}), 1);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_handovers_total"), 0);
  samples = PollAndScrape(poller);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_takeovers_total"), 1);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_losses_total"), 1);
}

TEST(Events, CleanUnlockIsAReleaseAndNoLoss) {
  Poller poller(Target(), TestPoll({.interval_ms = 500}));
  TestSession s(Pg().Dsn());
  s.Query("SELECT pg_advisory_lock(hashtextextended('rebuild:run', 0))");
  PollAndScrape(poller);
  s.Query("SELECT pg_advisory_unlock(hashtextextended('rebuild:run', 0))");
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_releases_total",
                {{"lock", "rebuild:run"}, {"reason", "unlocked"}}),
            1);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_losses_total"), 0);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_takeovers_total"), 0);
}

// A poll that moved no counter publishes the counters of the snapshot before it (shared, not
// copied); a counted release publishes new ones, shared again by the quiet polls after it.
TEST(Events, QuietPollsShareTheCountersOfTheSnapshotBefore) {
  Poller poller(Target(), TestPoll({.interval_ms = 500}));
  TestSession s(Pg().Dsn());
  s.Query("SELECT pg_advisory_lock(hashtextextended('rebuild:run', 0))");
  // Two polls in a row that share: anything counted at the start (the log's first read) is past.
  const auto shared_by_two_polls = [&] {
    return WaitFor(10, [&] {
      poller.PollOnceForTest();
      const auto before = poller.Latest()->counters;
      poller.PollOnceForTest();
      return poller.Latest()->counters == before;
    });
  };
  ASSERT_TRUE(shared_by_two_polls()) << "every poll copied its counters";
  const auto quiet = poller.Latest()->counters;
  const std::tuple<std::string, std::string, std::string> unlocked{"postgres", "rebuild:run",
                                                                   "unlocked"};
  const auto releases = [&](const Counters& c) {
    const auto it = c.releases.find(unlocked);
    return it == c.releases.end() ? 0.0 : it->second;
  };
  EXPECT_EQ(releases(*quiet), 0);
  s.Query("SELECT pg_advisory_unlock(hashtextextended('rebuild:run', 0))");
  poller.PollOnceForTest();
  const auto counted = poller.Latest()->counters;
  ASSERT_NE(counted, quiet);
  EXPECT_EQ(releases(*counted), 1);
  EXPECT_EQ(releases(*quiet), 0) << "a published snapshot's counters changed under it";
  ASSERT_TRUE(shared_by_two_polls());
  EXPECT_EQ(releases(*poller.Latest()->counters), 1);
}

TEST(Events, ClientThatClosesItsSessionIsAReleaseNotALoss) {
  Poller poller(Target(), TestPoll({.interval_ms = 500}));
  auto s = std::make_unique<TestSession>(Pg().Dsn());
  s->Query("SELECT pg_advisory_lock(8080)");
  const int pid = s->Pid();
  PollAndScrape(poller);
  s.reset();  // a clean Terminate message: no abnormal end is counted
  ASSERT_TRUE(WaitFor(5, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                       std::to_string(pid)) == "0";
  }));
  // PollUntil: on 14 the end may be judged an inventory later (EventTracker::Observe).
  const auto samples = PollUntil(poller, [](const std::vector<Sample>& s) {
    return Sum(s, "pglock_advisory_lock_releases_total", {{"reason", "session_closed"}}) > 0;
  });
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_releases_total",
                {{"lock", "unnamed"}, {"reason", "session_closed"}}),
            1);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_losses_total"), 0);
}

// One budget per poll: the follow-up read of the session end counters (a holder gone with no end
// counted) spends what is left of the poll's deadline, not a deadline of its own. Through a proxy
// that makes every round trip take 70% of poll.timeout, the batch and the follow-up read together
// would take 140% of it.
TEST(Events, FollowUpReadSpendsThePollsOneDeadline) {
  if (Pg().VersionNum() < 140000) {
    GTEST_SKIP() << "the follow-up read needs pg_stat_database.sessions_* (PostgreSQL 14+)";
  }
  testing::DelayProxy proxy(Pg().port());
  ASSERT_TRUE(proxy.started());
  TargetConfig t = Target();
  t.dsn = "host=127.0.0.1 port=" + std::to_string(proxy.port()) + " dbname=postgres user=postgres";
  PollConfig p = TestPoll({.interval_ms = 500});
  p.timeout = Duration(4000);
  Poller poller(t, p);
  auto holder = std::make_unique<TestSession>(Pg().Dsn());
  holder->Query("SELECT pg_advisory_lock(8181)");
  const int pid = holder->Pid();
  PollAndScrape(poller);
  holder.reset();  // a clean close: gone with no end counted, so the poll reads the counters again
  ASSERT_TRUE(WaitFor(5, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                       std::to_string(pid)) == "0";
  }));
  proxy.Delay(std::chrono::milliseconds(2800));
  const auto started = std::chrono::steady_clock::now();
  poller.PollOnceForTest();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_TRUE(poller.Latest()->up) << poller.Latest()->last_error;
  // One deadline ends the poll at 4 s; a second could not end it before 5.6 s (two delayed round
  // trips), so 5.6 s tells them apart however late a loaded machine's thread notices its deadline.
  EXPECT_LT(seconds, 5.6) << "one poll took " << seconds << " s with poll.timeout = 4 s";
  proxy.Delay(std::chrono::milliseconds(0));
}

TEST(Events, HandoverBetweenTwoPollsWithoutSeeingTheRelease) {
  Poller poller(Target(), TestPoll({.interval_ms = 500}));
  auto a = std::make_unique<TestSession>(Pg().Dsn());
  a->Query("SELECT pg_advisory_lock(hashtextextended('rebuild:run', 0))");
  PollAndScrape(poller);
  a.reset();
  TestSession b(Pg().Dsn());
  b.Query("SELECT pg_advisory_lock(hashtextextended('rebuild:run', 0))");
  // PollUntil: on 14 the end may be judged an inventory later (EventTracker::Observe).
  const auto samples = PollUntil(poller, [](const std::vector<Sample>& s) {
    return Sum(s, "pglock_advisory_lock_handovers_total") > 0;
  });
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_handovers_total", {{"lock", "rebuild:run"}}), 1);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_takeovers_total"), 0);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_losses_total"), 0);
}

TEST(Events, LeaseSequenceCountsEachTransitionOnce) {
  Pg().Exec("DROP TABLE IF EXISTS leases");
  Pg().Exec(
      "CREATE TABLE leases (name text PRIMARY KEY, holder text NOT NULL, "
      "taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)");
  TargetConfig t = Target();
  LeaseTableConfig lease;
  lease.table = lease.relation = "leases";
  t.leases = {lease};
  Poller poller(t, TestPoll({.interval_ms = 500}));
  auto take = [](const std::string& holder, double secs) {
    return "INSERT INTO leases (name, holder, taken_at, expires_at) VALUES ('sweep', '" + holder +
           "', now(), now() + make_interval(secs => " + std::to_string(secs) +
           ")) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, taken_at = "
           "excluded.taken_at, expires_at = excluded.expires_at WHERE leases.expires_at < now() "
           "RETURNING true";
  };
  auto kinds = [](const std::vector<Sample>& s, const char* kind) {
    return Sum(s, "pglock_lease_transitions_total", {{"lease", "sweep"}, {"kind", kind}});
  };
  PollAndScrape(poller);
  Pg().Exec(take("host-a:1:aa", 1.5));  // take
  auto s = PollAndScrape(poller);
  EXPECT_EQ(kinds(s, "acquired"), 1);
  Pg().Exec(
      "UPDATE leases SET expires_at = now() + interval '1.5 seconds' WHERE name = 'sweep' "
      "AND holder = 'host-a:1:aa'");  // renew
  s = PollAndScrape(poller);
  EXPECT_EQ(kinds(s, "renewed"), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1700));  // expire
  s = PollAndScrape(poller);
  EXPECT_EQ(Value(s, "pglock_lease_held", {{"lease", "sweep"}}), 0);
  EXPECT_LT(*Value(s, "pglock_lease_expires_in_seconds", {{"lease", "sweep"}}), 0);
  TestSession taker(Pg().Dsn());
  EXPECT_EQ(taker.Query(take("host-b:2:bb", 60)), "t");  // take over the expired lease
  s = PollAndScrape(poller);
  EXPECT_EQ(kinds(s, "expired_takeover"), 1);
  Pg().Exec("UPDATE leases SET holder = 'hand-edited' WHERE name = 'sweep'");
  s = PollAndScrape(poller);
  EXPECT_EQ(kinds(s, "overlap"), 1);  // a new holder while the old lease was still valid
  Pg().Exec("DELETE FROM leases WHERE name = 'sweep'");
  s = PollAndScrape(poller);
  EXPECT_EQ(kinds(s, "released"), 1);
  // The release left the table empty: the event still carries the poll's time, not the epoch.
  const auto snap = poller.Latest();
  ASSERT_NE(snap->events, nullptr);
  ASSERT_FALSE(snap->events->empty());
  const Event& released = *snap->events->newest();
  EXPECT_EQ(released.kind, EventKind::kLeaseReleased);
  EXPECT_NEAR(released.time, snap->last_success, 60);
  // Each exactly once over the whole sequence.
  EXPECT_EQ(kinds(s, "acquired"), 1);
  EXPECT_EQ(kinds(s, "renewed"), 1);
  EXPECT_EQ(kinds(s, "expired_takeover"), 1);
  EXPECT_EQ(kinds(s, "overlap"), 1);
  Pg().Exec("DROP TABLE leases");
}

TEST(Events, SessionLockLeakedThroughTransactionPoolerIsCounted) {
  testing::Pgbouncer bouncer;
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  TargetConfig t = Target();
  t.poolers = {{.name = "pgb", .admin_dsn = bouncer.Dsn("pgbouncer")},
               {.name = "gone", .admin_dsn = "host=127.0.0.1 port=1 dbname=pgbouncer"}};
  Poller poller(t, TestPoll({.interval_ms = 500}));
  {
    TestSession client(bouncer.Dsn("postgres"));
    client.Query("SELECT pg_advisory_lock(4242)");  // session lock on a pooled server connection
  }  // the client leaves; the server connection, and its lock, stay in the pool
  const auto samples = PollUntil(poller, [](const std::vector<Sample>& s) {
    return Sum(s, "pglock_pooled_session_advisory_locks") > 0;
  });
  EXPECT_EQ(Value(samples, "pglock_pooled_session_advisory_locks",
                  {{"pooler", "pgb"}, {"database", "postgres"}, {"user", "postgres"}}),
            1);
  EXPECT_EQ(Value(samples, "pglock_pooler_up", {{"pooler", "pgb"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_pooler_up", {{"pooler", "gone"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);  // a pooler that is down is not a target down
  Pg().Exec(
      "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = "
      "4242");
}

// Last: restarts the server, which ends every session.
TEST(Events, ServerRestartLosesEverythingHeld) {
  Poller poller(Target(), TestPoll({.interval_ms = 500}));
  TestSession a(Pg().Dsn()), b(Pg().Dsn());
  a.Query("SELECT pg_advisory_lock(hashtextextended('rebuild:run', 0))");
  b.Query("SELECT pg_advisory_lock(5150)");
  PollAndScrape(poller);
  ASSERT_TRUE(Pg().RestartServer());
  TestSession c(Pg().Dsn());
  c.Query("SELECT pg_advisory_lock(hashtextextended('rebuild:run', 0))");
  const auto samples = PollUntil(poller, [](const std::vector<Sample>& s) {
    return Value(s, "pglock_up") == 1 && Sum(s, "pglock_advisory_lock_losses_total") > 0;
  });
  EXPECT_EQ(Losses(samples, "server_restart", "rebuild:run"), 1);
  EXPECT_EQ(Losses(samples, "server_restart", "unnamed"), 1);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_losses_total"), 2);
  // The holders' applications may outlive their connections: the new holder of rebuild:run may
  // overlap the run that held it before the restart.
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_takeovers_total", {{"lock", "rebuild:run"}}), 1);
  EXPECT_EQ(Sum(samples, "pglock_advisory_lock_takeovers_total"), 1);
}

}  // namespace
}  // namespace pglock
