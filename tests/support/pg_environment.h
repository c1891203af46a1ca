// A gtest Environment that starts one TestPostgres for a whole test binary; Pg() returns it.
#pragma once

#include <gtest/gtest.h>

#include "tests/support/test_postgres.h"

namespace pglock::testing {

TestPostgres& Pg();

class PgEnvironment : public ::testing::Environment {
 public:
  explicit PgEnvironment(std::vector<std::string> settings = {}) : settings_(std::move(settings)) {}
  void SetUp() override;
  void TearDown() override;

 private:
  std::vector<std::string> settings_;
};

}  // namespace pglock::testing
