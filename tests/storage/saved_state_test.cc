// The state file's encoding (exporter/storage/saved_state.h): what is written is what is read
// back, and any damage (every truncation, flipped bytes, another version or format, too large)
// is an error that leaves nothing half-read. The poller's use of it is in
// tests/integration/restart_state_test.cc.
#include "exporter/storage/saved_state.h"

#include <gtest/gtest.h>

#include <string>

#include "exporter/storage/state_store.h"

namespace pglock {
namespace {

SavedTarget Sample() {
  SavedTarget s;
  s.target = "orders \"main\"";
  s.server = "7312345678901234567|5432";
  s.saved_at = 1796400000.25;
  auto poll = std::make_shared<PollData>();
  poll->now = 1796399999.5;
  poll->postmaster_start = 1796000000;
  poll->server_version_num = 160004;
  poll->database_stats_snapshot = 1796399999.0;
  Session session;
  session.pid = 4242;
  session.datid = 5;
  session.datname = "app";
  session.usename = "worker";
  session.application_name = "réport\nrunner";
  session.client_addr = "10.0.0.7";
  session.state = "idle";
  session.backend_start = 1796300000.125;
  session.state_change = 1796399000;
  poll->sessions.push_back(session);
  AdvisoryLock lock;
  lock.key = {5, 0xFFFFFFFF, 7, 2};
  lock.pid = 4242;
  lock.outside_transaction = true;
  poll->locks.push_back(lock);
  poll->database_stats = std::vector<DatabaseStats>{{5, "app", 1, 2, 3, 4}};
  poll->settings.push_back({"idle_session_timeout", 60, "configuration file"});
  poll->overrides.push_back({"lock_timeout", 5, 10, "app", "worker", 2});
  s.inventory = poll;
  s.first_seen.push_back({4242, 1796300000.125, lock.key, 1796300001});
  s.counters.losses[{"app", "nightly-report", "terminated"}] = 3;
  s.counters.deadlocks["app"] = 1;
  s.counters.episode_seconds.Observe(2.5, {1, 5, 10});
  s.counters.logged_wait_seconds["relation"].Observe(1.5, {1, 5});
  Event e;
  e.time = 1796399999.5;
  e.target = "orders";
  e.kind = EventKind::kLockLost;
  e.cause = CauseOf(HoldEnd::kTerminated);
  e.evidence = EndEvidence::kLog;
  e.lock = "nightly-report";
  e.previous.pid = 4242;
  e.previous.application_name = "runner";
  e.count = 2;
  e.gap_from = 1796399000;
  e.gap_to = 1796399999.5;
  s.events.push_back(e);
  s.log = SavedLogPosition{{"postgresql.json", 0xFFFFFFFFFFFFFFF1ull, 123456789012ull, 1796399990},
                           1796399999.75};
  PooledLock pooled;
  pooled.pooler = "pgbouncer";
  pooled.database = "app";
  pooled.user = "worker";
  pooled.pid = 5151;
  pooled.backend_start = 1796300100.5;
  pooled.key = {5, 0, 555, 1};
  pooled.state = PooledLockState::kSessionLock;
  pooled.first_client = "api (10.0.0.8:40000)";
  pooled.current_client = "api (10.0.0.8:40002)";
  pooled.last_application_name = "api";
  pooled.last_linked_client = "10.0.0.8:40002";
  pooled.first_seen = 1796300200;
  pooled.inherited = 2;
  s.pooled.push_back(pooled);
  return s;
}

TEST(SavedState, WhatIsWrittenIsReadBack) {
  const SavedTarget s = Sample();
  const std::string bytes = EncodeSavedTarget(s);
  SavedTarget r;
  const Status status = DecodeSavedTarget(bytes, &r);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(r.target, s.target);
  EXPECT_EQ(r.server, s.server);
  EXPECT_EQ(r.saved_at, s.saved_at);
  ASSERT_TRUE(r.inventory);
  EXPECT_EQ(r.inventory->now, s.inventory->now);
  EXPECT_EQ(r.inventory->postmaster_start, s.inventory->postmaster_start);
  EXPECT_EQ(r.inventory->server_version_num, 160004);
  ASSERT_EQ(r.inventory->sessions.size(), 1u);
  EXPECT_EQ(r.inventory->sessions[0].application_name, "réport\nrunner");
  EXPECT_EQ(r.inventory->sessions[0].backend_start, 1796300000.125);
  EXPECT_EQ(r.inventory->sessions[0].state_change, 1796399000);
  EXPECT_FALSE(r.inventory->sessions[0].xact_start.has_value());
  ASSERT_EQ(r.inventory->locks.size(), 1u);
  EXPECT_EQ(r.inventory->locks[0].key, s.inventory->locks[0].key);
  EXPECT_TRUE(r.inventory->locks[0].outside_transaction);
  ASSERT_TRUE(r.inventory->database_stats.has_value());
  EXPECT_EQ((*r.inventory->database_stats)[0].sessions_abandoned, 3);
  EXPECT_EQ(r.inventory->overrides[0].role, "worker");
  ASSERT_EQ(r.first_seen.size(), 1u);
  EXPECT_EQ(r.first_seen[0].Id(), s.first_seen[0].Id());
  EXPECT_EQ(r.first_seen[0].first_seen, 1796300001);
  EXPECT_EQ((r.counters.losses[{"app", "nightly-report", "terminated"}]), 3);
  EXPECT_EQ(r.counters.deadlocks["app"], 1);
  EXPECT_EQ(r.counters.episode_seconds.counts, s.counters.episode_seconds.counts);
  EXPECT_EQ(r.counters.logged_wait_seconds["relation"].sum, 1.5);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(EventJson(r.events[0]), EventJson(s.events[0]));
  ASSERT_TRUE(r.log.has_value());
  EXPECT_EQ(r.log->at.identity, 0xFFFFFFFFFFFFFFF1ull);
  EXPECT_EQ(r.log->at.offset, 123456789012ull);
  EXPECT_EQ(r.log->records_taken_until, 1796399999.75);
  ASSERT_EQ(r.pooled.size(), 1u);
  EXPECT_EQ(r.pooled[0].pooler, "pgbouncer");
  EXPECT_EQ(r.pooled[0].pid, 5151);
  EXPECT_EQ(r.pooled[0].backend_start, 1796300100.5);
  EXPECT_EQ(r.pooled[0].key, s.pooled[0].key);
  EXPECT_EQ(r.pooled[0].state, PooledLockState::kSessionLock);
  EXPECT_EQ(r.pooled[0].current_client, "api (10.0.0.8:40002)");
  EXPECT_EQ(r.pooled[0].inherited, 2);
  // Written again, the same bytes.
  EXPECT_EQ(EncodeSavedTarget(r), bytes);
}

// A file written before pooled locks were kept has no "pooled": read, with none.
TEST(SavedState, AFileWithoutPooledLocksIsReadWithNone) {
  std::string bytes = EncodeSavedTarget(Sample());
  const size_t at = bytes.find(",\"pooled\":[");
  ASSERT_NE(at, std::string::npos);
  bytes.erase(at, bytes.rfind(']') + 1 - at);
  SavedTarget r;
  const Status status = DecodeSavedTarget(bytes, &r);
  ASSERT_TRUE(status.ok()) << status.message() << "\n" << bytes.substr(bytes.size() - 80);
  EXPECT_TRUE(r.pooled.empty());
  EXPECT_EQ(r.events.size(), 1u);
}

// Doubles past 2^63 (a corrupt but parseable file's) are written so that they read back: their
// shortest form would be digits alone, an integer too large for the reader.
TEST(SavedState, HugeNumbersReadBack) {
  SavedTarget s = Sample();
  s.saved_at = 1.7963977777777777e20;
  s.counters.deadlocks["app"] = 1e300;
  const std::string bytes = EncodeSavedTarget(s);
  SavedTarget r;
  const Status status = DecodeSavedTarget(bytes, &r);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(r.saved_at, s.saved_at);
  EXPECT_EQ(r.counters.deadlocks["app"], 1e300);
  EXPECT_EQ(EncodeSavedTarget(r), bytes);
}

TEST(SavedState, EveryTruncationIsAnError) {
  const std::string bytes = EncodeSavedTarget(Sample());
  for (size_t n = 0; n + 1 < bytes.size(); ++n) {  // the last byte is the newline
    SavedTarget r;
    const Status s = DecodeSavedTarget(std::string_view(bytes).substr(0, n), &r);
    EXPECT_FALSE(s.ok()) << "cut at " << n;
    EXPECT_FALSE(r.inventory) << "cut at " << n;
  }
}

TEST(SavedState, FlippedBytesNeverCrashAndNeverHalfRead) {
  const std::string bytes = EncodeSavedTarget(Sample());
  int errors = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (char c : {'"', '}', '9', '-', 'x'}) {
      std::string damaged = bytes;
      damaged[i] = c;
      SavedTarget r;
      if (!DecodeSavedTarget(damaged, &r).ok()) {
        ++errors;
        EXPECT_TRUE(r.target.empty() && !r.inventory && r.events.empty());
      }
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(SavedState, AnotherVersionFormatOrSizeIsRefusedWithAReason) {
  std::string bytes = EncodeSavedTarget(Sample());
  SavedTarget r;
  std::string older = bytes;
  older.replace(older.find("\"version\":1"), 11, "\"version\":0");
  Status s = DecodeSavedTarget(older, &r);
  EXPECT_NE(s.message().find("format version 0"), std::string::npos) << s.message();
  std::string foreign = bytes;
  foreign.replace(foreign.find("target state"), 12, "target stats");
  s = DecodeSavedTarget(foreign, &r);
  EXPECT_NE(s.message().find("not a pglock_exporter state file"), std::string::npos) << s.message();
  s = DecodeSavedTarget("[1,2,3]", &r);
  EXPECT_NE(s.message().find("not an object"), std::string::npos) << s.message();
  const std::string huge(kMaxSavedStateBytes + 1, ' ');
  s = DecodeSavedTarget(huge, &r);
  EXPECT_NE(s.message().find("more than"), std::string::npos) << s.message();
  std::string negative = bytes;
  negative.replace(negative.find("\"terminated\",3]"), 15, "\"terminated\",-3]");
  s = DecodeSavedTarget(negative, &r);
  EXPECT_NE(s.message().find("negative"), std::string::npos) << s.message();
}

TEST(StateStore, FileNamesAreSafeForAnyTargetName) {
  EXPECT_EQ(StateFilePath("/var/lib/x", "orders-db_1"), "/var/lib/x/orders-db_1.state.json");
  EXPECT_EQ(StateFilePath("/var/lib/x/", "../etc/passwd"),
            "/var/lib/x/%2E%2E%2Fetc%2Fpasswd.state.json");
  EXPECT_EQ(StateFilePath("d", "a b"), "d/a%20b.state.json");
}

}  // namespace
}  // namespace pglock
