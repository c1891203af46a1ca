// The collectors register themselves (PGLOCK_REGISTER_COLLECTOR); the registry runs them in the
// order the batch must read its views in (exporter/collectors/registry.cc says why).
#include "exporter/collectors/registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pglock {
namespace {

TEST(Registry, EveryCollectorRegisteredOnceInReadOrder) {
  std::vector<std::string> names;
  for (const Collector* c : Collectors()) names.push_back(c->name());
  const std::vector<std::string> expected = {"server",         "database_stats",    "activity",
                                             "advisory_locks", "lock_waits",        "lock_table",
                                             "settings",       "setting_overrides", "leases",
                                             "poolers",        "preflight_tables"};
  EXPECT_EQ(names, expected);
  EXPECT_STREQ(SessionEndCountersCollector().name(), "database_stats");
}

}  // namespace
}  // namespace pglock
