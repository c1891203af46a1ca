#include "exporter/events/hold_index.h"

#include <gtest/gtest.h>

namespace pglock {
namespace {

PollData Poll() {
  PollData d;
  Session a;
  a.pid = 10;
  a.backend_start = 100;
  Session b;
  b.pid = 11;
  b.backend_start = 200;
  d.sessions = {a, b};
  for (uint32_t k = 1; k <= 3; ++k) {
    AdvisoryLock l;
    l.key = {5, 0, k, 1};
    l.pid = k == 3 ? 11 : 10;
    d.locks.push_back(l);
  }
  AdvisoryLock waiting;  // not a hold
  waiting.key = {5, 0, 1, 1};
  waiting.pid = 11;
  waiting.granted = false;
  d.locks.push_back(waiting);
  return d;
}

TEST(HoldIndex, SameHoldRowsTellsEveryChangeOfTheRowsApart) {
  const PollData base = Poll();
  const HoldRows rows = HoldRowsOf(base);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].second.session, (SessionId{11, 200}));
  EXPECT_TRUE(SameHoldRows(base, rows));

  PollData more = base;
  more.locks.push_back(base.locks[0]);
  more.locks.back().key.objid = 9;
  EXPECT_FALSE(SameHoldRows(more, rows));

  PollData fewer = base;
  fewer.locks.erase(fewer.locks.begin() + 2);
  EXPECT_FALSE(SameHoldRows(fewer, rows));

  PollData shared = base;
  shared.locks[1].exclusive = false;
  EXPECT_FALSE(SameHoldRows(shared, rows));

  PollData restarted = base;  // the same pid, another backend: another session
  restarted.sessions[0].backend_start = 150;
  EXPECT_FALSE(SameHoldRows(restarted, rows));

  PollData reordered = base;
  std::swap(reordered.locks[0], reordered.locks[1]);
  EXPECT_FALSE(SameHoldRows(reordered, rows)) << "the index keeps the order it was built in";

  PollData granted = base;  // a waiter granted its lock
  granted.locks[3].granted = true;
  EXPECT_FALSE(SameHoldRows(granted, rows));
  EXPECT_EQ(HoldRowsOf(granted).size(), 4u);
}

}  // namespace
}  // namespace pglock
