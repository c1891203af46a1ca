#include "exporter/snapshot/verdict.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/collectors/registry.h"

namespace pglock {
namespace {

constexpr uint32_t kDb = 16384;
constexpr uint32_t kRole = 16500;
constexpr double kNow = 1'700'000'000;

// A client backend as pg_stat_activity shows it.
Session Client(int pid, const std::string& state, double since) {
  Session s;
  s.pid = pid;
  s.datid = kDb;
  s.datname = "shop";
  s.usesysid = kRole;
  s.usename = "app";
  s.application_name = "checkout";
  s.client_addr = "10.0.0.7";
  s.state = state;
  s.backend_start = kNow - 7200;
  s.state_change = kNow - since;
  s.query_start = kNow - since;
  if (state != "idle") s.xact_start = kNow - since - 5;
  return s;
}

Session Waiter(int pid, std::vector<int> blocked_by, double since) {
  Session s = Client(pid, "active", since);
  s.waiting_on_lock = true;
  s.blocked_by = std::move(blocked_by);
  return s;
}

LockWaitRow Wants(int pid, const std::string& mode, double since) {
  return {pid, "relation", mode, kDb, "public.orders", "", "relation:16384:24576", kNow - since};
}

// The checkout request left idle in transaction, an ALTER TABLE queued behind it, two readers
// behind the ALTER TABLE: as pg_stat_activity and pg_locks give them.
PollData DdlBehindIdleCheckout() {
  PollData d;
  d.now = kNow;
  d.server_version_num = 150000;
  d.sessions = {Client(100, "idle in transaction", 240), Waiter(200, {100}, 60),
                Waiter(301, {200}, 30), Waiter(302, {200}, 20)};
  d.sessions[1].application_name = "migrate";
  d.lock_waits = {Wants(200, "AccessExclusiveLock", 60), Wants(301, "AccessShareLock", 30),
                  Wants(302, "AccessShareLock", 20)};
  d.locks.push_back({{kDb, 0, 7742, 1}, 100, true, true, std::nullopt, false});
  return d;
}

TargetView ViewOf(const PollData& d, const LockNames* names = nullptr) {
  AnalyzeOptions options;
  options.names = names;
  HoldHistory history;
  std::map<std::string, int64_t> dropped;
  return Analyze(d, options, &history, &dropped);
}

TEST(Verdict, DdlQueuedBehindIdleCheckoutCancelsTheDdlNotItsBlocker) {
  const TargetView v = ViewOf(DdlBehindIdleCheckout());
  ASSERT_EQ(v.blocking_roots.size(), 1u);
  const Verdict& verdict = v.blocking_roots[0].verdict;
  EXPECT_EQ(verdict.action, VerdictAction::kCancelStrongRequest);
  EXPECT_EQ(verdict.pid, 200);
  EXPECT_EQ(verdict.command, "SELECT pg_cancel_backend(200)");
  EXPECT_EQ(verdict.frees, 2);
  EXPECT_NE(verdict.then.find("lock_timeout"), std::string::npos);
  EXPECT_NE(verdict.cost.find("No lock_timeout is set"), std::string::npos) << verdict.cost;
  EXPECT_EQ(verdict.lock_timeout, 0);
}

TEST(Verdict, DdlCaseSaysWhichLockTimeoutItsRoleHas) {
  PollData d = DdlBehindIdleCheckout();
  d.settings = {{"lock_timeout", 0, "default"}};
  d.overrides = {{"lock_timeout", 0, kRole, "*", "app", 3},
                 {"lock_timeout", kDb, 0, "shop", "*", 9}};
  const Verdict verdict = ViewOf(d).blocking_roots[0].verdict;
  EXPECT_EQ(verdict.lock_timeout, 3);
  EXPECT_EQ(verdict.lock_timeout_source, "role app");
  EXPECT_NE(verdict.cost.find("gives up by itself"), std::string::npos) << verdict.cost;
}

TEST(Verdict, IdleInTransactionRootIsTerminatedAndItsLocksNamed) {
  PollData d = DdlBehindIdleCheckout();
  d.sessions.resize(2);  // only the ALTER TABLE waits: nothing queues behind it
  d.lock_waits.resize(1);
  LockNames names;
  AddBigintName(7742, "report-daily", &names);
  const Verdict verdict = ViewOf(d, &names).blocking_roots[0].verdict;
  EXPECT_EQ(verdict.action, VerdictAction::kTerminate);
  EXPECT_EQ(verdict.command, "SELECT pg_terminate_backend(100)");
  EXPECT_EQ(verdict.frees, 1);
  EXPECT_EQ(verdict.dropped_locks.listed, std::vector<std::string>{"report-daily"});
  EXPECT_EQ(verdict.dropped_locks.total, 1);
  EXPECT_NE(verdict.cost.find("open 4 min"), std::string::npos) << verdict.cost;
  EXPECT_NE(verdict.cost.find("report-daily"), std::string::npos);
  EXPECT_NE(verdict.cost.find("loss"), std::string::npos);
}

// A statement that has run past its waiters' alert threshold: stuck, or too long to wait for.
TEST(Verdict, ActiveRootPastTheWaitersThresholdIsCancelledFirst) {
  PollData d = DdlBehindIdleCheckout();
  d.sessions[0] = Client(100, "active", kWaitersAlertSeconds + 1);
  d.sessions.resize(2);
  d.lock_waits.resize(1);
  d.sessions[1] = Waiter(200, {100}, 10);
  d.lock_waits[0] = Wants(200, "AccessShareLock", 10);
  const Verdict verdict = ViewOf(d).blocking_roots[0].verdict;
  EXPECT_EQ(verdict.action, VerdictAction::kCancel);
  EXPECT_EQ(verdict.command, "SELECT pg_cancel_backend(100)");
  EXPECT_EQ(verdict.then_command, "SELECT pg_terminate_backend(100)");
  EXPECT_EQ(verdict.then,
            "if it is still there a few seconds later: "
            "SELECT pg_terminate_backend(100)");
}

// A migration running its 15 s statement with a second deploy waiting: cancelling it makes the
// duplicate redo it. Wait, and say until when.
TEST(Verdict, ActiveRootYoungerThanTheWaitersThresholdIsWaitedFor) {
  PollData d = DdlBehindIdleCheckout();
  d.sessions[0] = Client(100, "active", 15);
  d.sessions.resize(2);
  d.lock_waits.resize(1);
  d.sessions[1] = Waiter(200, {100}, 12);
  d.lock_waits[0] = Wants(200, "AccessShareLock", 12);
  const Verdict verdict = ViewOf(d).blocking_roots[0].verdict;
  EXPECT_EQ(verdict.action, VerdictAction::kWait);
  EXPECT_EQ(std::string(VerdictActionName(verdict.action)), "wait");
  EXPECT_EQ(verdict.command, "");
  EXPECT_EQ(verdict.then_command, "SELECT pg_cancel_backend(100)");
  EXPECT_NE(verdict.then.find("30 s"), std::string::npos) << verdict.then;
  EXPECT_NE(verdict.cost.find("has run 15 s"), std::string::npos) << verdict.cost;
}

// A second knex deploy waits behind a healthy migration: knex takes its lock with SELECT ... FOR
// UPDATE and UPDATE of knex_migrations_lock's row inside the migration's own transaction, so the
// duplicate's SELECT ... FOR UPDATE waits for that transaction (a row_lock table shows the row
// held by the migration's session). The migration is the work; the waiter is the duplicate.
PollData KnexDeployBehindMigration(const std::string& root_state, double root_since) {
  PollData d;
  d.now = kNow;
  d.server_version_num = 150000;
  d.sessions = {Client(100, root_state, root_since), Waiter(200, {100}, 120)};
  d.sessions[0].application_name = "deploy-1";
  d.sessions[1].application_name = "deploy-2";
  d.lock_waits = {
      {200, "transactionid", "ShareLock", kDb, "", "900", "transactionid:900", kNow - 120}};
  LeaseTableData t;
  t.table = "knex_migrations_lock";
  t.ok = true;
  t.has_expiry = false;
  t.has_taken_at = false;
  t.row_lock = true;
  t.now = kNow;
  t.total = t.held = 1;
  t.rows.push_back({"migrations-1", "deploy-1 (pid 100)", kNow - 125, 0, true, 100, 900});
  d.leases.push_back(t);
  return d;
}

TEST(Verdict, DuplicateDeployBehindAMigrationRunningAStatementWaitsForTheMigration) {
  const Verdict v = ViewOf(KnexDeployBehindMigration("active", 100)).blocking_roots[0].verdict;
  EXPECT_EQ(v.action, VerdictAction::kWaitForHolder);
  EXPECT_EQ(std::string(VerdictActionName(v.action)), "wait_for_holder");
  EXPECT_EQ(v.command, "");
  EXPECT_EQ(v.then_command, "SELECT pg_cancel_backend(200)");
  EXPECT_NE(v.cost.find("holds knex_migrations_lock migrations-1"), std::string::npos) << v.cost;
  EXPECT_NE(v.cost.find("running a statement for 100 s"), std::string::npos) << v.cost;
}

// knex's client between two statements of the migration: a moment idle in transaction is
// progress; a minute of it is not, and the ordinary verdict (terminate the idle root) stands.
TEST(Verdict, MigrationBetweenStatementsIsWaitedForUntilItStallsIdle) {
  EXPECT_EQ(
      ViewOf(KnexDeployBehindMigration("idle in transaction", 2)).blocking_roots[0].verdict.action,
      VerdictAction::kWaitForHolder);
  EXPECT_EQ(
      ViewOf(KnexDeployBehindMigration("idle in transaction", 60)).blocking_roots[0].verdict.action,
      VerdictAction::kTerminate);
}

// node-pg-migrate holds pg_advisory_lock(7241865325823964) on its session, idle between its
// migrations' transactions; a second run waits for the same key.
TEST(Verdict, DuplicateRunWaitingForAMigrationToolsAdvisoryKeyWaitsForTheHolder) {
  constexpr int64_t kKey = 7241865325823964;
  const AdvisoryKey key{kDb, static_cast<uint32_t>(kKey >> 32),
                        static_cast<uint32_t>(kKey & 0xffffffff), 1};
  PollData d;
  d.now = kNow;
  d.server_version_num = 150000;
  d.sessions = {Client(100, "idle", 3), Waiter(200, {100}, 150)};
  d.locks.push_back({key, 100, true, true, std::nullopt, true});
  d.locks.push_back({key, 200, true, false, kNow - 150, false});
  LockNames names;
  AddBigintName(kKey, "migrations", &names);
  const Verdict v = ViewOf(d, &names).blocking_roots[0].verdict;
  EXPECT_EQ(v.action, VerdictAction::kWaitForHolder);
  EXPECT_NE(v.cost.find("holds advisory lock migrations"), std::string::npos) << v.cost;
  EXPECT_EQ(v.then_command, "SELECT pg_cancel_backend(200)");
}

// Any other key: a job's mutex whose holder runs for minutes gets the ordinary verdict (the
// waiter has waited past the alerts' threshold: cancel the holder).
TEST(Verdict, AnOrdinaryAdvisoryKeysHolderGetsTheOrdinaryVerdict) {
  const AdvisoryKey key{kDb, 0, 77, 1};
  PollData d;
  d.now = kNow;
  d.server_version_num = 150000;
  d.sessions = {Client(100, "active", 100), Waiter(200, {100}, 90)};
  d.locks.push_back({key, 100, true, true, std::nullopt, false});
  d.locks.push_back({key, 200, true, false, kNow - 90, false});
  EXPECT_EQ(ViewOf(d).blocking_roots[0].verdict.action, VerdictAction::kCancel);
}

// A reader queued behind the migration's table lock is not a duplicate: the ordinary verdict.
TEST(Verdict, MigrationBlockingAnotherKindOfWaiterGetsTheOrdinaryVerdict) {
  PollData d = KnexDeployBehindMigration("active", 100);
  d.sessions.push_back(Waiter(300, {100}, 40));
  d.lock_waits.push_back(Wants(300, "AccessShareLock", 40));
  EXPECT_EQ(ViewOf(d).blocking_roots[0].verdict.action, VerdictAction::kCancel);
}

// The same root when its state_change cannot be read: its age is unknown, not young.
TEST(Verdict, ActiveRootOfUnknownAgeIsNotWaitedFor) {
  PollData d = DdlBehindIdleCheckout();
  d.sessions[0] = Client(100, "active", 15);
  d.sessions[0].state_change.reset();
  d.sessions.resize(2);
  d.lock_waits.resize(1);
  d.sessions[1] = Waiter(200, {100}, 12);
  d.lock_waits[0] = Wants(200, "AccessShareLock", 12);
  EXPECT_EQ(ViewOf(d).blocking_roots[0].verdict.action, VerdictAction::kCancel);
}

// A young statement whose waiter has already waited past the threshold (the root was idle in
// transaction before it began this statement): the waiters page, so the command is due.
TEST(Verdict, YoungStatementWithAPagingWaiterIsCancelled) {
  PollData d = DdlBehindIdleCheckout();
  d.sessions[0] = Client(100, "active", 15);
  d.sessions.resize(2);
  d.lock_waits.resize(1);
  d.sessions[1] = Waiter(200, {100}, kWaitersAlertSeconds + 30);
  d.lock_waits[0] = Wants(200, "AccessShareLock", kWaitersAlertSeconds + 30);
  EXPECT_EQ(ViewOf(d).blocking_roots[0].verdict.action, VerdictAction::kCancel);
}

// The verdict on a session that an alert names outside a blocking tree: an idle-in-transaction
// holder (terminate, or its pooler's RECONNECT) and the session filling the lock table.
TEST(Verdict, IdleHolderAndLockTableSessionFollowTheSameRules) {
  IdleHolder h;
  h.datname = "shop";
  h.holder = {100, "worker", "10.0.0.7", "app", "idle in transaction", ""};
  h.seconds = 300;
  Verdict v = IdleHolderVerdict(h, {});
  EXPECT_EQ(v.action, VerdictAction::kTerminate);
  EXPECT_EQ(v.command, "SELECT pg_terminate_backend(100)");
  PoolerView pooler;
  pooler.name = "bouncer";
  PooledLockRow row;
  row.pid = 100;
  row.database = "shop";
  row.user = "app";
  pooler.locks.push_back(row);
  v = IdleHolderVerdict(h, {pooler});
  EXPECT_EQ(v.action, VerdictAction::kPoolerReconnect);
  EXPECT_EQ(v.command, "RECONNECT shop");
  EXPECT_EQ(v.then_command, "KILL shop");
  EXPECT_EQ(v.pooler, "bouncer");

  SessionLockTableEntries top;
  top.datname = "shop";
  top.session = {100, "leaker", "10.0.0.7", "app", "active", ""};
  top.entries = 6000;
  v = LockTableVerdict(top, 6000);
  EXPECT_EQ(v.action, VerdictAction::kTerminate) << "a cancel frees no session lock";
  EXPECT_EQ(v.command, "SELECT pg_terminate_backend(100)");
  top.pooled = PooledConnection{"bouncer", "shop", "app", "leaker@10.0.0.7", "web@10.0.0.9"};
  v = LockTableVerdict(top, 6000);
  EXPECT_EQ(v.command, "RECONNECT shop");
  EXPECT_EQ(v.frees, 6000);
}

// An autovacuum worker as pg_stat_activity shows it to pg_monitor.
PollData BehindAutovacuum(const std::string& query) {
  PollData d;
  d.now = kNow;
  d.server_version_num = 150000;
  d.sessions = {Waiter(301, {55}, 30)};
  d.lock_waits = {Wants(301, "ShareUpdateExclusiveLock", 30)};
  LockParty av;
  av.pid = 55;
  av.backend_type = "autovacuum worker";
  av.datid = kDb;
  av.state = "active";
  av.since = kNow - 600;
  av.query = query;
  d.lock_parties = {av};
  return d;
}

TEST(Verdict, AutovacuumToPreventWraparoundIsLeftAlone) {
  const TargetView v =
      ViewOf(BehindAutovacuum("autovacuum: VACUUM ANALYZE public.orders (to prevent wraparound)"));
  ASSERT_EQ(v.blocking_roots.size(), 1u);
  const Verdict& verdict = v.blocking_roots[0].verdict;
  EXPECT_EQ(verdict.action, VerdictAction::kLeaveAlone);
  EXPECT_EQ(verdict.command, "");
  EXPECT_NE(verdict.cost.find("must not be cancelled"), std::string::npos);
}

TEST(Verdict, OrdinaryAutovacuumIsCancelled) {
  const Verdict verdict =
      ViewOf(BehindAutovacuum("autovacuum: VACUUM public.orders")).blocking_roots[0].verdict;
  EXPECT_EQ(verdict.action, VerdictAction::kCancelAutovacuum);
  EXPECT_EQ(verdict.command, "SELECT pg_cancel_backend(55)");
}

TEST(Verdict, PreparedTransactionIsRolledBackByGid) {
  PollData d;
  d.now = kNow;
  d.server_version_num = 150000;
  d.sessions = {Waiter(301, {0}, 30)};
  d.lock_waits = {{301, "transactionid", "ShareLock", 0, "", "777", "transactionid:777", kNow}};
  LockParty p;
  p.backend_type = "prepared transaction";
  p.datid = kDb;
  p.usename = "billing";
  p.gid = "pay-o'42";
  p.xid = "777";
  p.since = kNow - 90;
  d.lock_parties = {p};
  const Verdict verdict = ViewOf(d).blocking_roots[0].verdict;
  EXPECT_EQ(verdict.action, VerdictAction::kRollbackPrepared);
  EXPECT_EQ(verdict.pid, 0);
  EXPECT_EQ(verdict.command, "ROLLBACK PREPARED 'pay-o''42'");
  EXPECT_NE(verdict.then.find("billing"), std::string::npos);
}

TEST(Verdict, PooledLeakedSessionLockIsFreedByThePooler) {
  RootFacts f;
  f.root.id = {100, "worker", "10.0.0.7", "app", "idle", ""};
  f.blocked = 3;
  f.advisory_locks.Add([] { return "sweep"; });
  f.pooled = PooledConnection{"bouncer", "shop", "app", "worker@10.0.0.7", "web@10.0.0.9"};
  const Verdict v = DecideVerdict(f);
  EXPECT_EQ(v.action, VerdictAction::kPoolerReconnect);
  EXPECT_EQ(v.command, "RECONNECT shop");
  EXPECT_NE(v.then.find("Not pg_terminate_backend"), std::string::npos);
  // What works on every PgBouncer when a client keeps the connection in a transaction.
  EXPECT_NE(v.then.find("KILL shop"), std::string::npos) << v.then;
  EXPECT_EQ(v.then.find("KILL_CLIENT"), std::string::npos) << "not in Debian 12's PgBouncer 1.18";
  EXPECT_EQ(v.frees, 3);
}

TEST(Verdict, ARootWithThousandsOfLocksNamesFiveAndCountsTheRest) {
  RootFacts f;
  f.root.id = {100, "leaker", "10.0.0.7", "app", "idle", ""};
  f.root.backend_type = "client backend";
  int labelled = 0;
  for (int i = 0; i < 6000; ++i) {
    f.advisory_locks.Add([&] {
      ++labelled;
      return std::to_string(i);
    });
  }
  EXPECT_EQ(labelled, static_cast<int>(HeldLockList::kListed)) << "a label made for every lock";
  const Verdict v = DecideVerdict(f);
  EXPECT_NE(v.cost.find("0, 1, 2, 3, 4 and 5995 more"), std::string::npos) << v.cost;
  EXPECT_EQ(v.dropped_locks.total, 6000);
  EXPECT_EQ(v.dropped_locks.listed.size(), HeldLockList::kListed);
  EXPECT_LT(v.cost.size(), 1000u);
}

// The verdict's words (VerdictAdvice): what /locks prints after "Do:", /api/v1/locks as advice
// and pglock_session_verdict_info as its advice label, which the alert descriptions print. The
// strings below are the ones alerts/tests/pglock.rules.test.yml gives that label.
TEST(VerdictAdvice, SaysWhatToDoWithTheCommandAndTheNextStep) {
  PollData d = DdlBehindIdleCheckout();
  EXPECT_EQ(VerdictAdvice(ViewOf(d).blocking_roots[0].verdict),
            "SELECT pg_cancel_backend(200) (the DDL waiting at the head of the queue, not the "
            "root), then retry it with SET lock_timeout = '5s' so that it gives up instead of "
            "queueing readers");
  d.sessions.resize(2);
  d.lock_waits.resize(1);
  EXPECT_EQ(VerdictAdvice(ViewOf(d).blocking_roots[0].verdict), "SELECT pg_terminate_backend(100)");
  d.sessions[0] = Client(100, "active", kWaitersAlertSeconds + 1);
  d.sessions[1] = Waiter(200, {100}, 10);
  d.lock_waits[0] = Wants(200, "AccessShareLock", 10);
  EXPECT_EQ(VerdictAdvice(ViewOf(d).blocking_roots[0].verdict),
            "SELECT pg_cancel_backend(100), then if it is still there a few seconds later: "
            "SELECT pg_terminate_backend(100)");
  d.sessions[0] = Client(100, "active", 15);
  EXPECT_EQ(VerdictAdvice(ViewOf(d).blocking_roots[0].verdict),
            "wait, then if it still runs when its waiters have waited 30 s (their alerts' "
            "threshold): SELECT pg_cancel_backend(100)");
  EXPECT_EQ(
      VerdictAdvice(ViewOf(KnexDeployBehindMigration("active", 100)).blocking_roots[0].verdict),
      "wait for it: it is a migration holding its tool's lock and making progress, and its "
      "waiters are its duplicates (a second deploy); to stop a duplicate instead (the run "
      "waiting longest, pid 200): SELECT pg_cancel_backend(200)");
  EXPECT_EQ(
      VerdictAdvice(
          ViewOf(BehindAutovacuum("autovacuum: VACUUM public.orders")).blocking_roots[0].verdict),
      "SELECT pg_cancel_backend(55)");
  EXPECT_EQ(VerdictAdvice(ViewOf(BehindAutovacuum("autovacuum: VACUUM public.orders (to prevent "
                                                  "wraparound)"))
                              .blocking_roots[0]
                              .verdict),
            "leave it alone: an autovacuum to prevent wraparound comes back at once");
  RootFacts f;
  f.root.id = {6569, "web", "10.0.2.10", "app", "idle in transaction", ""};
  f.pooled = PooledConnection{"pgbouncer-main", "app", "app", "web@10.0.2.10", "web@10.0.2.11"};
  EXPECT_EQ(VerdictAdvice(DecideVerdict(f)),
            "RECONNECT app on PgBouncer pgbouncer-main's admin console, or KILL app if a client "
            "keeps that connection in a transaction; not pg_terminate_backend, which counts a "
            "loss and pages");
  f = RootFacts{};
  f.root.id.pid = 4242;
  EXPECT_EQ(VerdictAdvice(DecideVerdict(f)), "investigate: no command is known to be safe");
  f.root.id.pid = 0;
  f.root.id.usename = "billing";
  f.root.gid = "pay-o'42";
  EXPECT_EQ(VerdictAdvice(DecideVerdict(f)),
            "ROLLBACK PREPARED 'pay-o''42'; check with its owner (billing) first: its transaction "
            "manager may be about to COMMIT PREPARED it");
}

// The advice labels a series per session: it names no time, so the series stays one while the
// verdict stays, however long the session holds or waits.
TEST(VerdictAdvice, StaysTheSameFromPollToPoll) {
  for (const auto& [state, early, late] : std::vector<std::tuple<std::string, double, double>>{
           {"idle in transaction", 240, 4000}, {"active", 40, 4000}, {"active", 5, 20}}) {
    PollData d = DdlBehindIdleCheckout();
    d.sessions.resize(2);
    d.lock_waits.resize(1);
    d.sessions[0] = Client(100, state, early);
    d.sessions[1] = Waiter(200, {100}, 1);
    d.lock_waits[0] = Wants(200, "AccessShareLock", 1);
    const Verdict a = ViewOf(d).blocking_roots[0].verdict;
    d.sessions[0] = Client(100, state, late);
    d.sessions[1] = Waiter(200, {100}, late < kWaitersAlertSeconds ? late - 1 : 1);
    d.lock_waits[0] = Wants(200, "AccessShareLock", d.now - *d.sessions[1].state_change);
    const Verdict b = ViewOf(d).blocking_roots[0].verdict;
    EXPECT_EQ(a.action, b.action) << state;
    EXPECT_NE(a.cost, b.cost) << state;
    EXPECT_EQ(VerdictAdvice(a), VerdictAdvice(b)) << state;
    EXPECT_EQ(VerdictAdvice(a).find('\n'), std::string::npos);
  }
}

TEST(Verdict, InvisibleRootGetsNoCommand) {
  RootFacts f;
  f.root.id.pid = 4242;
  f.root.backend_type = "";
  const Verdict v = DecideVerdict(f);
  EXPECT_EQ(v.action, VerdictAction::kInvestigate);
  EXPECT_EQ(v.command, "");
}

}  // namespace
}  // namespace pglock
