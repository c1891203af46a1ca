// Hostile data and least privilege against a real PostgreSQL: any bytes in names and lease
// holders (a SQL_ASCII database stores invalid UTF-8), 100 KB values, quotes and newlines in
// database and role names, a lease table locked by someone else, many distinct clients, and the
// exporter running as a pg_monitor role or as a role without it.
#include <gtest/gtest.h>

#include <thread>

#include "exporter/metrics/labels.h"
#include "exporter/poll/poller.h"
#include "exporter/util/utf8.h"
#include "tests/support/log_capture.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::LogCapture;
using testing::Pg;
using testing::Sample;
using testing::Select;
using testing::TestPoll;
using testing::TestSession;
using testing::Value;

bool ValidUtf8(const std::string& s) { return ToValidUtf8(s) == s; }

// Polls, checks the text with promtool and that every label value is valid UTF-8 and bounded.
std::vector<Sample> PollAndCheck(Poller& poller) {
  poller.PollOnceForTest();
  const std::string text = testing::Serialize({poller.Latest()});
  std::string out;
  EXPECT_TRUE(testing::PromtoolCheck(text, &out)) << out;
  EXPECT_TRUE(ValidUtf8(text));
  const auto samples = testing::ParseSamples(text);
  for (const Sample& s : samples) {
    for (const auto& [k, v] : s.labels) {
      EXPECT_LE(v.size(), kMaxLabelValueBytes + kTruncatedMarker.size()) << s.name << " " << k;
    }
  }
  return samples;
}

TEST(Hardening, InvalidUtf8AndHugeLeaseValuesInASqlAsciiDatabase) {
  Pg().Exec("DROP DATABASE IF EXISTS rawbytes");
  Pg().Exec(
      "CREATE DATABASE rawbytes ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' "
      "TEMPLATE template0");
  Pg().Exec(
      "CREATE TABLE leases (name text PRIMARY KEY, holder text NOT NULL, "
      "taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)",
      "rawbytes");
  Pg().Exec(
      "INSERT INTO leases VALUES "
      "(E'bad\\xff\\xfe\"name\\\\', E'host\\x01:12:\\xc3\\x28\\n\"}', now(), now() + interval '1 "
      "hour'), "
      "(repeat('n', 100000), repeat('h:1:', 25000), now(), now() + interval '1 hour'), "
      "(E'ok', repeat('z', 100000), now(), now() - interval '1 hour')",
      "rawbytes");
  TargetConfig t;
  t.name = "raw";
  t.dsn = Pg().Dsn("rawbytes");
  LeaseTableConfig lease;
  lease.table = lease.relation = "leases";
  lease.holder_pattern = "^([^:]+):([0-9]+):";
  lease.holder_labels = {"holder_host", "holder_pid"};
  t.leases = {lease};
  Poller poller(t, TestPoll());
  const auto samples = PollAndCheck(poller);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(Select(samples, "pglock_lease_held").size(), 3u);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "held"}}), 2);
  // The invalid bytes became U+FFFD; the control byte too; the quote survived escaping.
  EXPECT_EQ(Select(samples, "pglock_lease_held", {{"lease", "bad\xEF\xBF\xBD\xEF\xBF\xBD\"name\\"}})
                .size(),
            1u);
  EXPECT_EQ(Value(samples, "pglock_lease_holder_info", {{"holder_host", "host\xEF\xBF\xBD"}}), 1);
}

TEST(Hardening, QuotesAndNewlinesInDatabaseRoleAndApplicationNames) {
  PGconn* c = PQconnectdb(Pg().Dsn().c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK);
  PQclear(PQexec(c, "DROP DATABASE IF EXISTS \"we\"\"ird\nname\\\""));
  PQclear(PQexec(c, "CREATE DATABASE \"we\"\"ird\nname\\\""));
  PQclear(PQexec(c, "DROP ROLE IF EXISTS \"ev\"\"il\nrole\\\""));
  PQclear(PQexec(c, "CREATE ROLE \"ev\"\"il\nrole\\\" LOGIN"));
  PQfinish(c);
  const char* keys[] = {"host", "port", "dbname", "user", "application_name", nullptr};
  const std::string port = std::to_string(Pg().port());
  const char* values[] = {
      "127.0.0.1", port.c_str(), "we\"ird\nname\\", "ev\"il\nrole\\", "app \"quoted\" \\ back",
      nullptr};
  PGconn* hostile = PQconnectdbParams(keys, values, 0);
  ASSERT_EQ(PQstatus(hostile), CONNECTION_OK) << PQerrorMessage(hostile);
  PQclear(PQexec(hostile, "SELECT pg_advisory_lock(99)"));

  TargetConfig t;
  t.name = "quotes";
  t.dsn = Pg().Dsn();
  Poller poller(t, TestPoll());
  const auto samples = PollAndCheck(poller);
  const auto held = Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "99"}});
  ASSERT_EQ(held.size(), 1u);
  // A newline is a control character: it becomes U+FFFD; quotes and backslashes stay.
  EXPECT_EQ(held[0].labels.at("datname"), "we\"ird\xEF\xBF\xBDname\\");
  EXPECT_EQ(held[0].labels.at("usename"), "ev\"il\xEF\xBF\xBDrole\\");
  EXPECT_EQ(held[0].labels.at("application_name"), "app \"quoted\" \\ back");
  PQfinish(hostile);
}

TEST(Hardening, LockedLeaseTableFailsFastWithoutWaitingAndTheTargetStaysUp) {
  Pg().Exec("DROP TABLE IF EXISTS locked_leases");
  Pg().Exec(
      "CREATE TABLE locked_leases (name text PRIMARY KEY, holder text NOT NULL, "
      "taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)");
  TestSession ddl(Pg().Dsn());
  ddl.Query("BEGIN");
  ddl.Query("LOCK TABLE locked_leases IN ACCESS EXCLUSIVE MODE");
  TargetConfig t;
  t.name = "locked";
  t.dsn = Pg().Dsn();
  LeaseTableConfig lease;
  lease.table = lease.relation = "locked_leases";
  t.leases = {lease};
  Poller poller(t, TestPoll());
  const auto samples = PollAndCheck(poller);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "locked_leases"}}), 0);
  // lock_timeout (a quarter of poll.timeout, at most 500 ms) bounds the wait: the poll ends before
  // poll.timeout, which it would reach if it queued on the table (and then the target would be
  // down, not only the table).
  EXPECT_LT(*Value(samples, "pglock_poll_duration_seconds"),
            std::chrono::duration<double>(TestPoll().timeout).count());
  // The exporter is not left queued on the table: nobody waits on a relation lock after the poll.
  EXPECT_EQ(
      Pg().Scalar("SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'relation'"),
      "0");
  ddl.Query("ROLLBACK");
  Pg().Exec("DROP TABLE locked_leases");
}

TEST(Hardening, ThousandsOfSeriesAreCappedAndAggregatesStayExact) {
  std::vector<std::unique_ptr<TestSession>> sessions;
  for (int i = 0; i < 120; ++i) {
    sessions.push_back(std::make_unique<TestSession>(Pg().Dsn() + " application_name=client-" +
                                                     std::to_string(i)));
    sessions.back()->Query("SELECT pg_advisory_lock(k) FROM generate_series(" +
                           std::to_string(i * 100) + ", " + std::to_string(i * 100 + 49) + ") k");
  }
  TargetConfig t;
  t.name = "many";
  t.dsn = Pg().Dsn();
  Poller poller(t, TestPoll({.top_n = 10}));
  const auto samples = PollAndCheck(poller);
  EXPECT_EQ(Value(samples, "pglock_advisory_locks_held", {{"datname", "postgres"}}), 6000);
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds").size(), 10u);
  EXPECT_EQ(Select(samples, "pglock_client_idle_lock_holding_sessions").size(), 10u);
  EXPECT_EQ(Value(samples, "pglock_series_dropped_total",
                  {{"metric", "pglock_advisory_lock_held_seconds"}}),
            5990);
  EXPECT_GE(*Value(samples, "pglock_series_dropped_total", {{"metric", "pglock_client_sessions"}}),
            110);
  EXPECT_LT(samples.size(), 250u);  // bounded by top_n, not by 6,000 locks or 120 clients
}

TEST(Hardening, LeastPrivilegeRoleWorksAndAMissingPgMonitorIsVisible) {
  Pg().Exec("DROP TABLE IF EXISTS priv_leases");
  Pg().Exec(
      "CREATE TABLE priv_leases (name text PRIMARY KEY, holder text NOT NULL, "
      "taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)");
  Pg().Exec(
      "INSERT INTO priv_leases VALUES ('sweep', 'h:1:x', now(), now() + interval '1 minute')");
  for (const char* role : {"lp_monitor", "lp_nobody"}) {
    Pg().Exec(std::string("DROP ROLE IF EXISTS ") + role);
  }
  Pg().Exec("CREATE ROLE lp_monitor LOGIN IN ROLE pg_monitor");
  Pg().Exec("GRANT SELECT ON priv_leases TO lp_monitor");
  Pg().Exec("CREATE ROLE lp_nobody LOGIN");

  TestSession holder(Pg().Dsn() + " application_name=lp-holder");
  TestSession waiter(Pg().Dsn());
  holder.Query("SELECT pg_advisory_lock(4711)");
  waiter.Send("SELECT pg_advisory_lock(4711)");
  ASSERT_TRUE(testing::WaitFor(5, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory'") ==
           "1";
  }));

  LeaseTableConfig lease;
  lease.table = lease.relation = "priv_leases";
  TargetConfig monitor{"monitor", Pg().Dsn("postgres", "lp_monitor"), {}, {lease}, {}};
  Poller with_monitor(monitor, TestPoll());
  auto samples = PollAndCheck(with_monitor);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_sessions_hidden"), 0);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "priv_leases"}}), 1);
  const auto edges = Select(samples, "pglock_advisory_lock_wait_seconds", {{"lock", "4711"}});
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].labels.at("blocker_state"), "idle");
  EXPECT_EQ(edges[0].labels.at("blocker_client_addr"), "127.0.0.1");

  TargetConfig nobody{"nobody", Pg().Dsn("postgres", "lp_nobody"), {}, {lease}, {}};
  Poller without_monitor(nobody, TestPoll());
  samples = PollAndCheck(without_monitor);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_GE(*Value(samples, "pglock_sessions_hidden"), 2);  // the holder and the waiter
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "priv_leases"}}), 0);

  holder.Close();
  ASSERT_TRUE(testing::WaitFor(5, [&] { return waiter.SendDone(); }));
  waiter.Close();
  Pg().Exec("DROP TABLE priv_leases");
  Pg().Exec("DROP ROLE lp_monitor");
  Pg().Exec("DROP ROLE lp_nobody");
}

// A role whose sessions are reaped after 1 s idle: the exporter's own session, idle between polls,
// must survive, or its fatal end would count in the database where lock holders close sessions.
TEST(Hardening, TheExportersSessionOutlivesAShortIdleSessionTimeout) {
  if (Pg().VersionNum() < 140000) GTEST_SKIP() << "idle_session_timeout is PostgreSQL 14+";
  Pg().Exec("DROP ROLE IF EXISTS reaped_monitor");
  Pg().Exec("CREATE ROLE reaped_monitor LOGIN IN ROLE pg_monitor");
  Pg().Exec("ALTER ROLE reaped_monitor SET idle_session_timeout = '1s'");
  TargetConfig target{"reaped", Pg().Dsn("postgres", "reaped_monitor"), {}, {}, {}};
  Poller poller(target, TestPoll());
  EXPECT_EQ(Value(PollAndCheck(poller), "pglock_up"), 1);
  const std::string pid = Pg().Scalar(
      "SELECT pid FROM pg_stat_activity WHERE usename = 'reaped_monitor' AND "
      "application_name = 'pglock_exporter'");
  ASSERT_FALSE(pid.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // idle past the role's timeout
  EXPECT_EQ(Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid), "1")
      << "the exporter's session was reaped";
  EXPECT_EQ(Value(PollAndCheck(poller), "pglock_up"), 1);
  EXPECT_EQ(Pg().Scalar("SELECT pid FROM pg_stat_activity WHERE usename = 'reaped_monitor' AND "
                        "application_name = 'pglock_exporter'"),
            pid)
      << "the poll needed a new connection";
  Pg().Exec("DROP ROLE reaped_monitor");
}

TEST(Hardening, TheServersIdleSessionTimeoutIsReportedThoughTheExportersSessionTurnsItOff) {
  // Sessions reaped by the server's idle_session_timeout must match that timeout (else their fatal
  // ends count as 'unknown' and may be pinned on a lock holder): the exporter reads the value its
  // session started with, not the 0 it set for itself.
  if (Pg().VersionNum() < 140000) GTEST_SKIP() << "idle_session_timeout is PostgreSQL 14+";
  Pg().Exec("ALTER SYSTEM SET idle_session_timeout = '7min'");
  Pg().Exec("SELECT pg_reload_conf()");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Poller poller(TargetConfig{"reaping", Pg().Dsn(), {}, {}, {}}, TestPoll());
  const auto samples = PollAndCheck(poller);
  Pg().Exec("ALTER SYSTEM RESET idle_session_timeout");
  Pg().Exec("SELECT pg_reload_conf()");
  EXPECT_EQ(Value(samples, "pglock_setting_seconds",
                  {{"name", "idle_session_timeout"}, {"source", "session start"}}),
            420);
}

// The allocation that keeps a poll's memory in the backend (queries/backend_memory.sql) is best
// effort: a server that refuses it (here: no right to call repeat()) is polled, and it is logged.
TEST(Hardening, ABackendThatRefusesTheMemoryAllocationIsPolledAllTheSame) {
  Pg().Exec("DROP ROLE IF EXISTS frugal_monitor");
  Pg().Exec("CREATE ROLE frugal_monitor LOGIN IN ROLE pg_monitor");
  Pg().Exec("REVOKE EXECUTE ON FUNCTION repeat(text, integer) FROM PUBLIC");
  LogCapture log;
  Poller poller(TargetConfig{"frugal", Pg().Dsn("postgres", "frugal_monitor"), {}, {}, {}},
                TestPoll());
  const auto samples = PollAndCheck(poller);
  Pg().Exec("GRANT EXECUTE ON FUNCTION repeat(text, integer) TO PUBLIC");
  Pg().Exec("DROP ROLE frugal_monitor");
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(log.Count("refused the allocation that keeps a poll's memory"), 1) << log.Text();
  EXPECT_EQ(log.Count("permission denied for function repeat"), 1) << log.Text();
}

TEST(Hardening, WrongColumnTypeIsALeaseErrorAndASlowServerIsBoundedByTheDeadline) {
  Pg().Exec("DROP VIEW IF EXISTS slow_leases");
  Pg().Exec("DROP TABLE IF EXISTS typed_leases");
  Pg().Exec(
      "CREATE TABLE typed_leases (name text, holder text, taken_at timestamptz, "
      "expires_at text)");
  Pg().Exec("INSERT INTO typed_leases VALUES ('a', 'h', now(), 'tomorrow')");
  // A relation that answers slowly: every read sleeps 30 s.
  Pg().Exec(
      "CREATE VIEW slow_leases AS SELECT 'a'::text AS name, 'h'::text AS holder, "
      "now() AS taken_at, now() AS expires_at FROM pg_sleep(30)");
  TargetConfig t;
  t.name = "faults";
  t.dsn = Pg().Dsn();
  LeaseTableConfig typed;
  typed.table = typed.relation = "typed_leases";
  t.leases = {typed};
  {
    Poller poller(t, TestPoll());
    const auto samples = PollAndCheck(poller);
    EXPECT_EQ(Value(samples, "pglock_up"), 1);
    EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "typed_leases"}}), 0);
  }
  LeaseTableConfig slow;
  slow.table = slow.relation = "slow_leases";
  t.leases = {slow};
  PollConfig p = TestPoll();
  p.timeout = Duration(1000);
  LogCapture log;
  Poller poller(t, p);
  const auto start = std::chrono::steady_clock::now();
  poller.PollOnceForTest();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Bounded by the 1 s deadline, not by the server's 30 s; the margin is for a loaded machine
  // (CI runs this beside five other servers), where a poll's thread can wait half a second for a
  // core after its deadline.
  EXPECT_LT(took, 5);
  // Two bounds end the read, whichever comes first: the exporter's deadline (the poll fails, the
  // target is down) or the server's statement_timeout, which the exporter sets to the same second
  // and which starts later, with the statement. On a loaded machine the poll's thread can wake
  // after the server's error has arrived: then the lease table alone is in error, the target up.
  const auto samples = testing::ParseSamples(testing::Serialize({poller.Latest()}));
  const bool deadline =
      !poller.Latest()->up && poller.Latest()->last_error.find("timed out") != std::string::npos;
  const bool statement_timeout =
      poller.Latest()->up &&
      Value(samples, "pglock_lease_table_up", {{"table", "slow_leases"}}) == 0 &&
      log.Count(
          "lease:slow_leases: targets.leases.table: ERROR:  canceling statement due to "
          "statement timeout") == 1;
  EXPECT_TRUE(deadline || statement_timeout)
      << "up " << poller.Latest()->up << ", last error: " << poller.Latest()->last_error
      << "\nlog:\n"
      << log.Text();
  // The server ends the statement itself (statement_timeout), and the next poll reconnects.
  EXPECT_TRUE(testing::WaitFor(5, [] {
    return Pg().Scalar(
               "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
               "'pglock_exporter' AND state = 'active'") == "0";
  }));
  Pg().Exec("DROP VIEW slow_leases");
  Pg().Exec("DROP TABLE typed_leases");
}

}  // namespace
}  // namespace pglock
