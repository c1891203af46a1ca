#include "exporter/events/logged_locks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pglock {
namespace {

constexpr double kNow = 1'700'000'000;

Session Waiting(int pid, std::vector<int> blocked_by) {
  Session s;
  s.pid = pid;
  s.datname = "shop";
  s.application_name = "worker-" + std::to_string(pid);
  s.usename = "app";
  s.waiting_on_lock = !blocked_by.empty();
  s.blocked_by = std::move(blocked_by);
  return s;
}

PollData Poll(double now, std::vector<Session> sessions = {}) {
  PollData d;
  d.now = now;
  d.sessions = std::move(sessions);
  return d;
}

LockRecord Wait(LockRecordKind kind, int pid, double time, double waited) {
  LockRecord r;
  r.kind = kind;
  r.pid = pid;
  r.session_start = 1000 + pid;
  r.time = time;
  r.dbname = "shop";
  r.user = "app";
  r.application_name = "worker-" + std::to_string(pid);
  r.mode = "ShareLock";
  r.lock.locktype = "transactionid";
  r.lock.text = "transaction 900";
  r.waited_seconds = waited;
  r.holders = {7};
  r.queue = {pid};
  return r;
}

LockRecord Advisory(LockRecordKind kind, int pid, double time, double waited) {
  LockRecord r = Wait(kind, pid, time, waited);
  r.mode = "ExclusiveLock";
  r.lock.locktype = "advisory";
  r.lock.field[0] = 16384;
  r.lock.field[1] = 0;
  r.lock.field[2] = 4242;
  r.lock.field[3] = 1;
  r.lock.text = "advisory lock [16384,0,4242,1]";
  return r;
}

class LoggedLocks : public ::testing::Test {
 protected:
  void Observe(const PollData& poll, const std::vector<LockRecord>& records) {
    tracker_.Observe(poll, records, &names_, /*top_n=*/2, /*query_text=*/false, &counters_,
                     &events_);
  }
  LoggedLockTracker tracker_;
  LockNames names_;
  Counters counters_;
  std::vector<Event> events_;
};

TEST_F(LoggedLocks, AWaitBetweenPollsIsCountedOnceWithItsHolderAndDuration) {
  Observe(Poll(kNow), {Wait(LockRecordKind::kStillWaiting, 20, kNow + 1, 1.0)});
  Observe(Poll(kNow + 5), {Wait(LockRecordKind::kAcquired, 20, kNow + 2, 2.0)});
  EXPECT_EQ((counters_.logged_lock_waits[{"shop", "transactionid", ""}]), 1);
  EXPECT_EQ(counters_.logged_wait_seconds["transactionid"].count, 1);
  EXPECT_EQ(counters_.logged_wait_seconds["transactionid"].sum, 2.0);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, EventKind::kLockWait);
  EXPECT_EQ(events_[0].outcome, EventOutcome::kAcquired);
  EXPECT_EQ(events_[0].current.pid, 20);
  EXPECT_EQ(events_[0].previous.pid, 7);
  EXPECT_EQ(events_[0].duration, 2.0);
  EXPECT_NE(events_[0].detail.str().find("between polls"), std::string::npos) << events_[0].detail;
  EXPECT_EQ(tracker_.open_waits(), 0u);
}

TEST_F(LoggedLocks, AWaitAPollAlsoSawIsStillOneWait) {
  Observe(Poll(kNow), {Wait(LockRecordKind::kStillWaiting, 20, kNow, 1.0)});
  Observe(Poll(kNow + 5, {Waiting(20, {7})}), {});
  Observe(Poll(kNow + 10), {Wait(LockRecordKind::kAcquired, 20, kNow + 8, 9.0)});
  EXPECT_EQ((counters_.logged_lock_waits[{"shop", "transactionid", ""}]), 1);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_NE(events_[0].detail.str().find("seen by a poll"), std::string::npos) << events_[0].detail;
}

// PostgreSQL writes "still waiting" again when a waiting backend wakes (here 10 s into the wait,
// in the same poll's records and in the next one's): one wait, one count, its first line's
// holders; a new wait of the same session on the same lock, after the first was acquired, counts
// again.
TEST_F(LoggedLocks, AWaitWrittenAgainWhenItsBackendWakesIsCountedOnce) {
  LockRecord again = Wait(LockRecordKind::kStillWaiting, 20, kNow + 10.0004, 11.0);
  again.holders = {8};
  Observe(Poll(kNow), {Wait(LockRecordKind::kStillWaiting, 20, kNow, 1.0), again});
  Observe(Poll(kNow + 15), {Wait(LockRecordKind::kStillWaiting, 20, kNow + 20.001, 21.0),
                            Wait(LockRecordKind::kAcquired, 20, kNow + 25, 26.0)});
  EXPECT_EQ((counters_.logged_lock_waits[{"shop", "transactionid", ""}]), 1);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].previous.pid, 7);
  EXPECT_EQ(events_[0].duration, 26.0);

  Observe(Poll(kNow + 40), {Wait(LockRecordKind::kStillWaiting, 20, kNow + 30, 1.0),
                            Wait(LockRecordKind::kStillWaiting, 20, kNow + 40, 11.0)});
  EXPECT_EQ((counters_.logged_lock_waits[{"shop", "transactionid", ""}]), 2);
  EXPECT_EQ(tracker_.open_waits(), 1u);
}

TEST_F(LoggedLocks, AnAdvisoryWaitIsCountedByTheKeysName) {
  AddBigintName(4242, "nightly-report", &names_);
  Observe(Poll(kNow), {Advisory(LockRecordKind::kStillWaiting, 20, kNow, 1.0),
                       Advisory(LockRecordKind::kAcquired, 20, kNow + 1, 2.0)});
  EXPECT_EQ((counters_.logged_lock_waits[{"shop", "advisory", "nightly-report"}]), 1);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].lock, "nightly-report");
}

TEST_F(LoggedLocks, ALockTimeoutNamesTheLockItWaitedForAndItsBlocker) {
  LockRecord timeout = Wait(LockRecordKind::kLockTimeout, 20, kNow + 2, 0);
  timeout.holders.clear();
  Observe(Poll(kNow), {Wait(LockRecordKind::kStillWaiting, 20, kNow + 1, 1.0), timeout});
  EXPECT_EQ((counters_.lock_timeouts[{"shop", "app"}]), 1);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, EventKind::kLockTimeout);
  EXPECT_EQ(events_[0].cause, EventCause::kLockTimeout);
  EXPECT_EQ(events_[0].lock, "transaction 900");
  EXPECT_EQ(events_[0].previous.pid, 7);
  EXPECT_NEAR(events_[0].duration, 2.0, 1e-9);
}

TEST_F(LoggedLocks, ATimeoutWithoutAWaitLineTakesItsBlockerFromThePoll) {
  Observe(Poll(kNow, {Waiting(20, {9})}), {Wait(LockRecordKind::kLockTimeout, 20, kNow, 0)});
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].previous.pid, 9);
}

TEST_F(LoggedLocks, RolesOfLockTimeoutsAreBoundedByTopN) {
  std::vector<LockRecord> records;
  for (const char* user : {"a", "b", "c", "d"}) {
    LockRecord r = Wait(LockRecordKind::kLockTimeout, 20, kNow, 0);
    r.user = user;
    records.push_back(r);
  }
  Observe(Poll(kNow), records);
  EXPECT_EQ((counters_.lock_timeouts[{"shop", "a"}]), 1);
  EXPECT_EQ((counters_.lock_timeouts[{"shop", "b"}]), 1);
  EXPECT_EQ((counters_.lock_timeouts[{"shop", "other"}]), 2);
  EXPECT_EQ(counters_.lock_timeouts.size(), 3u);
}

TEST_F(LoggedLocks, ADeadlockNamesEveryProcessAndTheOthersWaitsEndWithTheirOwnLines) {
  LockRecord d = Wait(LockRecordKind::kDeadlock, 21, kNow + 1, 0);
  for (int pid : {21, 22, 23}) {
    DeadlockProcess p;
    p.pid = pid;
    p.mode = "ShareLock";
    p.lock.locktype = "transactionid";
    p.lock.text = "transaction " + std::to_string(pid + 100);
    p.blocked_by = pid == 23 ? 21 : pid + 1;
    p.query = "UPDATE t SET x = 1";
    d.cycle.push_back(p);
  }
  Observe(Poll(kNow), {Wait(LockRecordKind::kStillWaiting, 22, kNow, 1.0), d,
                       Wait(LockRecordKind::kAcquired, 22, kNow + 1, 2.0)});
  // Pid 22 waited on behind the cycle and got its lock once 21 was cancelled: one wait.
  EXPECT_EQ((counters_.logged_lock_waits[{"shop", "transactionid", ""}]), 1);
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].kind, EventKind::kLockWait);
  EXPECT_EQ(events_[0].kind, EventKind::kDeadlock);
  EXPECT_EQ(events_[0].previous.pid, 21);
  for (const char* part : {"pid 21 waits", "pid 22 waits", "pid 23 waits", "blocked by pid 21"}) {
    EXPECT_NE(events_[0].detail.str().find(part), std::string::npos) << events_[0].detail;
  }
  EXPECT_EQ(events_[0].detail.str().find("UPDATE"), std::string::npos)
      << "queries only with query_text";
  EXPECT_EQ(tracker_.open_waits(), 0u);
}

TEST_F(LoggedLocks, OpenWaitsAreBounded) {
  std::vector<LockRecord> records;
  for (int pid = 1; pid <= static_cast<int>(kMaxOpenWaits) + 50; ++pid) {
    records.push_back(Wait(LockRecordKind::kStillWaiting, pid, kNow, 1.0));
  }
  Observe(Poll(kNow), records);
  EXPECT_EQ(tracker_.open_waits(), kMaxOpenWaits);
  Observe(Poll(kNow + kOpenWaitSeconds + 1), {});
  EXPECT_EQ(tracker_.open_waits(), 0u);
}

}  // namespace
}  // namespace pglock
