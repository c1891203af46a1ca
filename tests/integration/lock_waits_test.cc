// Waits on every lock type against a real PostgreSQL: the pile-up (an idle
// transaction, an ALTER TABLE queued behind it, readers queued behind the ALTER), a chain of row
// locks, a prepared transaction as the blocker, a wait in another database, and the gate that
// keeps pg_locks unread while nobody waits. One poll of the real Poller each; the exposition text
// is parsed back, checked label by label and passed through `promtool check metrics`.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "exporter/collectors/registry.h"
#include "exporter/pg/batch.h"
#include "exporter/poll/poller.h"
#include "exporter/queries.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/statement_sql.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::PollAndScrape;
using testing::Sample;
using testing::Select;
using testing::StatementSql;
using testing::TestPoll;
using testing::TestSession;
using testing::Value;
using testing::WaitFor;

TargetConfig Target() {
  TargetConfig t;
  t.name = "it";
  t.dsn = Pg().Dsn();
  return t;
}

std::string Pid(const TestSession& s) { return std::to_string(s.Pid()); }

// The sessions of these tests. A waiter wakes at deadlock_timeout (1 s) to look for a deadlock
// and, with log_lock_waits, to log that it still waits; until it sleeps again pg_stat_activity
// shows no wait event, and a poll at that moment has no edge for it (seen once, on a loaded
// machine; docs/how-it-works.md). The polls here come a second or so after the waits began: no
// wake-up during a test (the deadlock's test sets its own).
std::string SessionDsn(const std::string& dbname = "postgres") {
  return Pg().Dsn(dbname) + " options='-c deadlock_timeout=10min'";
}

// Waits until `pid` waits on a lock of `locktype`, as pg_stat_activity shows it.
void WaitUntilWaiting(const TestSession& s, const std::string& locktype) {
  ASSERT_TRUE(WaitFor(
      10,
      [&] {
        return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " + Pid(s) +
                           " AND wait_event_type = 'Lock' AND wait_event = '" + locktype + "'") ==
               "1";
      }))
      << "session " << s.Pid() << " never started waiting on " << locktype;
}

// The one edge of `waiter`.
std::map<std::string, std::string> EdgeOf(const std::vector<Sample>& samples,
                                          const TestSession& waiter, double* seconds = nullptr) {
  const auto edges = Select(samples, "pglock_lock_wait_seconds", {{"waiter_pid", Pid(waiter)}});
  EXPECT_EQ(edges.size(), 1u) << "edges of " << waiter.Pid();
  if (edges.empty()) return {};
  if (seconds != nullptr) *seconds = edges[0].value;
  return edges[0].labels;
}

TEST(LockWaits, PileUpBehindAnIdleTransaction) {
  Pg().Exec("CREATE TABLE pileup (id int PRIMARY KEY, v int); INSERT INTO pileup VALUES (1, 0)");
  TestSession idle(SessionDsn() + " application_name=forgotten-tx");
  TestSession ddl(SessionDsn() + " application_name=migration");
  TestSession reader1(SessionDsn() + " application_name=web"), reader2(SessionDsn());
  idle.Query("BEGIN");
  idle.Query("UPDATE pileup SET v = v + 1 WHERE id = 1");
  ddl.Send("ALTER TABLE pileup ADD COLUMN w int");
  WaitUntilWaiting(ddl, "relation");
  reader1.Send("SELECT count(*) FROM pileup");
  WaitUntilWaiting(reader1, "relation");
  reader2.Send("SELECT count(*) FROM pileup");
  WaitUntilWaiting(reader2, "relation");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));

  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(
      Value(samples, "pglock_lock_waiters", {{"datname", "postgres"}, {"locktype", "relation"}}),
      3);
  EXPECT_GE(*Value(samples, "pglock_lock_wait_seconds_max",
                   {{"datname", "postgres"}, {"locktype", "relation"}}),
            1.0);
  EXPECT_EQ(Value(samples, "pglock_lock_queue_depth_max", {{"datname", "postgres"}}), 2);

  double ddl_wait = 0;
  const auto alter = EdgeOf(samples, ddl, &ddl_wait);
  EXPECT_EQ(alter.at("blocker_pid"), Pid(idle));  // the holder, not a waiter
  EXPECT_EQ(alter.at("blocker_application_name"), "forgotten-tx");
  EXPECT_EQ(alter.at("blocker_state"), "idle in transaction");
  EXPECT_EQ(alter.at("blocker_usename"), "postgres");
  EXPECT_EQ(alter.at("blocker_client_addr"), "127.0.0.1");
  EXPECT_EQ(alter.at("waiter_application_name"), "migration");
  EXPECT_EQ(alter.at("waiter_usename"), "postgres");
  EXPECT_EQ(alter.at("locktype"), "relation");
  EXPECT_EQ(alter.at("mode"), "AccessExclusiveLock");
  EXPECT_EQ(alter.at("relation"), "public.pileup");
  EXPECT_EQ(alter.at("datname"), "postgres");
  EXPECT_GE(ddl_wait, 1.0);
  EXPECT_LT(ddl_wait, 60.0);
  // The readers do not conflict with the idle transaction's RowExclusiveLock: what blocks them is
  // the ALTER's queued AccessExclusiveLock, so they point at the ALTER.
  for (const TestSession* r : {&reader1, &reader2}) {
    const auto e = EdgeOf(samples, *r);
    EXPECT_EQ(e.at("blocker_pid"), Pid(ddl));
    EXPECT_EQ(e.at("blocker_application_name"), "migration");
    EXPECT_EQ(e.at("blocker_state"), "active");
    EXPECT_EQ(e.at("mode"), "AccessShareLock");
    EXPECT_EQ(e.at("relation"), "public.pileup");
  }
  const auto roots = Select(samples, "pglock_blocking_root_blocked_sessions");
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0].value, 3);
  EXPECT_EQ(roots[0].labels.at("root_pid"), Pid(idle));
  EXPECT_EQ(roots[0].labels.at("root_application_name"), "forgotten-tx");
  EXPECT_EQ(roots[0].labels.at("root_state"), "idle in transaction");
  EXPECT_EQ(roots[0].labels.at("root_usename"), "postgres");
  EXPECT_EQ(roots[0].labels.at("root_client_addr"), "127.0.0.1");
  EXPECT_GE(*Value(samples, "pglock_blocking_root_state_seconds", {{"root_pid", Pid(idle)}}), 1.0);
  // The view keeps the forest for the on-call page: the root with every session behind it.
  const auto view = poller.Latest()->view;
  ASSERT_EQ(view->blocking_roots.size(), 1u);
  std::vector<int> behind = {ddl.Pid(), reader1.Pid(), reader2.Pid()};
  std::sort(behind.begin(), behind.end());
  EXPECT_EQ(view->blocking_roots[0].blocked_pids, behind);
  EXPECT_EQ(view->blocking_roots[0].depth, 2);
  // The advisory family is untouched by relation waits.
  EXPECT_EQ(Value(samples, "pglock_advisory_lock_waiters", {{"datname", "postgres"}}), 0);

  idle.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return ddl.SendDone(); }));
  ASSERT_TRUE(WaitFor(10, [&] { return reader1.SendDone() && reader2.SendDone(); }));
  // Once it is over the wait series go away and the queue depth is back to 0.
  const auto after = PollAndScrape(poller);
  EXPECT_TRUE(Select(after, "pglock_lock_wait_seconds").empty());
  EXPECT_TRUE(Select(after, "pglock_blocking_root_blocked_sessions").empty());
  EXPECT_EQ(Value(after, "pglock_lock_queue_depth_max", {{"datname", "postgres"}}), 0);
}

TEST(LockWaits, QueuedWaitersPointAtTheHolderNotAtEachOther) {
  Pg().Exec("CREATE TABLE queue (id int)");
  TestSession holder(SessionDsn()), first(SessionDsn()), second(SessionDsn());
  ASSERT_EQ(first.Query("SHOW deadlock_timeout"), "10min");
  holder.Query("BEGIN");
  holder.Query("LOCK TABLE queue IN ACCESS EXCLUSIVE MODE");
  first.Send("BEGIN; LOCK TABLE queue IN ACCESS EXCLUSIVE MODE");
  WaitUntilWaiting(first, "relation");
  second.Send("BEGIN; LOCK TABLE queue IN ACCESS EXCLUSIVE MODE");
  WaitUntilWaiting(second, "relation");
  // pg_blocking_pids() names the first waiter as a blocker of the second one too.
  EXPECT_EQ(Pg().Scalar("SELECT cardinality(pg_blocking_pids(" + Pid(second) + "))"), "2");

  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(EdgeOf(samples, first).at("blocker_pid"), Pid(holder));
  EXPECT_EQ(EdgeOf(samples, second).at("blocker_pid"), Pid(holder));
  EXPECT_EQ(Value(samples, "pglock_lock_queue_depth_max", {{"datname", "postgres"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_blocking_root_blocked_sessions", {{"root_pid", Pid(holder)}}),
            2);

  holder.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return first.SendDone(); }));
  first.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return second.SendDone(); }));
  second.Query("ROLLBACK");
}

TEST(LockWaits, ChainOfRowLocksPointsAtEachHolder) {
  Pg().Exec(
      "CREATE TABLE chain (id int PRIMARY KEY, v int); INSERT INTO chain VALUES (1, 0), (2, 0)");
  TestSession a(SessionDsn()), b(SessionDsn()), c(SessionDsn());
  a.Query("BEGIN");
  a.Query("UPDATE chain SET v = 1 WHERE id = 1");
  b.Query("BEGIN");
  b.Query("UPDATE chain SET v = 2 WHERE id = 2");
  b.Send("UPDATE chain SET v = 2 WHERE id = 1");  // B waits for A's transaction
  WaitUntilWaiting(b, "transactionid");
  c.Send("UPDATE chain SET v = 3 WHERE id = 2");  // C waits for B's transaction
  WaitUntilWaiting(c, "transactionid");

  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lock_waiters",
                  {{"datname", "postgres"}, {"locktype", "transactionid"}}),
            2);
  const auto eb = EdgeOf(samples, b);
  EXPECT_EQ(eb.at("blocker_pid"), Pid(a));
  EXPECT_EQ(eb.at("locktype"), "transactionid");
  EXPECT_EQ(eb.at("mode"), "ShareLock");
  EXPECT_EQ(eb.at("relation"), "");
  EXPECT_EQ(eb.at("blocker_state"), "idle in transaction");
  const auto ec = EdgeOf(samples, c);
  EXPECT_EQ(ec.at("blocker_pid"), Pid(b));
  EXPECT_EQ(ec.at("blocker_state"), "active");
  const auto roots = Select(samples, "pglock_blocking_root_blocked_sessions");
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0].labels.at("root_pid"), Pid(a));
  EXPECT_EQ(roots[0].value, 2);
  EXPECT_EQ(Value(samples, "pglock_lock_queue_depth_max", {{"datname", "postgres"}}), 2);

  a.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return b.SendDone(); }));
  b.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return c.SendDone(); }));
}

TEST(LockWaits, PreparedTransactionIsARootWithItsGid) {
  Pg().Exec("CREATE TABLE prep (id int PRIMARY KEY, v int); INSERT INTO prep VALUES (1, 0)");
  TestSession p(SessionDsn()), w(SessionDsn() + " application_name=payments");
  p.Query("BEGIN");
  p.Query("UPDATE prep SET v = 1 WHERE id = 1");
  p.Query("PREPARE TRANSACTION 'pglock-test-gid'");
  w.Send("UPDATE prep SET v = 2 WHERE id = 1");
  WaitUntilWaiting(w, "transactionid");
  EXPECT_EQ(Pg().Scalar("SELECT pg_blocking_pids(" + Pid(w) + ")::text"), "{0}");

  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  const auto e = EdgeOf(samples, w);
  EXPECT_EQ(e.at("blocker_pid"), "0");
  EXPECT_EQ(e.at("blocker_state"), "prepared");
  EXPECT_EQ(e.at("blocker_application_name"), "");
  EXPECT_EQ(e.at("blocker_usename"), "postgres");
  EXPECT_EQ(e.at("blocker_client_addr"), "");
  EXPECT_EQ(e.at("waiter_application_name"), "payments");
  const auto roots = Select(samples, "pglock_blocking_root_blocked_sessions");
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0].labels.at("root_pid"), "0");
  EXPECT_EQ(roots[0].labels.at("root_state"), "prepared");
  EXPECT_EQ(roots[0].labels.at("root_application_name"), "");
  EXPECT_EQ(roots[0].labels.at("datname"), "postgres");
  EXPECT_EQ(roots[0].value, 1);
  const auto view = poller.Latest()->view;
  ASSERT_EQ(view->blocking_roots.size(), 1u);
  EXPECT_EQ(view->blocking_roots[0].root.gid, "pglock-test-gid");
  EXPECT_EQ(view->blocking_roots[0].root.backend_type, "prepared transaction");

  Pg().Exec("ROLLBACK PREPARED 'pglock-test-gid'");
  ASSERT_TRUE(WaitFor(10, [&] { return w.SendDone(); }));
}

TEST(LockWaits, WaitInAnotherDatabaseShowsTheRelationOid) {
  Pg().Exec("CREATE DATABASE otherdb");
  Pg().Exec("CREATE TABLE far (id int)", "otherdb");
  const std::string oid = Pg().Scalar("SELECT 'far'::regclass::oid", "otherdb");
  TestSession holder(SessionDsn("otherdb") + " application_name=far-holder");
  TestSession waiter(SessionDsn("otherdb"));
  holder.Query("BEGIN");
  holder.Query("LOCK TABLE far IN ACCESS EXCLUSIVE MODE");
  waiter.Send("SELECT * FROM far");
  WaitUntilWaiting(waiter, "relation");

  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));  // connected to "postgres"
  const auto samples = PollAndScrape(poller);
  const auto e = EdgeOf(samples, waiter);
  EXPECT_EQ(e.at("datname"), "otherdb");
  EXPECT_EQ(e.at("relation"), oid);  // an OID of otherdb means nothing in postgres
  EXPECT_EQ(e.at("mode"), "AccessShareLock");
  EXPECT_EQ(e.at("blocker_pid"), Pid(holder));
  EXPECT_EQ(
      Value(samples, "pglock_lock_waiters", {{"datname", "otherdb"}, {"locktype", "relation"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_lock_queue_depth_max", {{"datname", "otherdb"}}), 1);
  const auto roots =
      Select(samples, "pglock_blocking_root_blocked_sessions", {{"datname", "otherdb"}});
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0].labels.at("root_application_name"), "far-holder");

  holder.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return waiter.SendDone(); }));
}

TEST(LockWaits, AdvisoryWaitsAreCountedUnderTheirLockType) {
  TestSession holder(SessionDsn()), waiter(SessionDsn());
  holder.Query("SELECT pg_advisory_lock(8080)");
  waiter.Send("SELECT pg_advisory_lock(8080)");
  WaitUntilWaiting(waiter, "advisory");
  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(
      Value(samples, "pglock_lock_waiters", {{"datname", "postgres"}, {"locktype", "advisory"}}),
      1);
  const auto e = EdgeOf(samples, waiter);
  EXPECT_EQ(e.at("blocker_pid"), Pid(holder));
  EXPECT_EQ(e.at("mode"), "ExclusiveLock");
  EXPECT_EQ(e.at("blocker_state"), "idle");
  holder.Query("SELECT pg_advisory_unlock_all()");
  ASSERT_TRUE(WaitFor(10, [&] { return waiter.SendDone(); }));
}

// Object locks (a function being dropped) carry classid, objid and objsubid like advisory locks,
// and the pg_locks statement lists the keys of their rows too (queries/advisory_locks.sql): they
// must stay an object lock held and one waited for, never advisory locks.
TEST(LockWaits, ObjectLocksAreNeverTakenForAdvisoryLocks) {
  Pg().Exec(
      "CREATE OR REPLACE FUNCTION lock_waits_object_f() RETURNS int LANGUAGE sql AS 'SELECT 1'");
  TestSession holder(SessionDsn()), waiter(SessionDsn());
  holder.Query("SELECT pg_advisory_lock(8181)");
  holder.Query("BEGIN");
  holder.Query("DROP FUNCTION lock_waits_object_f()");
  waiter.Send("DROP FUNCTION lock_waits_object_f()");
  WaitUntilWaiting(waiter, "object");
  ASSERT_EQ(Pg().Scalar("SELECT count(*) FROM pg_locks WHERE locktype = 'object' AND granted AND "
                        "pid = " +
                        Pid(holder)),
            "1");
  // The sessions of the tests before have ended, their locks with them (a backend ends after its
  // client has gone): the holder's is the only advisory lock left.
  ASSERT_TRUE(WaitFor(10, [] {
    return Pg().Scalar("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == "1";
  }));
  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(
      Value(samples, "pglock_lock_waiters", {{"datname", "postgres"}, {"locktype", "object"}}), 1);
  EXPECT_FALSE(
      Value(samples, "pglock_lock_waiters", {{"datname", "postgres"}, {"locktype", "advisory"}}));
  EXPECT_EQ(Value(samples, "pglock_advisory_locks_held", {{"datname", "postgres"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_session_lock_table_entries",
                  {{"pid", Pid(holder)}, {"locktype", "object"}}),
            1);
  EXPECT_EQ(Value(samples, "pglock_session_lock_table_entries",
                  {{"pid", Pid(holder)}, {"locktype", "advisory"}}),
            1);
  EXPECT_EQ(EdgeOf(samples, waiter).at("blocker_pid"), Pid(holder));
  holder.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return waiter.SendDone(); }));
  holder.Query("SELECT pg_advisory_unlock_all()");
  Pg().Exec("DROP FUNCTION IF EXISTS lock_waits_object_f()");
}

// A deadlock the server has not broken yet (deadlock_timeout 60s in both sessions): a cycle of
// two row-lock waits. The poll must end promptly, show both waits, and name no root: in a cycle
// nobody waits for nothing. The chain depth stops where the cycle closes.
TEST(LockWaits, DeadlockInProgressIsACycleWithoutRoots) {
  Pg().Exec(
      "CREATE TABLE deadlock (id int PRIMARY KEY, v int); INSERT INTO deadlock VALUES (1, 0), (2, "
      "0)");
  TestSession a(SessionDsn() + " application_name=dl-a"),
      b(SessionDsn() + " application_name=dl-b");
  for (TestSession* s : {&a, &b}) s->Query("SET deadlock_timeout = '60s'");
  a.Query("BEGIN");
  a.Query("UPDATE deadlock SET v = 1 WHERE id = 1");
  b.Query("BEGIN");
  b.Query("UPDATE deadlock SET v = 2 WHERE id = 2");
  a.Send("UPDATE deadlock SET v = 1 WHERE id = 2");
  WaitUntilWaiting(a, "transactionid");
  b.Send("UPDATE deadlock SET v = 2 WHERE id = 1");
  WaitUntilWaiting(b, "transactionid");

  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto started = std::chrono::steady_clock::now();
  const auto samples = PollAndScrape(poller);
  // Ended before its deadline (5 s): the deadlock did not hold the poll.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  ASSERT_TRUE(poller.Latest()->up) << poller.Latest()->last_error;
  EXPECT_EQ(EdgeOf(samples, a).at("blocker_pid"), Pid(b));
  EXPECT_EQ(EdgeOf(samples, b).at("blocker_pid"), Pid(a));
  EXPECT_EQ(EdgeOf(samples, a).at("blocker_state"), "active");
  EXPECT_EQ(Value(samples, "pglock_lock_waiters",
                  {{"datname", "postgres"}, {"locktype", "transactionid"}}),
            2);
  EXPECT_TRUE(Select(samples, "pglock_blocking_root_blocked_sessions").empty());
  EXPECT_TRUE(poller.Latest()->view->blocking_roots.empty());
  EXPECT_EQ(Value(samples, "pglock_lock_queue_depth_max", {{"datname", "postgres"}}), 2);

  // Break it: the cancelled statement ends b's wait, a gets the row once b rolls back.
  Pg().Scalar("SELECT pg_cancel_backend(" + Pid(b) + ")");
  ASSERT_TRUE(WaitFor(10, [&] { return b.SendDone(); }));
  b.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return a.SendDone(); }));
  a.Query("ROLLBACK");
}

// CREATE INDEX CONCURRENTLY waits for every older transaction's snapshot to go: a wait on the
// virtualxid of a transaction left open, which is the root.
TEST(LockWaits, CreateIndexConcurrentlyWaitsOnAnOldSnapshot) {
  Pg().Exec("CREATE TABLE cic (id int); CREATE TABLE elsewhere (id int)");
  TestSession old(SessionDsn() + " application_name=report"), ddl(SessionDsn());
  old.Query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  old.Query("SELECT count(*) FROM elsewhere");
  ddl.Send("CREATE INDEX CONCURRENTLY cic_id ON cic (id)");
  WaitUntilWaiting(ddl, "virtualxid");

  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  const auto e = EdgeOf(samples, ddl);
  EXPECT_EQ(e.at("locktype"), "virtualxid");
  EXPECT_EQ(e.at("mode"), "ShareLock");
  EXPECT_EQ(e.at("relation"), "");
  EXPECT_EQ(e.at("blocker_pid"), Pid(old));
  EXPECT_EQ(e.at("blocker_application_name"), "report");
  EXPECT_EQ(e.at("blocker_state"), "idle in transaction");
  EXPECT_EQ(
      Value(samples, "pglock_lock_waiters", {{"datname", "postgres"}, {"locktype", "virtualxid"}}),
      1);
  EXPECT_EQ(Value(samples, "pglock_blocking_root_blocked_sessions", {{"root_pid", Pid(old)}}), 1);

  old.Query("COMMIT");
  ASSERT_TRUE(WaitFor(10, [&] { return ddl.SendDone(); }));
}

// A parallel query whose workers wait on a lock (a parallel-safe function reads a table another
// session locked; the leader only gathers): each worker waits, but the query counts once, under
// its leader, with the holder as its blocker and root.
TEST(LockWaits, ParallelWorkersCountUnderTheirLeader) {
  if (Pg().VersionNum() < 130000) GTEST_SKIP() << "pg_stat_activity.leader_pid is 13+";
  Pg().Exec(
      "CREATE TABLE par_big AS SELECT g AS id FROM generate_series(1, 10000) g; "
      "CREATE TABLE par_locked (id int); "
      "CREATE FUNCTION par_peek(int) RETURNS bool LANGUAGE plpgsql PARALLEL SAFE AS "
      "$$BEGIN PERFORM 1 FROM par_locked LIMIT 1; RETURN true; END$$");
  TestSession holder(SessionDsn() + " application_name=par-holder"), query(SessionDsn());
  holder.Query("BEGIN");
  holder.Query("LOCK TABLE par_locked IN ACCESS EXCLUSIVE MODE");
  query.Query(
      "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; "
      "SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0; "
      "SET parallel_leader_participation = off");
  ASSERT_NE(query.Query("EXPLAIN (FORMAT JSON) SELECT count(*) FROM par_big WHERE par_peek(id)")
                .find("Gather"),
            std::string::npos);
  query.Send("SELECT count(*) FROM par_big WHERE par_peek(id)");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar(
               "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker' "
               "AND wait_event_type = 'Lock' AND leader_pid = " +
               Pid(query)) == "2";
  })) << "the parallel workers never waited";

  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(
      Value(samples, "pglock_lock_waiters", {{"datname", "postgres"}, {"locktype", "relation"}}),
      1);
  const auto e = EdgeOf(samples, query);
  EXPECT_EQ(e.at("blocker_pid"), Pid(holder));
  EXPECT_EQ(e.at("relation"), "public.par_locked");
  EXPECT_EQ(e.at("mode"), "AccessShareLock");
  const auto roots = Select(samples, "pglock_blocking_root_blocked_sessions");
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0].labels.at("root_pid"), Pid(holder));
  EXPECT_EQ(roots[0].value, 1);

  holder.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return query.SendDone(); }));
}

// EXPLAIN ANALYZE of `sql` on `s`, as text.
std::string Explain(TestSession& s, const std::string& sql) {
  std::string plan, error;
  s.Query("CREATE TEMP TABLE IF NOT EXISTS plan_out (line text); TRUNCATE plan_out");
  EXPECT_TRUE(s.TryQuery(
      "DO $$DECLARE l text; BEGIN FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ' || "
      "$q$" +
          sql + "$q$ LOOP INSERT INTO plan_out VALUES (l); END LOOP; END$$",
      &plan, &error))
      << error;
  return s.Query("SELECT string_agg(line, E'\\n') FROM plan_out");
}

// Every statement a poll sends (the prepared ones by their text).
std::vector<std::pair<std::string, std::string>> PollStatements(bool inventory) {
  const int version = Pg().VersionNum();
  StatementBatch batch;
  std::vector<PreparedStatement> prepared;
  PollPlan plan;
  plan.server_version_num = version;
  plan.inventory = inventory;
  for (const Collector* c : Collectors()) {
    c->Plan(plan, &batch);
    for (PreparedStatement& p : c->Prepared(version)) prepared.push_back(std::move(p));
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, sql] : batch.Statements()) {
    out.emplace_back(name, StatementSql(prepared, sql));
  }
  return out;
}

// The cost rule: while no backend waits, a tiered poll reads neither pg_locks nor the prepared
// transactions.
TEST(LockWaits, NobodyWaitingMeansPgLocksIsNeverRead) {
  TestSession s(SessionDsn());
  for (const auto& [name, sql] : PollStatements(/*inventory=*/false)) {
    SCOPED_TRACE(name);
    const std::string plan = Explain(s, sql);
    if (name == "advisory_locks") {
      EXPECT_NE(plan.find("Function Scan on pg_lock_status l (never executed)"), std::string::npos)
          << plan;
    } else if (name == "lock_waits") {
      EXPECT_NE(plan.find("Function Scan on pg_prepared_xact p (never executed)"),
                std::string::npos)
          << plan;
    }
    if (name != "advisory_locks") {
      EXPECT_EQ(plan.find("pg_lock_status"), std::string::npos) << plan;
    }
  }
}

// With waits of every kind, a poll still reads pg_locks once: the advisory statement brings the
// pending requests of other lock types along (EXPLAIN shows one scan of pg_lock_status, once).
TEST(LockWaits, WaitersOfEveryKindMeanOneReadOfPgLocks) {
  Pg().Exec("CREATE TABLE one_read (id int)");
  TestSession holder(SessionDsn()), row_waiter(SessionDsn()), advisory_waiter(SessionDsn());
  holder.Query("BEGIN");
  holder.Query("LOCK TABLE one_read IN ACCESS EXCLUSIVE MODE");
  holder.Query("SELECT pg_advisory_lock(9090)");
  row_waiter.Send("SELECT * FROM one_read");
  WaitUntilWaiting(row_waiter, "relation");
  advisory_waiter.Send("SELECT pg_advisory_lock(9090)");
  WaitUntilWaiting(advisory_waiter, "advisory");
  TestSession s(SessionDsn());
  for (const bool inventory : {true, false}) {
    SCOPED_TRACE(inventory ? "inventory" : "tiered");
    int reads = 0;
    for (const auto& [name, sql] : PollStatements(inventory)) {
      const std::string plan = Explain(s, sql);
      for (size_t at = plan.find("Function Scan on pg_lock_status"); at != std::string::npos;
           at = plan.find("Function Scan on pg_lock_status", at + 1)) {
        const std::string scan = plan.substr(at, plan.find('\n', at) - at);
        EXPECT_EQ(scan.find("never executed"), std::string::npos) << name << ": " << plan;
        ++reads;
      }
    }
    EXPECT_EQ(reads, 1);
  }
  // And the poll sees both waits, each under its lock type.
  Poller poller(Target(), TestPoll({.timeout_ms = 5000}));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(
      Value(samples, "pglock_lock_waiters", {{"datname", "postgres"}, {"locktype", "relation"}}),
      1);
  EXPECT_EQ(
      Value(samples, "pglock_lock_waiters", {{"datname", "postgres"}, {"locktype", "advisory"}}),
      1);
  EXPECT_EQ(EdgeOf(samples, row_waiter).at("relation"), "public.one_read");
  holder.Query("ROLLBACK");
  holder.Query("SELECT pg_advisory_unlock_all()");
  ASSERT_TRUE(WaitFor(10, [&] { return row_waiter.SendDone() && advisory_waiter.SendDone(); }));
}

}  // namespace
}  // namespace pglock
