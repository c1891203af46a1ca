// How a lock holder's session ended (exporter/events/session_ends.h, judge.h): InferEnd() and
// DecideNoCauseEnd() directly, then through JudgePoll() on hand-made polls: timeouts, the session
// end counters (which session an end explains, late counts, PostgreSQL 14's stale counters, before
// 14 none), the server's log first, and pglock_sessions_ended_total.
#include "exporter/events/session_ends.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "exporter/events/events.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "tests/events/event_test_support.h"

namespace pglock {
namespace {

using testing::Events;
using testing::Get;
using testing::Held;
using testing::kAppDb;
using testing::Key;
using testing::kStart;
using testing::MakeSession;
using testing::Poll;
using testing::PollIdleSessionTimeout60;
using testing::ReapRole77;
using testing::Stats;

constexpr char kIit[] = "idle_in_transaction_session_timeout";

// ---- The cause: timeouts and the session end counters ------------------------------------------

TEST(SessionEndsTest, ReapedIdleSessionsDoNotMakeACleanCloseALoss) {
  // idle_session_timeout reaps an idle session holding nothing (a 'fatal' end) while a lock
  // holder closes its session cleanly in the same interval: the reaped session explains the
  // fatal delta.
  Events e;
  PollData p1 =
      Poll(kStart, {MakeSession(10, "active", kStart - 1), MakeSession(20, "idle", kStart - 29)},
           {Held(10, 1)});
  p1.settings = {{"idle_session_timeout", 30, "configuration file"}};
  e.Observe(p1);
  PollData p2 = Poll(kStart + 5, {}, {}, Stats(1, 0, 0));
  p2.settings = p1.settings;
  e.Observe(p2);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(SessionEndsTest, IdleInTransactionPastTimeoutWithFatalDelta) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 55)}, {Held(10, 1)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  PollData p2 = Poll(kStart + 5, {}, {}, Stats(1, 0, 0));
  p2.settings = p1.settings;
  e.Observe(p2);
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 1);
  EXPECT_EQ(e.TotalLost(), 1);
  EXPECT_EQ(e.Ended("fatal"), 1);
}

TEST(SessionEndsTest, RoleOverrideDecidesTheTimeout) {
  Events e;
  // Server: no timeout; the role's override is 30s and the session was idle 28s + 5s.
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 28)}, {Held(10, 1)});
  p1.settings = {{kIit, 0, "default"}};
  p1.overrides = {{kIit, 0, 10, "*", "alice", 30}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 1);
}

TEST(SessionEndsTest, IdleSessionPastTimeoutWithFatalDelta) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle", kStart - 29)}, {Held(10, 1)});
  p1.settings = {{"idle_session_timeout", 30, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("idle_session_timeout"), 1);
}

TEST(SessionEndsTest, KilledDeltaIsTerminated) {
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Ended("killed"), 1);
}

TEST(SessionEndsTest, AbandonedDeltaIsConnectionLost) {
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 0, 1)));
  EXPECT_EQ(e.Lost("connection_lost"), 1);
  EXPECT_EQ(e.Ended("abandoned"), 1);
}

TEST(SessionEndsTest, FatalWithoutTimeoutMatchIsUnknown) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 2)}, {Held(10, 1)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("unknown"), 1);
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 0);
}

TEST(SessionEndsTest, TimeoutMatchWithoutFatalDeltaIsACleanClose) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 58)}, {Held(10, 1)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  // Its end may not be counted yet (on 14 the counters can be older than the poll): its lock is
  // judged at the next inventory; still no count then is a clean close.
  PollData p2 = Poll(kStart + 5, {}, {}, Stats(0, 0, 0));
  p2.settings = p1.settings;
  e.Observe(p2);
  EXPECT_EQ(e.Released("session_closed"), 0);
  PollData p3 = Poll(kStart + 10, {}, {}, Stats(0, 0, 0));
  p3.settings = p1.settings;
  e.Observe(p3);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(SessionEndsTest, TimeoutEndCountedOnePollLateIsStillTheTimeout) {
  // The holder is gone at the poll, its fatal end counted just after: the next inventory sees it.
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "idle in transaction", kStart - 58)}, {Held(10, 1)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  PollData p2 = Poll(kStart + 5, {}, {}, Stats(0, 0, 0));
  p2.settings = p1.settings;  // every inventory reads the settings
  e.Observe(p2);
  EXPECT_EQ(e.TotalLost() + e.Released("session_closed"), 0) << "judged before the count";
  e.Observe(Poll(kStart + 10, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
}

TEST(SessionEndsTest, ReapedSessionCountedLateIsNotPinnedOnANextCleanClose) {
  // A server reaps idle sessions (idle_session_timeout 3 s). One is gone at a poll while its fatal
  // end is counted only by the next one; meanwhile a lock holder closes its session cleanly. The
  // late count belongs to the reaped session, not to the holder.
  Events e;
  const Session holder = MakeSession(10, "active", kStart - 1);
  Session reaped = MakeSession(20, "idle", kStart - 2.5);
  reaped.usesysid = 77;
  PollData p1 = Poll(kStart, {holder, reaped}, {Held(10, 1)});
  p1.overrides = ReapRole77();
  e.Observe(p1);
  PollData p2 = Poll(kStart + 1, {holder}, {Held(10, 1)}, Stats(0, 0, 0));
  p2.overrides = p1.overrides;
  e.Observe(p2);
  PollData p3 = Poll(kStart + 2, {}, {}, Stats(1, 0, 0));
  p3.overrides = p1.overrides;
  e.Observe(p3);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(SessionEndsTest, SessionSeenOnlyBetweenInventoriesStillClaimsItsEnd) {
  // With a tiered poll, a reaped session may be seen only by the polls between two inventories.
  Events e;
  const Session holder = MakeSession(10, "active", kStart - 1);
  Session reaped = MakeSession(20, "idle", kStart + 0.5);
  reaped.usesysid = 77;
  const std::vector<SettingOverride> overrides = ReapRole77();
  PollData p1 = Poll(kStart, {holder}, {Held(10, 1)});
  p1.overrides = overrides;
  e.Observe(p1);
  PollData cheap = Poll(kStart + 2, {holder, reaped}, {Held(10, 1)});
  cheap.overrides = overrides;
  e.ObserveCheap(cheap);
  PollData p3 = Poll(kStart + 5, {}, {}, Stats(1, 0, 0));
  p3.overrides = overrides;
  e.Observe(p3);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(SessionEndsTest, ACounterResetDoesNotCancelTheNextIntervalsEnd) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(11, 2)}, Stats(5, 5, 5)));
  e.Observe(Poll(kStart + 5, {b}, {Held(11, 2)}, Stats(5, 5, 5)), Stats(5, 6, 5));
  EXPECT_EQ(e.Lost("terminated"), 1);
  e.Observe(Poll(kStart + 10, {}, {}, Stats(0, 1, 0)));  // pg_stat_reset(), then B terminated
  EXPECT_EQ(e.Lost("terminated"), 2);
}

TEST(SessionEndsTest, AHolderWaitingForItsEndCountDoesNotTakeAReapedSessionsLaterCount) {
  // idle_session_timeout 60 s. The holder, idle 56 s, closes its session cleanly just before its
  // timeout would: gone at p2 without a fatal end, with timing that matches the timeout, so the
  // judgement waits for a late count. What arrives by p3 is the end of a session holding nothing,
  // reaped after p2 (a backend counts its own end before it leaves pg_stat_activity, never a poll
  // later): it is not the holder's, whose clean close must not page.
  Events e;
  const Session holder = MakeSession(10, "idle", kStart - 56);
  const Session reaped = MakeSession(20, "idle", kStart - 52);
  e.Observe(PollIdleSessionTimeout60(kStart, {holder, reaped}, {Held(10, 1)}, Stats(0, 0, 0)));
  e.Observe(PollIdleSessionTimeout60(kStart + 5, {reaped}, {},
                                     Stats(0, 0, 0)));  // the holder closed at +1
  e.Observe(
      PollIdleSessionTimeout60(kStart + 10, {}, {}, Stats(1, 0, 0)));  // the other one reaped at +8
  for (int i = 3; i <= kMaxCounterWaits + 1; ++i) {
    e.Observe(PollIdleSessionTimeout60(kStart + 5 * i, {}, {}, Stats(1, 0, 0)));
  }
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(SessionEndsTest, Pre14InfersFromTimeoutsOnly) {
  Events e;
  PollData p1 =
      Poll(kStart,
           {MakeSession(10, "idle in transaction", kStart - 58), MakeSession(11, "active", kStart)},
           {Held(10, 1), Held(11, 2)}, std::nullopt);
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, std::nullopt));
  // Without session counters only a timeout match is a loss; the other end counts as clean.
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout"), 1);
  EXPECT_EQ(e.TotalLost(), 1);
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_TRUE(e.counters().sessions_ended.empty());
}

TEST(SessionEndsTest, Pg14WaitsForSessionCountersWrittenAfterTheSessionEnded) {
  Events e;
  PollData p1 = Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)});
  p1.database_stats_snapshot = kStart - 0.1;
  e.Observe(p1);
  // Terminated: gone from pg_stat_activity, but the stats file predates this poll.
  PollData p2 = Poll(kStart + 0.5, {}, {});
  p2.database_stats_snapshot = kStart + 0.2;
  e.Observe(p2);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 0);  // not taken for a clean close either
  PollData p3 = Poll(kStart + 1, {}, {}, Stats(0, 1, 0));
  p3.database_stats_snapshot = kStart + 0.9;  // written after p2 began: counts the kill
  e.Observe(p3);
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.TotalLost(), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
}

TEST(SessionEndsTest, Pg14CounterWaitIsBounded) {
  Events e;
  PollData p = Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)});
  p.database_stats_snapshot = kStart - 0.1;
  e.Observe(p);
  for (int i = 1; i <= kMaxCounterWaits; ++i) {
    PollData stale = Poll(kStart + i, {}, {});
    stale.database_stats_snapshot = kStart;  // never newer than the end
    e.Observe(stale);
    EXPECT_EQ(e.TotalLost(), 0) << i;
  }
  PollData last = Poll(kStart + kMaxCounterWaits + 1, {}, {});
  last.database_stats_snapshot = kStart;
  e.Observe(last);
  EXPECT_EQ(e.Released("session_closed"), 1);  // judged with what there is: a clean close
  EXPECT_EQ(e.TotalLost(), 0);
}

TEST(SessionEndsTest, TwoSessionsEndingTogetherGetTheirOwnCauses) {
  Events e;
  AddBigintName(1, "timed-out", &e.names());
  AddBigintName(2, "killed", &e.names());
  PollData p1 = Poll(
      kStart,
      {MakeSession(10, "idle in transaction", kStart - 100), MakeSession(11, "active", kStart - 1)},
      {Held(10, 1), Held(11, 2)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 1, 0)));
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout", "timed-out"), 1);
  EXPECT_EQ(e.Lost("terminated", "killed"), 1);
  EXPECT_EQ(e.TotalLost(), 2);
}

TEST(SessionEndsTest, TimeoutMatchClaimsTheFatalDeltaFirst) {
  // The plain session's key sorts first; it must not take the only 'fatal' from the session
  // whose idle time matches the timeout.
  Events e;
  AddBigintName(1, "plain", &e.names());
  AddBigintName(2, "timed-out", &e.names());
  PollData p1 = Poll(
      kStart,
      {MakeSession(11, "active", kStart - 1), MakeSession(10, "idle in transaction", kStart - 100)},
      {Held(11, 1), Held(10, 2)});
  p1.settings = {{kIit, 60, "configuration file"}};
  e.Observe(p1);
  e.Observe(Poll(kStart + 5, {}, {}, Stats(1, 0, 0)));
  EXPECT_EQ(e.Lost("idle_in_transaction_timeout", "timed-out"), 1);
  EXPECT_EQ(e.Released("session_closed", "plain"), 1);
  EXPECT_EQ(e.TotalLost(), 1);
}

TEST(SessionEndsTest, OneCausePerSessionForAllItsLocks) {
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "active", kStart - 1)},
                 {Held(10, 1), Held(10, 2), Held(10, 3)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 3);
  EXPECT_EQ(e.TotalLost(), 3);
}

TEST(InferLossCauseTest, Rules) {
  Session iit = MakeSession(1, "idle in transaction", 900);
  Session idle = MakeSession(2, "idle", 900);
  Session active = MakeSession(3, "active", 999);
  SessionEndDeltas none{};
  // 100s idle at the last poll + 5s: matches a 100s timeout, not a 200s one.
  {
    SessionEndDeltas d{1, 0, 0};
    EXPECT_EQ(InferEnd(iit, 1000, 1005, 100, 0, &d, true), HoldEnd::kIdleInTransactionTimeout);
    EXPECT_EQ(d.fatal, 0);  // consumed
  }
  {
    SessionEndDeltas d{1, 0, 0};
    EXPECT_EQ(InferEnd(iit, 1000, 1005, 200, 0, &d, true), HoldEnd::kUnknown);
  }
  {
    SessionEndDeltas d{1, 0, 0};
    EXPECT_EQ(InferEnd(idle, 1000, 1005, 0, 100, &d, true), HoldEnd::kIdleSessionTimeout);
  }
  {
    // An idle (not in transaction) session does not match the idle-in-transaction timeout.
    SessionEndDeltas d{1, 0, 0};
    EXPECT_EQ(InferEnd(idle, 1000, 1005, 100, 0, &d, true), HoldEnd::kUnknown);
  }
  {
    SessionEndDeltas d{0, 1, 1};
    EXPECT_EQ(InferEnd(active, 1000, 1005, 0, 0, &d, true), HoldEnd::kTerminated);
    EXPECT_EQ(d.killed, 0);
    EXPECT_EQ(InferEnd(active, 1000, 1005, 0, 0, &d, true), HoldEnd::kConnectionLost);
    EXPECT_EQ(d.abandoned, 0);
    EXPECT_EQ(InferEnd(active, 1000, 1005, 0, 0, &d, true),
              HoldEnd::kCleanClose);  // a clean close
  }
  EXPECT_EQ(InferEnd(iit, 1000, 1005, 100, 0, &none, false), HoldEnd::kIdleInTransactionTimeout);
  EXPECT_EQ(InferEnd(idle, 1000, 1005, 0, 100, &none, false), HoldEnd::kIdleSessionTimeout);
  EXPECT_EQ(InferEnd(active, 1000, 1005, 100, 100, &none, false), HoldEnd::kCleanClose);
  // Without state_change nothing can match a timeout.
  Session blind = iit;
  blind.state_change.reset();
  SessionEndDeltas d{1, 0, 0};
  EXPECT_EQ(InferEnd(blind, 1000, 1005, 1, 0, &d, true), HoldEnd::kUnknown);
}

TEST(InferLossCauseTest, SlackOfOneSecond) {
  const Session iit = MakeSession(1, "idle in transaction", 900);
  SessionEndDeltas none{};
  // Idle 100 + 5 = 105s by now; the slack lets a 106s timeout match, not a 107s one.
  EXPECT_EQ(InferEnd(iit, 1000, 1005, 106, 0, &none, false), HoldEnd::kIdleInTransactionTimeout);
  EXPECT_EQ(InferEnd(iit, 1000, 1005, 107, 0, &none, false), HoldEnd::kCleanClose);
}

// ---- Sessions ended -------------------------------------------------------------------------

TEST(SessionEndsTest, SessionsEndedCountFromTheFirstSightAndSurviveResets) {
  Events e;
  e.Observe(Poll(kStart, {}, {}, Stats(3, 2, 1)));
  // The first sight is the baseline: no series for a database where nothing ended since.
  EXPECT_TRUE(e.counters().sessions_ended.empty());
  e.Observe(Poll(kStart + 5, {}, {}, Stats(3, 2, 1)));
  EXPECT_TRUE(e.counters().sessions_ended.empty());

  e.Observe(Poll(kStart + 10, {}, {}, Stats(5, 2, 4)));
  EXPECT_EQ(e.Ended("fatal"), 2);
  EXPECT_EQ(e.Ended("killed"), 0);  // created with its siblings
  EXPECT_EQ(e.counters().sessions_ended.count({"appdb", "killed"}), 1u);
  EXPECT_EQ(e.Ended("abandoned"), 3);

  // pg_stat_reset(): counters restart from zero; ours never go down.
  e.Observe(Poll(kStart + 15, {}, {}, Stats(1, 0, 4)));
  EXPECT_EQ(e.Ended("fatal"), 3);
  EXPECT_EQ(e.Ended("killed"), 0);
  EXPECT_EQ(e.Ended("abandoned"), 3);

  e.Observe(Poll(kStart + 20, {}, {}, Stats(2, 1, 4)));
  EXPECT_EQ(e.Ended("fatal"), 4);
  EXPECT_EQ(e.Ended("killed"), 1);
}

TEST(SessionEndsTest, SessionsEndedPerDatabase) {
  Events e;
  PollData p = Poll(kStart, {}, {}, Stats(1, 0, 0));
  p.database_stats->push_back({kAppDb + 1, "other", 10, 0, 0});
  e.Observe(p);
  p.now += 5;
  (*p.database_stats)[1].sessions_fatal = 12;
  e.Observe(p);
  EXPECT_EQ(e.counters().sessions_ended.count({"appdb", "fatal"}), 0u);  // nothing ended there
  EXPECT_EQ(Get(e.counters().sessions_ended, std::make_tuple(std::string("other"), "fatal")), 2);
}

// ---- The server's log first -------------------------------------------------------------------

// What a server log reader would have read so far: ends by session, readable or not, and how
// many times it read the log through.
class FakeLog : public SessionEndLog {
 public:
  std::optional<HoldEnd> EndOf(const SessionId& s) const override {
    const auto it = ends.find(s);
    if (it == ends.end()) return std::nullopt;
    return it->second;
  }
  bool readable() const override { return up; }
  uint64_t reads_through() const override { return reads; }
  std::vector<LoggedSessionEnd> EndsLoggedBetween(const std::string& datname, double from,
                                                  double to) const override {
    std::vector<LoggedSessionEnd> out;
    for (const auto& [time, end] : unseen) {
      if (datname == "appdb" && time >= from && time <= to) out.push_back(end);
    }
    return out;
  }

  std::map<SessionId, HoldEnd> ends;
  // Ends of sessions of appdb no poll saw, by log time.
  std::vector<std::pair<double, LoggedSessionEnd>> unseen;
  bool up = true;
  uint64_t reads = 0;
};

SessionId IdOf(const Session& s) { return {s.pid, s.backend_start}; }

const Event* FindEvent(const std::vector<Event>& events, EventKind kind, int pid) {
  for (const Event& e : events) {
    if (e.kind == kind && e.previous.pid == pid) return &e;
  }
  return nullptr;
}

TEST(ServerLogEvidenceTest, TheLogTellsATerminationFromACleanCloseInTheSameInterval) {
  // The race the counters lose: one holder is terminated and another of the same database closes
  // cleanly between two polls. One 'killed' end is counted for the database; only the log says
  // whose it is. The clean close is listed first, so the counters alone would pin it on it.
  const Session clean = MakeSession(10, "idle", kStart - 5);
  const Session killed = MakeSession(11, "idle", kStart - 5);
  for (const bool with_log : {false, true}) {
    Events e;
    auto log = std::make_shared<FakeLog>();
    if (with_log) e.set_log(log);
    e.Observe(Poll(kStart, {clean, killed}, {Held(10, 1), Held(11, 2)}));
    log->ends[IdOf(clean)] = HoldEnd::kCleanClose;
    log->ends[IdOf(killed)] = HoldEnd::kTerminated;
    e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
    const Event* lost = FindEvent(e.events(), EventKind::kLockLost, with_log ? 11 : 10);
    ASSERT_NE(lost, nullptr) << "with_log=" << with_log;
    EXPECT_EQ(lost->cause, CauseOf(HoldEnd::kTerminated));
    EXPECT_EQ(lost->evidence, with_log ? EndEvidence::kLog : EndEvidence::kCounters);
    EXPECT_EQ(e.TotalLost(), 1);
    EXPECT_EQ(e.Released("session_closed"), 1);
    if (with_log) {
      const Event* released = FindEvent(e.events(), EventKind::kLockReleased, 10);
      ASSERT_NE(released, nullptr);
      EXPECT_EQ(released->evidence, EndEvidence::kLogAndCounters);
    }
  }
}

TEST(ServerLogEvidenceTest, ACleanCloseTheLogShowsIsNeverALoss) {
  // Another session of the database was terminated (holding nothing, its end not in the log
  // yet): the holder's own disconnection line decides.
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder, MakeSession(20, "active", kStart - 1)}, {Held(10, 1)}));
  log->ends[IdOf(holder)] = HoldEnd::kCleanClose;
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(ServerLogEvidenceTest, AGoneHolderWaitsForTheLogThenTakesItsWord) {
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle in transaction", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  // Gone with no end counted and nothing in the log yet: the counters say a clean close, the
  // second read too; the log may still show otherwise.
  e.Observe(Poll(kStart + 5, {}, {}));
  EXPECT_EQ(e.holds().StateOf(Key(1), IdOf(holder)), HoldState::kAwaitingLog);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 0);
  log->ends[IdOf(holder)] = HoldEnd::kTransactionTimeout;
  e.Observe(Poll(kStart + 10, {}, {}));
  EXPECT_EQ(e.Lost("transaction_timeout"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
  const Event* lost = FindEvent(e.events(), EventKind::kLockLost, 10);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->evidence, EndEvidence::kLog);
}

TEST(ServerLogEvidenceTest, ASilentLogReadThroughFallsBackToTheCounters) {
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.holds().StateOf(Key(1), IdOf(holder)), HoldState::kAwaitingLog);
  log->reads += 1;  // a read that may have started before the wait: not enough
  e.Observe(Poll(kStart + 6, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.TotalLost(), 0);
  log->reads += 1;
  e.Observe(Poll(kStart + 7, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  const Event* lost = FindEvent(e.events(), EventKind::kLockLost, 10);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->evidence, EndEvidence::kCounters);
}

TEST(ServerLogEvidenceTest, ALogReadOftenIsStillWaitedForASecondForTheCollectorToWriteTheLine) {
  // Polls and reads 200 ms apart: two reads through come before the logging collector has
  // written the terminated session's line; the wait goes on until a second has passed.
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 0.2, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.holds().StateOf(Key(1), IdOf(holder)), HoldState::kAwaitingLog);
  log->reads += 2;
  e.Observe(Poll(kStart + 0.6, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.holds().StateOf(Key(1), IdOf(holder)), HoldState::kAwaitingLog);
  EXPECT_EQ(e.TotalLost(), 0);
  log->ends[IdOf(holder)] = HoldEnd::kTerminated;
  log->reads += 2;
  e.Observe(Poll(kStart + 1.0, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  const Event* lost = FindEvent(e.events(), EventKind::kLockLost, 10);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->evidence, EndEvidence::kLog);
}

TEST(ServerLogEvidenceTest, AnUnreadableLogIsNotWaitedFor) {
  Events e;
  auto log = std::make_shared<FakeLog>();
  log->up = false;
  e.set_log(log);
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
}

TEST(ServerLogEvidenceTest, ALoggedFatalEndsAHoldWhileItsBackendIsStillListed) {
  // The backend wrote its FATAL line and released its locks; it is still in pg_stat_activity.
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  log->ends[IdOf(holder)] = HoldEnd::kIdleSessionTimeout;
  e.Observe(Poll(kStart + 5, {holder}, {}));
  EXPECT_EQ(e.Lost("idle_session_timeout"), 1);
}

TEST(ServerLogEvidenceTest, TakeoverAfterALoggedLoss) {
  Events e;
  auto log = std::make_shared<FakeLog>();
  e.set_log(log);
  const Session holder = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {holder}, {Held(10, 1)}));
  log->ends[IdOf(holder)] = HoldEnd::kTerminated;
  e.Observe(Poll(kStart + 5, {MakeSession(11, "idle", kStart + 4)}, {Held(11, 1)}));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
}

// ---- No cause in the log: a clean close or a vanished client ----------------------------------

TEST(NoCauseEndTest, TheAbandonedCountDecidesWhenItCanSayWhose) {
  // DecideNoCauseEnd(abandoned, lost_logged, no_cause)
  EXPECT_EQ(DecideNoCauseEnd(0, 0, 1), HoldEnd::kCleanClose) << "none abandoned";
  EXPECT_EQ(DecideNoCauseEnd(0, 0, 5), HoldEnd::kCleanClose) << "none abandoned, many ends";
  EXPECT_EQ(DecideNoCauseEnd(1, 0, 1), HoldEnd::kConnectionLost) << "the one such end";
  EXPECT_EQ(DecideNoCauseEnd(2, 0, 2), HoldEnd::kConnectionLost) << "every one vanished";
  EXPECT_EQ(DecideNoCauseEnd(1, 0, 2), HoldEnd::kUndetermined) << "one of two: whose?";
  EXPECT_EQ(DecideNoCauseEnd(1, 1, 1), HoldEnd::kCleanClose) << "the logged EOF took it";
  EXPECT_EQ(DecideNoCauseEnd(2, 1, 1), HoldEnd::kConnectionLost);
  EXPECT_EQ(DecideNoCauseEnd(3, 0, 2), HoldEnd::kUndetermined) << "more than it can explain";
}

// The event of `kind` for `pid` has `cause` and `evidence`.
void ExpectEvent(const std::vector<Event>& events, EventKind kind, int pid, EventCause cause,
                 EndEvidence evidence) {
  const Event* e = FindEvent(events, kind, pid);
  ASSERT_NE(e, nullptr) << EventKindName(kind) << " of pid " << pid;
  EXPECT_EQ(e->cause, cause);
  EXPECT_EQ(e->evidence, evidence) << EndEvidenceLabel(e->evidence);
}

// The holder of key 1 and its log: gone at the second poll, its disconnection line read, the
// database's abandoned count `abandoned` then.
struct NoCauseCase {
  Events e;
  std::shared_ptr<FakeLog> log = std::make_shared<FakeLog>();
  Session holder = MakeSession(10, "idle", kStart - 5);

  NoCauseCase() { e.set_log(log); }
  // Reads the log through once more, and polls with the counters as they are.
  void ReadAndPoll(double now, std::vector<Session> sessions = {},
                   std::vector<AdvisoryLock> locks = {}, int64_t abandoned = 0) {
    log->reads += 1;
    e.Observe(Poll(now, std::move(sessions), std::move(locks), Stats(0, 0, abandoned)));
  }
};

TEST(NoCauseEndTest, AHolderKilledWhileIdleIsConnectionLostAndItsKeyTakenOver) {
  // The client process was killed: its backend read EOF outside a transaction (logged at DEBUG1
  // only), counted one abandoned end and wrote its disconnection line.
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  const Session next = MakeSession(11, "idle", kStart + 4);
  c.e.Observe(Poll(kStart + 5, {next}, {Held(11, 1)}, Stats(0, 0, 1)));
  // The other ends of the interval may not be read yet: it waits for the log.
  EXPECT_EQ(c.e.holds().StateOf(Key(1), IdOf(c.holder)), HoldState::kAwaitingLog);
  EXPECT_EQ(c.e.TotalLost(), 0);
  c.ReadAndPoll(kStart + 6, {next}, {Held(11, 1)}, 1);
  EXPECT_EQ(c.e.TotalLost(), 0) << "a read that may have started before the wait";
  c.ReadAndPoll(kStart + 7, {next}, {Held(11, 1)}, 1);
  EXPECT_EQ(c.e.Lost("connection_lost"), 1);
  EXPECT_EQ(c.e.Released("session_closed"), 0);
  EXPECT_EQ(c.e.Takeovers(), 1);
  ExpectEvent(c.e.events(), EventKind::kLockLost, 10, CauseOf(HoldEnd::kConnectionLost),
              EndEvidence::kLogAndCounters);
}

TEST(NoCauseEndTest, ACleanCloseWithNothingAbandonedIsReleasedAtOnce) {
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  const Session next = MakeSession(11, "idle", kStart + 4);
  c.e.Observe(Poll(kStart + 5, {next}, {Held(11, 1)}));
  EXPECT_EQ(c.e.Released("session_closed"), 1);
  EXPECT_EQ(c.e.TotalLost(), 0);
  EXPECT_EQ(c.e.Handovers(), 1);
  EXPECT_EQ(c.e.Takeovers(), 0);
  ExpectEvent(c.e.events(), EventKind::kLockReleased, 10, CauseOf(HoldEnd::kCleanClose),
              EndEvidence::kLogAndCounters);
}

TEST(NoCauseEndTest, TwoNoCauseEndsAndOneAbandonedAreUndeterminedNeverReleased) {
  // One holder closed cleanly, the other's client was killed, in the same interval and database:
  // one abandoned end, two disconnection lines. Each is undetermined (a warning loss), and the
  // keys' next holders are hand-overs: no takeover on a guess.
  NoCauseCase c;
  const Session other = MakeSession(12, "idle", kStart - 5);
  c.e.Observe(Poll(kStart, {c.holder, other}, {Held(10, 1), Held(12, 2)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  c.log->ends[IdOf(other)] = HoldEnd::kCleanClose;
  const Session a = MakeSession(20, "idle", kStart + 4), b = MakeSession(21, "idle", kStart + 4);
  const std::vector<AdvisoryLock> taken = {Held(20, 1), Held(21, 2)};
  c.e.Observe(Poll(kStart + 5, {a, b}, taken, Stats(0, 0, 1)));
  c.ReadAndPoll(kStart + 6, {a, b}, taken, 1);
  c.ReadAndPoll(kStart + 7, {a, b}, taken, 1);
  EXPECT_EQ(c.e.Lost("undetermined"), 2);
  EXPECT_EQ(c.e.Released("session_closed"), 0);
  EXPECT_EQ(c.e.Lost("connection_lost"), 0);
  EXPECT_EQ(c.e.Takeovers(), 0);
  EXPECT_EQ(c.e.Handovers(), 2);
  ExpectEvent(c.e.events(), EventKind::kLockLost, 12, CauseOf(HoldEnd::kUndetermined),
              EndEvidence::kLogAndCounters);
}

TEST(NoCauseEndTest, ASessionNoPollSawSharesTheCount) {
  // A client connected and vanished between the two polls: only the log knows it. With the
  // holder's disconnection line, two no-cause ends share one abandoned end.
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  c.log->unseen.push_back({kStart + 3, {{77, kStart + 2}, HoldEnd::kCleanClose}});
  c.e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 0, 1)));
  c.ReadAndPoll(kStart + 6, {}, {}, 1);
  c.ReadAndPoll(kStart + 7, {}, {}, 1);
  EXPECT_EQ(c.e.Lost("undetermined"), 1);
  EXPECT_EQ(c.e.Released("session_closed"), 0);
}

TEST(NoCauseEndTest, AnotherSessionsLoggedEofTakesTheAbandonedEnd) {
  // The other session lost its connection inside a transaction: its "unexpected EOF" line
  // (08006) names it; the holder's disconnection line then explains nothing abandoned.
  for (const int64_t abandoned : {1, 2}) {
    NoCauseCase c;
    const Session other = MakeSession(12, "idle in transaction", kStart - 1);
    c.e.Observe(Poll(kStart, {c.holder, other}, {Held(10, 1)}));
    c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
    c.log->ends[IdOf(other)] = HoldEnd::kConnectionLost;
    c.e.Observe(Poll(kStart + 5, {}, {}, Stats(0, 0, abandoned)));
    c.ReadAndPoll(kStart + 6, {}, {}, abandoned);
    c.ReadAndPoll(kStart + 7, {}, {}, abandoned);
    EXPECT_EQ(c.e.Lost("connection_lost"), abandoned - 1) << abandoned;
    EXPECT_EQ(c.e.Released("session_closed"), 2 - abandoned) << abandoned;
  }
}

TEST(NoCauseEndTest, ACountThatCameAfterThePollsReadSettles) {
  // The backend counted its end after the poll read the counters and left before it read
  // pg_stat_activity: the count shows in the read right after the poll.
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  c.e.Observe(Poll(kStart + 5, {}, {}), Stats(0, 0, 1));
  c.ReadAndPoll(kStart + 6, {}, {}, 1);
  c.ReadAndPoll(kStart + 7, {}, {}, 1);
  EXPECT_EQ(c.e.Lost("connection_lost"), 1);
  EXPECT_EQ(c.e.Released("session_closed"), 0);
}

TEST(NoCauseEndTest, BeforeFourteenTheLineAloneIsAClose) {
  // 12/13 count no abandoned ends: a disconnection line stays a clean close (a documented limit).
  NoCauseCase c;
  c.e.Observe(Poll(kStart, {c.holder}, {Held(10, 1)}, std::nullopt));
  c.log->ends[IdOf(c.holder)] = HoldEnd::kCleanClose;
  c.e.Observe(Poll(kStart + 5, {}, {}, std::nullopt));
  c.log->reads += 2;
  c.e.Observe(Poll(kStart + 6, {}, {}, std::nullopt));
  EXPECT_EQ(c.e.Released("session_closed"), 1);
  ExpectEvent(c.e.events(), EventKind::kLockReleased, 10, CauseOf(HoldEnd::kCleanClose),
              EndEvidence::kLog);
}

}  // namespace
}  // namespace pglock
