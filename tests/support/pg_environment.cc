#include "tests/support/pg_environment.h"

#include <cstdlib>

namespace pglock::testing {
namespace {
std::unique_ptr<TestPostgres> g_pg;
}

TestPostgres& Pg() { return *g_pg; }

void PgEnvironment::SetUp() {
  std::string error;
  g_pg = TestPostgres::Start(&error, settings_);
  if (!g_pg) {
    std::fprintf(stderr, "cannot start the test PostgreSQL: %s\n", error.c_str());
    std::abort();
  }
}

void PgEnvironment::TearDown() { g_pg.reset(); }

}  // namespace pglock::testing
