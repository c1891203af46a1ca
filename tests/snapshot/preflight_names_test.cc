// Preflight's pure parts: table names as SQL writes them, and the conflict table's shape (the
// table itself is checked against a real server in tests/integration/preflight_test.cc).
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

}  // namespace
}  // namespace pglock
