#include "exporter/util/backoff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace pglock {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RetryDelay, DoublesFromTheIntervalUpToTheCap) {
  const std::vector<int64_t> want = {1, 1, 2, 4, 8, 10, 10, 10};
  for (int failures = 0; failures < static_cast<int>(want.size()); ++failures) {
    EXPECT_EQ(RetryDelay(failures, seconds(1)), seconds(want[failures])) << failures;
  }
  EXPECT_EQ(RetryDelay(5, seconds(30)), seconds(30));  // an interval past the cap is the cap
  EXPECT_EQ(RetryDelay(1'000, seconds(1)), seconds(10));
}

TEST(SpreadRetryDelay, NoFailureIsTheIntervalUnspread) {
  for (double unit : {0.0, 0.5, 0.999})
    EXPECT_EQ(SpreadRetryDelay(0, seconds(1), unit), seconds(1));
}

TEST(SpreadRetryDelay, AfterAFailureBetweenHalfAndAllOfTheDelay) {
  for (int failures = 1; failures < 8; ++failures) {
    const Duration full = RetryDelay(failures, seconds(1));
    EXPECT_EQ(SpreadRetryDelay(failures, seconds(1), 0.0), full / 2) << failures;
    EXPECT_EQ(SpreadRetryDelay(failures, seconds(1), 0.5), full / 2 + full / 4) << failures;
    EXPECT_LE(SpreadRetryDelay(failures, seconds(1), 0.9999), full) << failures;
    EXPECT_EQ(SpreadRetryDelay(failures, seconds(1), 7.0), full) << "clamped";
    EXPECT_EQ(SpreadRetryDelay(failures, seconds(1), -1.0), full / 2) << "clamped";
  }
}

// Fifty targets that failed together: unspread they all retry at the same instant at every step;
// spread, the retries of a step are scattered over half its delay (here at most 3 per 100 ms).
TEST(SpreadRetryDelay, TargetsThatFailedTogetherComeBackApart) {
  std::minstd_rand rng(42);
  std::uniform_real_distribution<double> unit;
  for (int failures = 2; failures <= 5; ++failures) {
    std::vector<int> per_slot(200, 0);
    std::set<int64_t> distinct;
    for (int target = 0; target < 50; ++target) {
      const Duration d = SpreadRetryDelay(failures, seconds(1), unit(rng));
      distinct.insert(d.count());
      ++per_slot[d.count() / 100];
    }
    EXPECT_GE(distinct.size(), 45u) << failures;
    EXPECT_LE(*std::max_element(per_slot.begin(), per_slot.end()), failures == 2 ? 12 : 8)
        << failures;
  }
}

TEST(SessionSetupTimeout, ThePollsTimeoutFirstThenTheReconnectsDelay) {
  EXPECT_EQ(SessionSetupTimeout(0, milliseconds(800), seconds(1)), milliseconds(800));
  EXPECT_EQ(SessionSetupTimeout(1, milliseconds(800), seconds(1)), seconds(1));
  EXPECT_EQ(SessionSetupTimeout(2, milliseconds(800), seconds(1)), seconds(2));
  EXPECT_EQ(SessionSetupTimeout(4, milliseconds(800), seconds(1)), seconds(8));
  EXPECT_EQ(SessionSetupTimeout(9, milliseconds(800), seconds(1)), seconds(10));
  // A timeout longer than the delay is never shortened.
  EXPECT_EQ(SessionSetupTimeout(1, seconds(3), seconds(5)), seconds(5));
  EXPECT_EQ(SessionSetupTimeout(0, seconds(3), seconds(5)), seconds(3));
}

TEST(StatementBackoff, DueAgainAfterTheDelayAndAtOnceAfterASuccess) {
  StatementBackoff b;
  const auto t0 = StatementBackoff::Clock::now();
  EXPECT_TRUE(b.Due(t0));
  b.Failed(t0, seconds(1));
  EXPECT_FALSE(b.Due(t0 + milliseconds(999)));
  EXPECT_TRUE(b.Due(t0 + seconds(1)));
  b.Failed(t0 + seconds(1), seconds(1));
  EXPECT_FALSE(b.Due(t0 + milliseconds(2'999)));
  EXPECT_TRUE(b.Due(t0 + seconds(3)));
  b.Succeeded();
  EXPECT_TRUE(b.Due(t0));
  EXPECT_EQ(b.failures(), 0);
}

}  // namespace
}  // namespace pglock
