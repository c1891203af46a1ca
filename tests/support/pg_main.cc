// The main() of every test binary that needs PostgreSQL: one throwaway server for the whole binary
// (PgEnvironment). Its settings are the union of what those tests need: prepared transactions (the
// wait forest's prepared-transaction blocker) and a larger lock table (thousands of held locks).
// The exporter's own log shows warnings and errors only, so that a failed assertion is not buried
// under hundreds of event lines in ctest's output; PGLOCK_TEST_LOG_LEVEL=info shows them all.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "tests/support/pg_environment.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* level = std::getenv("PGLOCK_TEST_LOG_LEVEL");
  spdlog::set_level(spdlog::level::from_str(level != nullptr ? level : "warn"));
  ::testing::AddGlobalTestEnvironment(new pglock::testing::PgEnvironment(
      {"max_prepared_transactions = 5", "max_locks_per_transaction = 256"}));
  return RUN_ALL_TESTS();
}
