// Preflight's pure parts: table names as SQL writes them, the conflict table's shape (the table
// itself is checked against a real server in tests/integration/preflight_test.cc), and the
// judgement of holders a real server cannot be made to show on cue (an autovacuum worker).
#include <gtest/gtest.h>

#include "exporter/snapshot/preflight.h"

namespace pglock {
namespace {

TableName Parsed(const std::string& text) {
  TableName t;
  std::string why;
  EXPECT_TRUE(ParseTableName(text, &t, &why)) << text << ": " << why;
  return t;
}

std::string Refusal(const std::string& text) {
  TableName t;
  std::string why;
  return ParseTableName(text, &t, &why) ? "" : why;
}

TEST(PreflightNames, FoldsUnquotedPartsAndKeepsQuotedOnes) {
  EXPECT_EQ(Parsed("Orders").name, "orders");
  EXPECT_FALSE(Parsed("Orders").schema.has_value());
  EXPECT_EQ(*Parsed("Shop.Orders").schema, "shop");
  EXPECT_EQ(Parsed("\"Shop\".\"Order \"\"Lines\"\"\"").name, "Order \"Lines\"");
  EXPECT_EQ(*Parsed("\"Shop\".\"Order Lines\"").schema, "Shop");
  EXPECT_EQ(Parsed("t$1_x").name, "t$1_x");
}

TEST(PreflightNames, RefusesWhatIsNotATableName) {
  EXPECT_NE(Refusal(""), "");
  EXPECT_NE(Refusal("a.b.c").find("more than schema.table"), std::string::npos);
  EXPECT_NE(Refusal("\"open").find("closing quote"), std::string::npos);
  EXPECT_NE(Refusal("orders;drop"), "");
  EXPECT_NE(Refusal("1orders"), "");
  EXPECT_NE(Refusal("a."), "");
  EXPECT_NE(Refusal("\"\""), "");
  EXPECT_NE(Refusal(std::string(64, 'a')).find("63 bytes"), std::string::npos);
  EXPECT_NE(Refusal("\"a\"b"), "");
}

TEST(PreflightNames, TheConflictTableIsSymmetricAndOrdered) {
  int conflicts = 0;
  for (const char* a : kTableLockModes) {
    EXPECT_TRUE(IsTableLockMode(a));
    for (const char* b : kTableLockModes) {
      EXPECT_EQ(LockModesConflict(a, b), LockModesConflict(b, a)) << a << " " << b;
      conflicts += LockModesConflict(a, b) ? 1 : 0;
    }
  }
  EXPECT_EQ(conflicts, 38);  // the ordered pairs marked in PostgreSQL's table
  EXPECT_TRUE(LockModesConflict("AccessShareLock", "AccessExclusiveLock"));
  EXPECT_FALSE(LockModesConflict("RowShareLock", "ShareUpdateExclusiveLock"));
  EXPECT_FALSE(IsTableLockMode("ACCESS EXCLUSIVE"));
  EXPECT_FALSE(LockModesConflict("ExclusiveLock", "advisory"));
}

PreflightFacts TableHeldBy(std::vector<RelationLock> locks) {
  PreflightFacts f;
  f.table_found = true;
  f.relation = "public.orders";
  f.datname = "shop";
  f.datid = 5;
  f.locks = std::move(locks);
  return f;
}

TEST(PreflightJudge, AnAutovacuumWorkerOnTheTableGetsItsOwnVerdict) {
  PollData data;
  data.now = 1000;
  const PollIndex index(data);
  const TargetView view;
  PreflightRequest request;
  request.table = "public.orders";
  for (const bool wraparound : {false, true}) {
    RelationLock vacuum;
    vacuum.pid = 77;
    vacuum.mode = "ShareUpdateExclusiveLock";
    vacuum.granted = true;
    vacuum.backend_type = "autovacuum worker";
    vacuum.state = "active";
    vacuum.state_change = 940;
    vacuum.activity_query = std::string("autovacuum: VACUUM public.orders") +
                            (wraparound ? " (to prevent wraparound)" : "");
    const PreflightAnswer a = JudgePreflight(request, TableHeldBy({vacuum}), data, index, view);
    ASSERT_EQ(a.conflicts.size(), 1u);
    // An ordinary autovacuum gives way to a waiting DDL; one to prevent wraparound does not.
    EXPECT_EQ(a.verdict, wraparound ? "would_block" : "would_wait");
    EXPECT_EQ(a.conflicts[0].who.backend_type, "autovacuum worker");
    EXPECT_EQ(a.conflicts[0].who.state_seconds.value_or(0), 60);
    EXPECT_EQ(a.conflicts[0].verdict.action,
              wraparound ? VerdictAction::kLeaveAlone : VerdictAction::kCancelAutovacuum);
  }
}

TEST(PreflightJudge, VerdictsFollowTheModeAndTheQueue) {
  PollData data;
  data.now = 1000;
  Session idle;
  idle.pid = 10;
  idle.state = "idle in transaction";
  idle.state_change = 700;
  idle.xact_start = 690;
  data.sessions = {idle};
  const PollIndex index(data);
  const TargetView view;
  RelationLock reader{.pid = 10, .mode = "AccessShareLock", .granted = true};
  PreflightRequest request;
  request.table = "orders";
  request.role = "migrator";
  PreflightFacts facts = TableHeldBy({reader});
  facts.roleid = 42;
  PreflightAnswer a = JudgePreflight(request, facts, data, index, view);
  EXPECT_EQ(a.verdict, "would_wait");
  EXPECT_EQ(a.conflicts[0].idle_in_transaction_seconds.value_or(0), 300);
  EXPECT_EQ(a.conflicts[0].verdict.action, VerdictAction::kTerminate);
  EXPECT_NE(a.advice.find("No lock_timeout for role migrator"), std::string::npos);
  request.mode = "ShareUpdateExclusiveLock";
  EXPECT_EQ(JudgePreflight(request, facts, data, index, view).verdict, "clear");
  // A waiter queued on the table: a weak request queues behind it when their modes conflict.
  RelationLock ddl{.pid = 11, .mode = "AccessExclusiveLock", .granted = false, .waitstart = 990};
  facts = TableHeldBy({reader, ddl});
  facts.roleid = 42;
  request.mode = "AccessShareLock";
  a = JudgePreflight(request, facts, data, index, view);
  EXPECT_EQ(a.verdict, "would_block");
  ASSERT_EQ(a.conflicts.size(), 1u);
  EXPECT_EQ(a.conflicts[0].who.id.pid, 11);
  EXPECT_EQ(a.conflicts[0].waited_seconds.value_or(0), 10);
  // No such table, no such role: errors, not verdicts.
  facts.table_found = false;
  EXPECT_EQ(JudgePreflight(request, facts, data, index, view).status, 400);
  facts = TableHeldBy({});
  EXPECT_EQ(JudgePreflight(request, facts, data, index, view).status, 400);  // roleid unset
}

}  // namespace
}  // namespace pglock
