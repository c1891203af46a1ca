#include "exporter/events/blocking_episodes.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/collectors/registry.h"
#include "exporter/events/judge.h"

namespace pglock {
namespace {

constexpr uint32_t kDb = 16384;
constexpr double kStart = 1'700'000'000;

Session Client(int pid, const std::string& state) {
  Session s;
  s.pid = pid;
  s.datid = kDb;
  s.datname = "shop";
  s.usesysid = 10;
  s.usename = "app";
  // Each session its own client by default.
  s.application_name = "checkout-" + std::to_string(pid);
  s.client_addr = "10.0.1." + std::to_string(1 + pid % 250);
  s.state = state;
  s.backend_start = kStart - 3600;
  s.state_change = kStart - 10;
  s.query_start = kStart - 10;
  if (state != "idle") s.xact_start = kStart - 20;
  return s;
}

// A poll at kStart + t: root 100 idle in transaction, `waiters` sessions waiting for its row.
PollData Poll(double t, int waiters, int64_t killed = 0, int64_t deadlocks = 0) {
  PollData d;
  d.now = kStart + t;
  d.server_version_num = 150000;
  d.postmaster_start = kStart - 86400;
  d.sessions.push_back(Client(100, "idle in transaction"));
  for (int i = 0; i < waiters; ++i) {
    Session w = Client(200 + i, "active");
    w.waiting_on_lock = true;
    w.blocked_by = {100};
    d.sessions.push_back(w);
    d.lock_waits.push_back(
        {200 + i, "transactionid", "ShareLock", kDb, "", "900", "transactionid:900", kStart});
  }
  DatabaseStats st;
  st.datid = kDb;
  st.datname = "shop";
  st.sessions_killed = killed;
  st.deadlocks = deadlocks;
  d.database_stats = std::vector<DatabaseStats>{st};
  return d;
}

class Episodes : public ::testing::Test {
 protected:
  std::vector<Event> Judge(const PollData& d) {
    HoldHistory history;
    std::map<std::string, int64_t> dropped;
    const TargetView view = Analyze(d, AnalyzeOptions{}, &history, &dropped);
    std::vector<Event> events;
    JudgeBlocking(d, view, &tracker_, &counters_, &events);
    return events;
  }
  double Ended(const std::string& outcome) {
    return counters_.blocking_episodes.at({"shop", outcome});
  }

  BlockingEpisodeTracker tracker_;
  Counters counters_;
};

TEST_F(Episodes, BlockingThenReleasedWhenTheRootCommits) {
  EXPECT_TRUE(Judge(Poll(0, 1)).empty());  // state: blocking
  EXPECT_TRUE(Judge(Poll(5, 3)).empty());  // still blocking, peak 3
  PollData after = Poll(10, 0);
  after.sessions[0] = Client(100, "idle");  // committed: a new state_change, no transaction
  after.sessions[0].state_change = kStart + 8;
  const std::vector<Event> events = Judge(after);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kBlockingEpisode);
  EXPECT_EQ(events[0].outcome, EventOutcome::kReleased);
  EXPECT_EQ(events[0].previous.pid, 100);
  EXPECT_EQ(events[0].peak_blocked, 3);
  EXPECT_DOUBLE_EQ(events[0].duration, 10);
  EXPECT_DOUBLE_EQ(events[0].started, kStart);
  EXPECT_EQ(Ended("released"), 1);
  EXPECT_EQ(Ended("waiters_left"), 0);
  EXPECT_EQ(counters_.episode_seconds.count, 1);
  EXPECT_EQ(tracker_.open(), 0u);
}

TEST_F(Episodes, TheEpisodeNamesTheLockItsWaitersWaitedFor) {
  // A row lock's wait shows as its lock type; a relation's wait as the relation.
  Judge(Poll(0, 1));
  PollData released = Poll(5, 0);
  released.sessions[0] = Client(100, "idle");
  released.sessions[0].state_change = kStart + 4;
  std::vector<Event> events = Judge(released);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].lock, "transactionid");

  PollData on_table = Poll(10, 1);
  on_table.lock_waits[0] = {200,
                            "relation",
                            "AccessExclusiveLock",
                            kDb,
                            "public.orders",
                            "",
                            "relation:public.orders",
                            kStart + 9};
  Judge(on_table);
  PollData done = Poll(15, 0);
  done.sessions[0] = Client(100, "idle");
  done.sessions[0].state_change = kStart + 14;
  events = Judge(done);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].lock, "public.orders");
}

TEST_F(Episodes, WaitersLeftWhileTheRootStillHolds) {
  Judge(Poll(0, 2));
  const std::vector<Event> events = Judge(Poll(5, 0));  // root unchanged: same xact, same state
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].outcome, EventOutcome::kWaitersLeft);
  EXPECT_EQ(Ended("waiters_left"), 1);
}

TEST_F(Episodes, RootTerminatedEndsWithItsCause) {
  Judge(Poll(0, 2));
  PollData gone = Poll(5, 0, /*killed=*/1);
  gone.sessions.clear();
  const std::vector<Event> events = Judge(gone);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].outcome, EventOutcome::kRootEnded);
  EXPECT_EQ(events[0].cause, CauseOf(HoldEnd::kTerminated));
  EXPECT_EQ(Ended("root_ended"), 1);
}

TEST_F(Episodes, RootGoneBeforeItsEndIsCountedWaitsOnePollInEnding) {
  Judge(Poll(0, 2));
  PollData gone = Poll(5, 0);
  gone.sessions.clear();
  EXPECT_TRUE(Judge(gone).empty());  // state: ending
  EXPECT_EQ(tracker_.open(), 1u);
  PollData counted = Poll(10, 0, /*killed=*/1);
  counted.sessions.clear();
  const std::vector<Event> events = Judge(counted);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].cause, CauseOf(HoldEnd::kTerminated));
}

// A restart of the exporter keeps the episodes in progress (Save, then Restore in the tracker of
// the next start): the first poll after it judges them as after a long interval.
std::vector<Event> JudgeWith(BlockingEpisodeTracker* tracker, Counters* counters,
                             const PollData& d) {
  HoldHistory history;
  std::map<std::string, int64_t> dropped;
  const TargetView view = Analyze(d, AnalyzeOptions{}, &history, &dropped);
  std::vector<Event> events;
  JudgeBlocking(d, view, tracker, counters, &events);
  return events;
}

TEST_F(Episodes, AnEpisodeKeptAcrossARestartGoesOnWithItsStartAndPeak) {
  Judge(Poll(0, 2));
  Judge(Poll(5, 3));
  BlockingEpisodeTracker after;
  Counters counters;
  after.Restore(tracker_.Save());
  EXPECT_EQ(after.open(), 1u);
  // Down 60 s; the same root (pid and backend start) still blocks one session.
  EXPECT_TRUE(JudgeWith(&after, &counters, Poll(65, 1)).empty());
  const std::vector<Event> events = JudgeWith(&after, &counters, Poll(70, 0));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].outcome, EventOutcome::kWaitersLeft);
  EXPECT_DOUBLE_EQ(events[0].started, kStart);
  EXPECT_DOUBLE_EQ(events[0].duration, 70);
  EXPECT_EQ(events[0].peak_blocked, 3);
  // Without it, the same polls are an episode that began after the restart.
  BlockingEpisodeTracker fresh;
  JudgeWith(&fresh, &counters, Poll(65, 1));
  const std::vector<Event> afresh = JudgeWith(&fresh, &counters, Poll(70, 0));
  ASSERT_EQ(afresh.size(), 1u);
  EXPECT_DOUBLE_EQ(afresh[0].started, kStart + 65);
}

TEST_F(Episodes, ARootTerminatedWhileTheExporterWasDownEndsItsEpisodeWithTheCause) {
  Judge(Poll(0, 2));
  BlockingEpisodeTracker after;
  Counters counters;
  after.Restore(tracker_.Save());
  // The counters read before the stop are the baseline: the end counted in the gap is its.
  PollData gone = Poll(300, 0, /*killed=*/1);
  gone.sessions.clear();
  const std::vector<Event> events = JudgeWith(&after, &counters, gone);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].outcome, EventOutcome::kRootEnded);
  EXPECT_EQ(events[0].cause, CauseOf(HoldEnd::kTerminated));
  EXPECT_DOUBLE_EQ(events[0].started, kStart);
  EXPECT_EQ(after.open(), 0u);
}

TEST_F(Episodes, AServerRestartWhileTheExporterWasDownEndsTheEpisode) {
  Judge(Poll(0, 2));
  BlockingEpisodeTracker after;
  Counters counters;
  after.Restore(tracker_.Save());
  PollData restarted = Poll(300, 0);
  restarted.sessions.clear();
  restarted.postmaster_start = kStart + 100;
  const std::vector<Event> events = JudgeWith(&after, &counters, restarted);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].cause, CauseOf(HoldEnd::kServerRestart));
}

// A server log reader that has read what the test says.
class FakeLog : public SessionEndLog {
 public:
  std::optional<HoldEnd> EndOf(const SessionId& s) const override {
    const auto it = ends.find(s);
    if (it == ends.end()) return std::nullopt;
    return it->second;
  }
  bool readable() const override { return true; }
  uint64_t reads_through() const override { return 0; }
  std::vector<LoggedSessionEnd> EndsLoggedBetween(const std::string&, double,
                                                  double) const override {
    return {};
  }
  std::map<SessionId, HoldEnd> ends;
};

TEST_F(Episodes, RootEndedOnTheLogsWordNotTheCounters) {
  // Another session of the database was terminated; the root itself hit its idle-in-transaction
  // timeout, as its own FATAL line says.
  auto log = std::make_shared<FakeLog>();
  tracker_.set_log(log);
  Judge(Poll(0, 2));
  log->ends[{100, kStart - 3600}] = HoldEnd::kIdleInTransactionTimeout;
  PollData gone = Poll(5, 0, /*killed=*/1);
  gone.sessions.clear();
  const std::vector<Event> events = Judge(gone);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].cause, CauseOf(HoldEnd::kIdleInTransactionTimeout));
  EXPECT_EQ(events[0].evidence, EndEvidence::kLog);
}

TEST_F(Episodes, RootGoneWithALogThatIsSilentWaitsAPollThenTakesTheCounters) {
  auto log = std::make_shared<FakeLog>();
  tracker_.set_log(log);
  Judge(Poll(0, 2));
  PollData gone = Poll(5, 0, /*killed=*/1);
  gone.sessions.clear();
  EXPECT_TRUE(Judge(gone).empty());  // state: ending, the counters' word kept
  PollData later = Poll(10, 0, /*killed=*/1);
  later.sessions.clear();
  const std::vector<Event> events = Judge(later);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].cause, CauseOf(HoldEnd::kTerminated));
  EXPECT_EQ(events[0].evidence, EndEvidence::kCounters);
}

TEST(EpisodesNoCause, ARootWithOnlyItsDisconnectionLineIsJudgedByTheAbandonedCount) {
  // The root's client vanished (abandoned rose) or closed (it did not): the log shows the same
  // disconnection line for both. Holds and episodes share the decision (JudgeNoCauseEnd).
  for (const int64_t abandoned : {0, 1}) {
    BlockingEpisodeTracker tracker;
    auto log = std::make_shared<FakeLog>();
    tracker.set_log(log);
    Counters counters;
    const auto judge = [&](PollData d) {
      d.database_stats->at(0).sessions_abandoned = abandoned;
      d.sessions.clear();
      HoldHistory history;
      std::map<std::string, int64_t> dropped;
      std::vector<Event> events;
      JudgeBlocking(d, Analyze(d, AnalyzeOptions{}, &history, &dropped), &tracker, &counters,
                    &events);
      return events;
    };
    PollData first = Poll(0, 2);
    HoldHistory history;
    std::map<std::string, int64_t> dropped;
    JudgeBlocking(first, Analyze(first, AnalyzeOptions{}, &history, &dropped), &tracker, &counters,
                  nullptr);
    log->ends[{100, kStart - 3600}] = HoldEnd::kCleanClose;
    EXPECT_TRUE(judge(Poll(5, 0)).empty()) << "waits a poll for the interval's other lines";
    const std::vector<Event> events = judge(Poll(10, 0));
    ASSERT_EQ(events.size(), 1u) << abandoned;
    EXPECT_EQ(events[0].outcome, EventOutcome::kRootEnded);
    EXPECT_EQ(events[0].cause,
              abandoned != 0 ? CauseOf(HoldEnd::kConnectionLost) : CauseOf(HoldEnd::kCleanClose));
    EXPECT_EQ(events[0].evidence, EndEvidence::kLogAndCounters);
  }
}

TEST_F(Episodes, FailedPollsInBetweenNeitherEndNorRestartTheEpisode) {
  Judge(Poll(0, 2));
  // Polls at 5..25 failed (a reconnect): the tracker is simply not called.
  EXPECT_TRUE(Judge(Poll(30, 2)).empty());
  const std::vector<Event> events = Judge(Poll(35, 0));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_DOUBLE_EQ(events[0].started, kStart);
  EXPECT_EQ(Ended("waiters_left"), 1);
  EXPECT_EQ(Ended("released") + Ended("root_ended"), 0);
}

TEST_F(Episodes, DeadlocksMirrorTheServerCounter) {
  Judge(Poll(0, 0, 0, 7));
  Judge(Poll(5, 0, 0, 7));
  // The first poll is the baseline; a database with no deadlock since has no series.
  EXPECT_EQ(counters_.deadlocks.count("shop"), 0u);
  Judge(Poll(10, 0, 0, 9));
  EXPECT_EQ(counters_.deadlocks.at("shop"), 2);
  Judge(Poll(15, 0, 0, 9));
  EXPECT_EQ(counters_.deadlocks.at("shop"), 2);
}

TEST_F(Episodes, ADatabaseGetsItsOutcomesWithItsFirstEndedEpisode) {
  Judge(Poll(0, 0));
  EXPECT_TRUE(counters_.blocking_episodes.empty());
  Judge(Poll(5, 2));  // state: blocking
  EXPECT_TRUE(counters_.blocking_episodes.empty());
  Judge(Poll(10, 0));  // ended: waiters_left, the root unchanged
  EXPECT_EQ(counters_.blocking_episodes.size(), 3u);
  EXPECT_EQ(Ended("waiters_left"), 1);
  EXPECT_EQ(Ended("released"), 0);
  EXPECT_EQ(Ended("root_ended"), 0);
}

TEST_F(Episodes, DeadlockCycleSeenByAPollIsOneEvent) {
  PollData d = Poll(0, 0);
  Session a = Client(300, "active"), b = Client(301, "active");
  a.waiting_on_lock = b.waiting_on_lock = true;
  a.blocked_by = {301};
  b.blocked_by = {300};
  d.sessions = {a, b};
  d.lock_waits = {{300, "transactionid", "ShareLock", kDb, "", "11", "transactionid:11", kStart},
                  {301, "transactionid", "ShareLock", kDb, "", "12", "transactionid:12", kStart}};
  std::vector<Event> events = Judge(d);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kDeadlock);
  EXPECT_NE(events[0].detail.str().find("pid 300"), std::string::npos) << events[0].detail;
  EXPECT_NE(events[0].detail.str().find("pid 301"), std::string::npos);
  d.now += 5;
  EXPECT_TRUE(Judge(d).empty());  // the same cycle again
}

}  // namespace
}  // namespace pglock
