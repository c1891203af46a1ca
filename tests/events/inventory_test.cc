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

// An inventory that found its quiet holders changed is kept as a tiered poll: it takes the last
// inventory's holders, is not the next baseline, and the inventory after it reads every holder
// (no quiet baseline) until one has completed.
TEST(InventoryTierTest, AnInventoryWhoseQuietHoldersChangedFallsBackOnce) {
  InventoryTier tier(std::chrono::seconds(0));
  auto inventory = std::make_shared<PollData>();
  inventory->postmaster_start = kPostmasterStart;
  Session holder;
  holder.pid = 41;
  holder.backend_start = kStart - 100;
  inventory->sessions.push_back(holder);
  AdvisoryLock held;
  held.pid = 41;
  held.key.objid = 7;
  inventory->locks.push_back(held);
  const SteadyClock::time_point t0{};
  EXPECT_EQ(tier.QuietBaseline(), nullptr);
  tier.Complete(t0, &inventory);
  EXPECT_EQ(tier.QuietBaseline(), inventory.get());

  auto fell_back = std::make_shared<PollData>();
  fell_back->inventory = false;
  fell_back->quiet_mismatch = true;
  fell_back->postmaster_start = kPostmasterStart;
  fell_back->sessions.push_back(holder);
  tier.Complete(t0 + std::chrono::seconds(1), &fell_back);
  ASSERT_EQ(fell_back->locks.size(), 1u);
  EXPECT_EQ(fell_back->locks[0].key.objid, 7u);
  EXPECT_EQ(tier.last(), inventory);
  EXPECT_EQ(tier.QuietBaseline(), nullptr);
  EXPECT_TRUE(tier.Due(t0 + std::chrono::seconds(2)));

  auto next = std::make_shared<PollData>();
  next->postmaster_start = kPostmasterStart;
  tier.Complete(t0 + std::chrono::seconds(2), &next);
  EXPECT_EQ(tier.QuietBaseline(), next.get());
}

}  // namespace
}  // namespace pglock
