// The tiered poll (exporter/events/inventory.h): what a cheap poll takes from the last
// inventory.
#include "exporter/events/inventory.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "exporter/snapshot/poll_data.h"
#include "tests/events/event_test_support.h"

namespace pglock {
namespace {

using testing::kPostmasterStart;
using testing::kStart;

// What a collector reads at inventories only (the shared lock table's entries, say) is carried to
// the cheap polls after it, with the time of that read (the age the exporter shows), not across a
// restart; what every poll reads is not.
struct CountedAtInventory {
  static constexpr bool kReadAtInventory = true;
  int64_t entries = 0;
  double read_at = 0;
};
struct ReadEveryPoll {
  int64_t waiters = 0;
};

TEST(InventoryTierTest, CheapPollCarriesWhatTheLastInventoryAloneRead) {
  InventoryTier tier(std::chrono::seconds(30));
  auto inventory = std::make_shared<PollData>();
  inventory->postmaster_start = kPostmasterStart;
  inventory->now = kStart;
  *inventory->parts.Mutable<CountedAtInventory>() = {4000, kStart};
  inventory->parts.Mutable<ReadEveryPoll>()->waiters = 3;
  const SteadyClock::time_point t0{};
  tier.Complete(t0, &inventory);

  auto cheap = std::make_shared<PollData>();
  cheap->inventory = false;
  cheap->postmaster_start = kPostmasterStart;
  cheap->now = kStart + 10;
  tier.Complete(t0 + std::chrono::seconds(10), &cheap);
  const auto* carried = cheap->parts.Find<CountedAtInventory>();
  ASSERT_NE(carried, nullptr);
  EXPECT_EQ(carried->entries, 4000);
  EXPECT_EQ(carried->read_at, kStart);
  EXPECT_EQ(cheap->parts.Find<ReadEveryPoll>(), nullptr) << "read every poll: never carried";

  auto restarted = std::make_shared<PollData>();
  restarted->inventory = false;
  restarted->postmaster_start = kPostmasterStart + 5;
  restarted->now = kStart + 20;
  tier.Complete(t0 + std::chrono::seconds(20), &restarted);
  EXPECT_EQ(restarted->parts.Find<CountedAtInventory>(), nullptr);
}

}  // namespace
}  // namespace pglock
