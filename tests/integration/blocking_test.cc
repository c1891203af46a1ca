// Verdicts and blocking episodes against a real PostgreSQL: for each kind of root blocker the
// verdict the poller publishes, and running its command frees the waiters; each way an episode
// ends (the root commits, the root is terminated, the waiters give up on lock_timeout) is one
// blocking_episode event and one count.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/http/oncall.h"
#include "exporter/poll/poller.h"
#include "exporter/snapshot/verdict.h"
#include "tests/support/pg_environment.h"
#include "tests/support/pgbouncer.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::TestPoll;
using testing::TestSession;
using testing::WaitFor;

constexpr int64_t kSweepKey = 4343;

TargetConfig Target() {
  TargetConfig t;
  t.name = "blocking";
  t.dsn = Pg().Dsn();
  LockNameConfig sweep;
  sweep.name = "sweep";
  sweep.kind = LockNameConfig::Kind::kBigint;
  sweep.key = kSweepKey;
  t.locks = {sweep};
  return t;
}

class Blocking : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Pg().Exec(
        "DROP TABLE IF EXISTS orders; CREATE TABLE orders(id int PRIMARY KEY, v int);"
        "INSERT INTO orders SELECT g, 0 FROM generate_series(1, 20) g;"
        "DO $$BEGIN CREATE ROLE migrator LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; "
        "END$$; ALTER TABLE orders OWNER TO migrator;"
        "ALTER ROLE migrator SET lock_timeout = '60s'");
  }

  // Polls until `n` sessions wait on a lock (the waits are real before the poll reads them).
  void PollWhenWaiting(int n) {
    ASSERT_TRUE(WaitFor(10, [&] {
      return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") ==
             std::to_string(n);
    }));
    poller_.PollOnceForTest();
  }
  const BlockingRoot* Root(int pid) {
    snap_ = poller_.Latest();
    if (!snap_ || !snap_->view) return nullptr;
    for (const BlockingRoot& r : snap_->view->blocking_roots) {
      if (r.root.id.pid == pid) return &r;
    }
    return nullptr;
  }
  // The blocking_episode events published so far.
  std::vector<Event> Episodes() {
    std::vector<Event> out;
    snap_ = poller_.Latest();
    if (snap_ && snap_->events) {
      for (const auto& e : *snap_->events) {
        if (e->kind == EventKind::kBlockingEpisode) out.push_back(*e);
      }
    }
    return out;
  }
  // -1 when absent: a database has no episode series before its first episode ends.
  double Count(const std::string& outcome) {
    snap_ = poller_.Latest();
    const auto it = snap_->counters->blocking_episodes.find({"postgres", outcome});
    return it == snap_->counters->blocking_episodes.end() ? -1 : it->second;
  }
  // Writes `text` to $PGLOCK_BLOCKING_OUT/<name> when set (the examples in docs/ come from there).
  static void Keep(const std::string& name, const std::string& text) {
    if (const char* dir = std::getenv("PGLOCK_BLOCKING_OUT")) {
      std::ofstream(std::string(dir) + "/" + name) << text << "\n";
    }
  }

  Poller poller_{Target(), TestPoll({.interval_ms = 500})};
  std::shared_ptr<const TargetSnapshot> snap_;
};

// The migration's ALTER TABLE queued behind a checkout request left idle in transaction, two
// readers queued behind the ALTER TABLE: cancel the ALTER TABLE, not the checkout; its role's
// lock_timeout is named. Running the command frees the readers at once.
TEST_F(Blocking, DdlQueuedBehindIdleCheckoutCancelsTheDdl) {
  TestSession checkout(Pg().Dsn() + " application_name=checkout");
  checkout.Query("BEGIN");
  checkout.Query("SELECT v FROM orders WHERE id = 1");
  TestSession migration(Pg().Dsn("postgres", "migrator") + " application_name=migrate");
  migration.Send("ALTER TABLE orders ADD COLUMN note text");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") ==
           "1";
  }));
  TestSession reader1(Pg().Dsn() + " application_name=report");
  TestSession reader2(Pg().Dsn() + " application_name=report");
  reader1.Send("SELECT count(*) FROM orders");
  reader2.Send("SELECT count(*) FROM orders");
  PollWhenWaiting(3);
  const BlockingRoot* root = Root(checkout.Pid());
  ASSERT_NE(root, nullptr);
  const Verdict& v = root->verdict;
  EXPECT_EQ(v.action, VerdictAction::kCancelStrongRequest);
  EXPECT_EQ(v.pid, migration.Pid());
  EXPECT_EQ(v.command, "SELECT pg_cancel_backend(" + std::to_string(migration.Pid()) + ")");
  EXPECT_EQ(v.frees, 2);
  EXPECT_EQ(v.lock_timeout, 60);
  EXPECT_EQ(v.lock_timeout_source, "role migrator");
  const std::string json = RenderLocksJson({snap_}, {});
  EXPECT_NE(json.find("\"action\":\"cancel_waiting_ddl\""), std::string::npos) << json;
  Keep("ddl_locks.json", json);
  Keep("ddl_locks.html", RenderLocksPage({snap_}, {}));

  // The verdict works: the readers go on, the checkout is untouched.
  Pg().Exec(v.command);
  EXPECT_TRUE(WaitFor(5, [&] { return reader1.SendDone(); }));
  EXPECT_TRUE(WaitFor(5, [&] { return reader2.SendDone(); }));
  EXPECT_EQ(checkout.Query("SELECT 'still here'"), "still here");
  checkout.Query("ROLLBACK");
}

// An idle-in-transaction root holding a named session lock: terminate it, naming the lock it
// drops. Running the command ends the episode as root_ended, terminated.
TEST_F(Blocking, IdleInTransactionRootIsTerminatedAndTheEpisodeEndsWithItsCause) {
  TestSession idle(Pg().Dsn() + " application_name=checkout");
  idle.Query("SELECT pg_advisory_lock(" + std::to_string(kSweepKey) + ")");
  idle.Query("BEGIN");
  idle.Query("UPDATE orders SET v = v + 1 WHERE id = 2");
  TestSession waiter(Pg().Dsn() + " application_name=api");
  waiter.Send("UPDATE orders SET v = v + 1 WHERE id = 2");
  PollWhenWaiting(1);
  const BlockingRoot* root = Root(idle.Pid());
  ASSERT_NE(root, nullptr);
  const Verdict v = root->verdict;
  EXPECT_EQ(v.action, VerdictAction::kTerminate);
  EXPECT_EQ(v.command, "SELECT pg_terminate_backend(" + std::to_string(idle.Pid()) + ")");
  EXPECT_EQ(v.frees, 1);
  EXPECT_EQ(v.dropped_locks.listed, std::vector<std::string>{"sweep"});
  EXPECT_EQ(v.dropped_locks.total, 1);
  const size_t before = Episodes().size();
  const int pid = idle.Pid();
  Pg().Exec(v.command);
  EXPECT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
  ASSERT_TRUE(WaitFor(5, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                       std::to_string(pid)) == "0";
  }));
  poller_.PollOnceForTest();
  if (Episodes().size() == before) poller_.PollOnceForTest();  // its end counted late
  const std::vector<Event> episodes = Episodes();
  ASSERT_EQ(episodes.size(), before + 1);
  const Event& e = episodes.back();
  EXPECT_EQ(e.outcome, EventOutcome::kRootEnded);
  EXPECT_EQ(e.cause, CauseOf(HoldEnd::kTerminated));
  EXPECT_EQ(e.previous.pid, pid);
  EXPECT_EQ(e.peak_blocked, 1);
  EXPECT_GE(Count("root_ended"), 1);
  Keep("episode_root_ended.json", EventJson(e));
}

// A statement running in autocommit, younger than its waiters' alert threshold: wait (a long
// statement is likelier than a stuck one), and the command for when it is not done by then, which
// frees the waiter.
TEST_F(Blocking, YoungActiveRootIsWaitedForThenCancelled) {
  TestSession busy(Pg().Dsn() + " application_name=batch");
  busy.Send("SELECT pg_advisory_xact_lock(77), pg_sleep(30)");
  ASSERT_TRUE(WaitFor(5, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted") ==
           "1";
  }));
  TestSession waiter(Pg().Dsn() + " application_name=api");
  waiter.Send("SELECT pg_advisory_xact_lock(77)");
  PollWhenWaiting(1);
  const BlockingRoot* root = Root(busy.Pid());
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->verdict.action, VerdictAction::kWait);
  EXPECT_EQ(root->verdict.command, "");
  EXPECT_EQ(root->verdict.then_command,
            "SELECT pg_cancel_backend(" + std::to_string(busy.Pid()) + ")");
  Pg().Exec(root->verdict.then_command);
  EXPECT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
}

// A prepared transaction has no session: ROLLBACK PREPARED '<gid>' after checking with its owner.
TEST_F(Blocking, PreparedTransactionIsRolledBackByGid) {
  TestSession tx(Pg().Dsn());
  tx.Query("BEGIN");
  tx.Query("UPDATE orders SET v = v + 1 WHERE id = 3");
  tx.Query("PREPARE TRANSACTION 'pay-42'");
  TestSession waiter(Pg().Dsn() + " application_name=api");
  waiter.Send("UPDATE orders SET v = v + 1 WHERE id = 3");
  PollWhenWaiting(1);
  snap_ = poller_.Latest();
  ASSERT_TRUE(snap_->view);
  ASSERT_EQ(snap_->view->blocking_roots.size(), 1u);
  const Verdict v = snap_->view->blocking_roots[0].verdict;
  EXPECT_EQ(v.action, VerdictAction::kRollbackPrepared);
  EXPECT_EQ(v.pid, 0);
  EXPECT_EQ(v.command, "ROLLBACK PREPARED 'pay-42'");
  EXPECT_EQ(v.frees, 1);
  Pg().Exec(v.command);
  EXPECT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
}

// A session lock leaked on a pooled server connection (PgBouncer, transaction mode): the pooler's
// RECONNECT of that pool, not pg_terminate_backend; running it frees the waiter.
TEST_F(Blocking, PooledLeakedSessionLockIsFreedByThePoolerReconnect) {
  testing::Pgbouncer bouncer;
  ASSERT_TRUE(bouncer.started());
  TargetConfig target = Target();
  target.poolers = {{"pgb", bouncer.Dsn("pgbouncer")}};
  Poller pooled(target, TestPoll({.interval_ms = 500}));
  TestSession client(bouncer.Dsn("postgres") + " application_name=worker");
  client.Query("SELECT pg_advisory_lock(6001)");  // leaked: the pool keeps the server connection
  const std::string server_pid =
      Pg().Scalar("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 6001");
  pooled.PollOnceForTest();  // the lock held by an idle server connection: proven a session lock
  pooled.PollOnceForTest();
  TestSession waiter(Pg().Dsn() + " application_name=api");
  waiter.Send("SELECT pg_advisory_lock(6001)");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") ==
           "1";
  }));
  pooled.PollOnceForTest();
  const auto snap = pooled.Latest();
  ASSERT_TRUE(snap->view);
  ASSERT_EQ(snap->view->blocking_roots.size(), 1u);
  const Verdict v = snap->view->blocking_roots[0].verdict;
  EXPECT_EQ(v.action, VerdictAction::kPoolerReconnect) << v.cost;
  EXPECT_EQ(std::to_string(v.pid), server_pid);
  EXPECT_EQ(v.command, "RECONNECT postgres");
  EXPECT_NE(v.then.find("pgb"), std::string::npos);
  TestSession admin(bouncer.Dsn("pgbouncer"));
  admin.Query(v.command);
  EXPECT_TRUE(WaitFor(10, [&] { return waiter.SendDone(); }));
}

// A deadlock the server has not broken yet (deadlock_timeout raised for the two sessions) is one
// deadlock event naming both sessions; once the server breaks it, pglock_deadlocks_total counts it.
TEST_F(Blocking, DeadlockCycleIsAnEventAndTheServerCountIsMirrored) {
  TestSession a(Pg().Dsn() + " application_name=transfer-a");
  TestSession b(Pg().Dsn() + " application_name=transfer-b");
  for (TestSession* s : {&a, &b}) {
    s->Query("SET deadlock_timeout = '4s'");
    s->Query("BEGIN");
  }
  a.Query("UPDATE orders SET v = v + 1 WHERE id = 10");
  b.Query("UPDATE orders SET v = v + 1 WHERE id = 11");
  a.Send("UPDATE orders SET v = v + 1 WHERE id = 11");
  b.Send("UPDATE orders SET v = v + 1 WHERE id = 10");
  PollWhenWaiting(2);
  std::vector<Event> deadlocks;
  for (const auto& e : *poller_.Latest()->events) {
    if (e->kind == EventKind::kDeadlock) deadlocks.push_back(*e);
  }
  ASSERT_EQ(deadlocks.size(), 1u);
  EXPECT_NE(deadlocks[0].detail.str().find("pid " + std::to_string(a.Pid())), std::string::npos)
      << deadlocks[0].detail;
  EXPECT_NE(deadlocks[0].detail.str().find("pid " + std::to_string(b.Pid())), std::string::npos);
  Keep("deadlock.json", EventJson(deadlocks[0]));
  // The database's series appears with its first deadlock (other tests may have made one).
  const auto counted_deadlocks = [&] {
    const auto& counted = poller_.Latest()->counters->deadlocks;
    const auto it = counted.find("postgres");
    return it == counted.end() ? 0.0 : it->second;
  };
  const double before = counted_deadlocks();
  ASSERT_TRUE(WaitFor(10, [&] { return a.SendDone() && b.SendDone(); }));
  a.Query("ROLLBACK");
  b.Query("ROLLBACK");
  // A backend flushes its statistics when it goes idle, at most once a second (else within 10 s).
  EXPECT_TRUE(WaitFor(15, [&] {
    poller_.PollOnceForTest();
    return counted_deadlocks() == before + 1;
  }));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  poller_.PollOnceForTest();
  EXPECT_EQ(poller_.Latest()->counters->deadlocks.at("postgres"), before + 1);
}

// The root commits: the episode ends as released, counted once, with its peak.
TEST_F(Blocking, RootCommitsAndTheEpisodeIsReleased) {
  TestSession root(Pg().Dsn() + " application_name=checkout");
  root.Query("BEGIN");
  root.Query("UPDATE orders SET v = v + 1 WHERE id = 4");
  TestSession w1(Pg().Dsn() + " application_name=api");
  TestSession w2(Pg().Dsn() + " application_name=api");
  w1.Send("UPDATE orders SET v = v + 1 WHERE id = 4");
  PollWhenWaiting(1);
  w2.Send("UPDATE orders SET v = v + 1 WHERE id = 4");
  PollWhenWaiting(2);
  const size_t before = Episodes().size();
  const double released = std::max(0.0, Count("released"));  // a baseline
  root.Query("COMMIT");
  EXPECT_TRUE(WaitFor(5, [&] { return w1.SendDone(); }));
  EXPECT_TRUE(WaitFor(5, [&] { return w2.SendDone(); }));
  poller_.PollOnceForTest();
  const std::vector<Event> episodes = Episodes();
  ASSERT_EQ(episodes.size(), before + 1);
  const Event& e = episodes.back();
  EXPECT_EQ(e.outcome, EventOutcome::kReleased);
  EXPECT_EQ(e.previous.pid, root.Pid());
  EXPECT_EQ(e.peak_blocked, 2);
  EXPECT_GT(e.duration, 0);
  EXPECT_EQ(Count("released"), released + 1);
  poller_.PollOnceForTest();  // nothing more: counted once
  EXPECT_EQ(Count("released"), released + 1);
  Keep("episode_released.json", EventJson(e));
}

// The exporter's connection is cut and the config reloaded in the middle of an episode: the
// failed poll neither ends it nor starts another; it ends once, started when it was first seen.
TEST_F(Blocking, AnEpisodeOutlivesAReconnectAndAReloadAndIsCountedOnce) {
  TestSession root(Pg().Dsn() + " application_name=checkout");
  root.Query("BEGIN");
  root.Query("UPDATE orders SET v = v + 1 WHERE id = 6");
  TestSession waiter(Pg().Dsn() + " application_name=api");
  waiter.Send("UPDATE orders SET v = v + 1 WHERE id = 6");
  PollWhenWaiting(1);
  const auto first_seen = std::chrono::steady_clock::now();
  const size_t before = Episodes().size();
  const double released = std::max(0.0, Count("released"));  // a baseline
  Pg().Exec(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
      "WHERE application_name = 'pglock_exporter'");
  poller_.PollOnceForTest();
  EXPECT_FALSE(poller_.Latest()->up);  // the failed poll
  poller_.Reconfigure(Target(), TestPoll({.interval_ms = 500}));
  ASSERT_TRUE(WaitFor(10, [&] {
    poller_.PollOnceForTest();
    return poller_.Latest()->up;
  }));
  EXPECT_EQ(Episodes().size(), before);  // still open
  root.Query("COMMIT");
  EXPECT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
  poller_.PollOnceForTest();
  const std::vector<Event> episodes = Episodes();
  ASSERT_EQ(episodes.size(), before + 1);
  EXPECT_EQ(episodes.back().outcome, EventOutcome::kReleased);
  // Started at the first poll, before the reconnect: not restarted by it.
  const double since_first =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - first_seen).count();
  EXPECT_GE(episodes.back().duration, since_first - 0.5);
  EXPECT_EQ(Count("released"), released + 1);
}

// The waiter gives up on its lock_timeout while the root stays idle in its transaction.
TEST_F(Blocking, WaitersHitLockTimeoutWhileTheRootStays) {
  TestSession root(Pg().Dsn() + " application_name=checkout");
  root.Query("BEGIN");
  root.Query("UPDATE orders SET v = v + 1 WHERE id = 5");
  TestSession waiter(Pg().Dsn() + " application_name=api");
  waiter.Query("SET lock_timeout = '2s'");
  waiter.Send("UPDATE orders SET v = v + 1 WHERE id = 5");
  PollWhenWaiting(1);
  const size_t before = Episodes().size();
  ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
  poller_.PollOnceForTest();
  const std::vector<Event> episodes = Episodes();
  ASSERT_EQ(episodes.size(), before + 1);
  EXPECT_EQ(episodes.back().outcome, EventOutcome::kWaitersLeft);
  EXPECT_EQ(episodes.back().previous.pid, root.Pid());
  EXPECT_GE(Count("waiters_left"), 1);
  Keep("episode_waiters_left.json", EventJson(episodes.back()));
  root.Query("ROLLBACK");
}

}  // namespace
}  // namespace pglock
