// The main() of every test binary that needs PostgreSQL: one throwaway server for the whole binary
// (PgEnvironment). Its settings are the union of what those tests need: prepared transactions (the
// wait forest's prepared-transaction blocker) and a larger lock table (thousands of held locks).
#include <gtest/gtest.h>

#include "tests/support/pg_environment.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new pglock::testing::PgEnvironment(
      {"max_prepared_transactions = 5", "max_locks_per_transaction = 256"}));
  return RUN_ALL_TESTS();
}
