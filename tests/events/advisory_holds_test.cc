// The advisory holds' state machine (exporter/events/advisory_holds.h, advisory_holds_pending.cc)
// on hand-made polls judged through JudgePoll(): releases and losses, the states a hold waits in
// (backend_ending, awaiting_end_count, settling), hand-overs and takeovers, a server restart and
// the bound on the lost keys remembered for takeovers. How a holder's session ended (its cause) is
// proved in session_ends_test.cc.
#include "exporter/events/advisory_holds.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "exporter/events/events.h"
#include "exporter/events/inventory.h"
#include "exporter/events/judge.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "tests/events/event_test_support.h"

namespace pglock {
namespace {

using testing::Events;
using testing::Get;
using testing::Held;
using testing::Key;
using testing::kStart;
using testing::MakeSession;
using testing::Poll;
using testing::PollIdleSessionTimeout60;
using testing::ReapRole77;
using testing::Stats;

// ---- Releases and losses --------------------------------------------------------------------

TEST(AdvisoryHoldsTest, FirstPollCountsNothingButSeedsZeroSeries) {
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1)}));
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("unlocked"), 0);
  // Zero series exist for every cause and reason, so increase() sees the first event.
  for (const char* cause : {"idle_in_transaction_timeout", "idle_session_timeout", "terminated",
                            "connection_lost", "server_restart", "unknown"}) {
    EXPECT_EQ(e.counters().losses.count({"appdb", "unnamed", cause}), 1u) << cause;
  }
  EXPECT_EQ(e.counters().releases.count({"appdb", "unnamed", "unlocked"}), 1u);
  EXPECT_EQ(e.counters().releases.count({"appdb", "unnamed", "session_closed"}), 1u);
  EXPECT_EQ(e.counters().takeovers.count({"appdb", "unnamed"}), 1u);
  EXPECT_EQ(e.counters().handovers.count({"appdb", "unnamed"}), 1u);
}

TEST(AdvisoryHoldsTest, CleanUnlockIsAReleaseNotALoss) {
  Events e;
  const Session s = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {s}, {Held(10, 1), Held(10, 2)}));
  // The client ran pg_advisory_unlock(1): its session went active and idle again.
  e.Observe(Poll(kStart + 5, {MakeSession(10, "idle", kStart + 3)}, {Held(10, 2)}));
  EXPECT_EQ(e.Released("unlocked"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(AdvisoryHoldsTest, StillHeldCountsNothing) {
  Events e;
  const Session s = MakeSession(10, "idle", kStart - 5);
  for (int i = 0; i < 3; ++i) e.Observe(Poll(kStart + 5 * i, {s}, {Held(10, 1)}));
  EXPECT_EQ(e.Released("unlocked"), 0);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(AdvisoryHoldsTest, SessionClosedWithoutAbnormalEndIsAReleaseNotALoss) {
  // A job library's unlock-then-close, or a close without unlock, between two polls.
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1), Held(10, 2)}));
  e.Observe(Poll(kStart + 5, {}, {}));
  EXPECT_EQ(e.Released("session_closed"), 2);
  EXPECT_EQ(e.Released("unlocked"), 0);
  EXPECT_EQ(e.TotalLost(), 0);
  // The next run taking the key later is a new acquisition, not a takeover.
  e.Observe(Poll(kStart + 60, {MakeSession(11, "idle", kStart + 55)}, {Held(11, 1)}));
  EXPECT_EQ(e.Takeovers(), 0);
  EXPECT_EQ(e.Handovers(), 0);
}

TEST(AdvisoryHoldsTest, PidReuseIsASessionEnd) {
  Events e;
  Session s = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {s}, {Held(10, 1)}));
  s.backend_start = kStart + 1;  // same pid, new backend
  e.Observe(Poll(kStart + 5, {s}, {}));
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.Released("unlocked"), 0);
}

// ---- Holds that wait: backend_ending, settling, awaiting_end_count -------------------------

TEST(AdvisoryHoldsTest, HolderTerminatedWhileStillListedIsALossNotAnUnlock) {
  // pg_terminate_backend: the backend releases its locks, counts its end, then leaves
  // pg_stat_activity. A poll in between sees the lock gone from a session that ran nothing since.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  const Session b_took = MakeSession(11, "idle", kStart + 4);
  e.Observe(Poll(kStart + 5, {a, b_took}, {Held(11, 1)}));
  EXPECT_EQ(e.Released("unlocked"), 0) << "a ran no statement: it did not unlock";
  EXPECT_EQ(e.Handovers(), 0);
  e.Observe(Poll(kStart + 10, {b_took}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
  EXPECT_EQ(e.Released("unlocked"), 0);
}

TEST(AdvisoryHoldsTest, HolderTerminatedWhoseEndIsCountedWhileStillListedIsALoss) {
  // The backend released its lock and counted its end just before the poll read the counters, and
  // was still listed when the poll read pg_stat_activity: the poll sees the end counted, the lock
  // gone and the session there. At the next inventory the session is gone and the interval counts
  // no end: the end counted while it was still listed is its own.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {a, b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.TotalLost(), 0) << "judged when its session is gone";
  e.Observe(Poll(kStart + 10, {b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
  const Session b_took = MakeSession(11, "idle", kStart + 12);
  e.Observe(Poll(kStart + 15, {b_took}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.TotalLost(), 1);
}

TEST(AdvisoryHoldsTest, AnEndCountedWhileAHolderIsListedIsOnlyThatHoldersToClaim) {
  // As above, but the session whose lock went stays connected (a procedure that unlocked inside a
  // long statement): the end counted in that interval belongs to no holder, and a holder that
  // closes its session cleanly in the next interval must not be paged for it.
  Events e;
  const Session a = MakeSession(10, "active", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(11, 2)}));
  e.Observe(Poll(kStart + 5, {a, b}, {Held(11, 2)}, Stats(0, 1, 0)));
  e.Observe(Poll(kStart + 10, {a}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Released("unlocked"), 1);
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.TotalLost(), 0);
}

TEST(AdvisoryHoldsTest, TerminationCountedJustAfterThePollIsALossAndATakeover) {
  // pg_terminate_backend: the backend releases its locks, counts its end and leaves
  // pg_stat_activity, between the poll's read of the counters and its read of the sessions: gone
  // with no count. The second read sees the count. The key's next holder (at the poll) took a lost
  // key: a takeover.
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1)}));
  const Session next = MakeSession(11, "idle", kStart + 4);
  const Session other = MakeSession(12, "active", kStart + 4);
  e.Observe(Poll(kStart + 5, {next, other}, {Held(11, 1), Held(12, 2)}, Stats(0, 0, 0)),
            Stats(0, 1, 0));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Released("session_closed"), 0);
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
  // The next judgement sees that end again in its delta: it is not claimed twice (here by a
  // holder that closed its session cleanly).
  e.Observe(Poll(kStart + 10, {next}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.TotalLost(), 1);
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
}

TEST(AdvisoryHoldsTest, NoLateCountIsACleanCloseAtOnce) {
  // A clean close is judged at its poll (with the second read), not an interval later: an
  // abnormal end of another session in the next interval cannot be pinned on it.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), w = MakeSession(11, "active", kStart - 5),
                n = MakeSession(20, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, w, n}, {Held(10, 1)}));
  const Session w_took = MakeSession(11, "idle", kStart + 3);
  e.Observe(Poll(kStart + 5, {w_took, n}, {Held(11, 1)}, Stats(0, 0, 0)));  // a closed cleanly
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.Handovers(), 1);
  e.Observe(Poll(kStart + 10, {w_took}, {Held(11, 1)}, Stats(0, 0, 1)));  // n abandoned
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(AdvisoryHoldsTest, UnsettledHoldsAreCleanClosesAtTheNextPoll) {
  // The poller could not read the counters again: the next Observe() judges them clean closes.
  auto data = std::make_shared<PollData>(Poll(kStart + 5, {}, {}, Stats(0, 0, 0)));
  EventTracker tracker;
  Counters counters;
  LockNames names;
  auto first = std::make_shared<PollData>(
      Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 1)}));
  tracker.Observe(first, nullptr, &names, &counters);
  tracker.Observe(data, first, &names, &counters);
  EXPECT_TRUE(tracker.settling());
  EXPECT_EQ(Get(counters.releases, std::make_tuple(std::string("appdb"), std::string("unnamed"),
                                                   std::string("session_closed"))),
            0);
  auto third = std::make_shared<PollData>(Poll(kStart + 10, {}, {}, Stats(0, 1, 0)));
  tracker.Observe(third, data, &names, &counters);
  EXPECT_FALSE(tracker.settling());
  EXPECT_EQ(Get(counters.releases, std::make_tuple(std::string("appdb"), std::string("unnamed"),
                                                   std::string("session_closed"))),
            1);
  double lost = 0;
  for (const auto& [k, v] : counters.losses) lost += v;
  EXPECT_EQ(lost, 0) << "a count a whole interval later is not the settled holder's";
}

// Role 77 has idle_session_timeout 3 s. A lock holder closes cleanly; a session holding nothing,
// idle since `idle_since` at the poll's now() (kStart + 5), is reaped before the second read, which
// runs `settle_after` seconds after that now(). Its fatal end is its own, not the holder's.
void ExpectReapedSessionKeepsItsEndAtTheSecondRead(double idle_since, double settle_after) {
  Events e;
  e.set_settle_after(settle_after);
  Session reaped = MakeSession(20, "idle", idle_since);
  reaped.usesysid = 77;
  for (PollData p : {Poll(kStart, {MakeSession(10, "active", kStart - 1)}, {Held(10, 1)}),
                     Poll(kStart + 5, {reaped}, {}, Stats(0, 0, 0)),
                     Poll(kStart + 10, {}, {}, Stats(1, 0, 0))}) {
    p.overrides = ReapRole77();
    // The second poll's second read sees the reaped session's end.
    if (p.now == kStart + 5) {
      e.Observe(p, Stats(1, 0, 0));
      EXPECT_EQ(e.Released("session_closed"), 1);
    } else {
      e.Observe(p);
    }
    EXPECT_EQ(e.TotalLost(), 0) << "poll at +" << p.now - kStart;
  }
}

TEST(AdvisoryHoldsTest, ASessionReapedWhileAHolderSettlesKeepsItsFatalEnd) {
  ExpectReapedSessionKeepsItsEndAtTheSecondRead(kStart + 2.1, 0.3);  // idle 2.9 s at the poll
}

TEST(AdvisoryHoldsTest, TheReservationHorizonIsWhenTheSecondReadRan) {
  // Idle 1.5 s at the poll's now(); the poll took 1.35 s more, so the second read ran 1.6 s after.
  ExpectReapedSessionKeepsItsEndAtTheSecondRead(kStart + 3.5, 1.6);
}

TEST(AdvisoryHoldsTest, AnEndingHoldersEndCountedWhileAnotherSettlesIsNotTheSettlingHolders) {
  // A closed cleanly; B is being terminated at the poll (its lock gone, still listed); B's end is
  // counted before the second read: it is B's (judged at the next inventory), not A's.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5),
                c = MakeSession(12, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b, c}, {Held(10, 1), Held(11, 2)}));
  const Session c_took = MakeSession(12, "idle", kStart + 4);
  e.Observe(Poll(kStart + 5, {b, c_took}, {Held(12, 1)}, Stats(0, 0, 0)), Stats(0, 1, 0));
  e.Observe(Poll(kStart + 10, {c_took}, {Held(12, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 0) << "B's key was not taken; A's key was handed over";
  EXPECT_EQ(e.Handovers(), 1);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(AdvisoryHoldsTest, ASettlingDeferredHoldDoesNotHideItsKeysNextHolderChange) {
  // A ends cleanly while still listed at p2 (deferred) and B takes its key; at p3 A is gone and
  // settles while B was terminated and C took the key: B's loss and C's takeover count.
  Events e;
  const Session a = MakeSession(12, "idle", kStart - 5), b = MakeSession(11, "active", kStart - 5),
                c = MakeSession(13, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b, c}, {Held(12, 1)}));
  const Session b_took = MakeSession(11, "idle", kStart + 4);
  e.Observe(Poll(kStart + 5, {a, b_took, c}, {Held(11, 1)}));
  const Session c_took = MakeSession(13, "idle", kStart + 9);
  e.Observe(Poll(kStart + 10, {c_took}, {Held(13, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1) << "B lost the key and C took it";
  const Session c_unlocked = MakeSession(13, "idle", kStart + 13),
                d = MakeSession(14, "idle", kStart + 14);
  e.Observe(Poll(kStart + 15, {c_unlocked, d}, {Held(14, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 2);  // A to B, C to D
}

TEST(AdvisoryHoldsTest, LockGoneFromAStillSessionThatStaysIsAnUnlockAtTheNextInventory) {
  // A statement that runs for long may unlock inside it (a procedure): no state change is seen.
  // The next inventory still lists the session: a release by unlock. The rest of each interval is
  // judged on time.
  Events e;
  const Session a = MakeSession(10, "active", kStart - 5);
  const Session b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(10, 2)}));
  e.Observe(Poll(kStart + 5, {a}, {Held(10, 2)}));  // b closed
  EXPECT_EQ(e.Released("unlocked"), 0);
  e.Observe(Poll(kStart + 10, {a}, {Held(10, 2)}));
  EXPECT_EQ(e.Released("unlocked"), 1);
  EXPECT_EQ(e.TotalLost(), 0);
}

TEST(AdvisoryHoldsTest, ADyingHoldersKeyTakenLaterIsATakeover) {
  // The poll falls between the terminated backend's release and its exit; the next worker takes
  // the key only after the next inventory.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {a, b}, {}));
  e.Observe(Poll(kStart + 10, {b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 0);
  const Session b_took = MakeSession(11, "idle", kStart + 12);
  e.Observe(Poll(kStart + 15, {b_took}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
  EXPECT_EQ(e.Released("unlocked") + e.Released("session_closed"), 0);
}

TEST(AdvisoryHoldsTest, ALossInAnInventoryThatAWaitSkipsIsStillCounted) {
  // A long statement unlocks inside itself (a procedure): a lock is gone from a session that ran
  // nothing since, and the judgement waits. Meanwhile a worker takes another key, is terminated
  // holding it, and the next worker takes it: a loss and a takeover, each seen by the inventories
  // the wait passes over.
  Events e;
  const Session proc = MakeSession(10, "active", kStart - 100);
  const Session worker = MakeSession(11, "idle", kStart - 5);
  const Session next = MakeSession(12, "idle", kStart - 5);
  e.Observe(Poll(kStart, {proc, worker, next}, {Held(10, 1)}));
  const Session worker_took = MakeSession(11, "idle", kStart + 3);
  e.Observe(Poll(kStart + 5, {proc, worker_took, next}, {Held(11, 2)}));  // proc unlocked key 1
  e.Observe(Poll(kStart + 10, {proc, next}, {}, Stats(0, 1, 0)));         // worker terminated
  const Session next_took = MakeSession(12, "idle", kStart + 13);
  for (int i = 3; i <= kMaxCounterWaits + 1; ++i) {
    e.Observe(Poll(kStart + 5 * i, {proc, next_took}, {Held(12, 2)}, Stats(0, 1, 0)));
  }
  EXPECT_EQ(e.Released("unlocked"), 1);
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
}

TEST(AdvisoryHoldsTest, AWaitForAHoldersLateCountDoesNotHideALossAndTakeover) {
  // A holder closes cleanly just before its idle_session_timeout: its timing matches, no fatal end
  // is counted, and its end is awaited. Meanwhile a worker takes another key, is terminated
  // holding it, and the next worker takes it.
  Events e;
  const Session holder = MakeSession(10, "idle", kStart - 56);
  const Session worker = MakeSession(11, "idle", kStart - 5);
  const Session next = MakeSession(12, "idle", kStart - 5);
  e.Observe(
      PollIdleSessionTimeout60(kStart, {holder, worker, next}, {Held(10, 1)}, Stats(0, 0, 0)));
  const Session worker_took = MakeSession(11, "idle", kStart + 3);
  e.Observe(
      PollIdleSessionTimeout60(kStart + 5, {worker_took, next}, {Held(11, 2)}, Stats(0, 0, 0)));
  e.Observe(
      PollIdleSessionTimeout60(kStart + 10, {next}, {}, Stats(0, 1, 0)));  // the worker terminated
  const Session next_took = MakeSession(12, "idle", kStart + 13);
  for (int i = 3; i <= kMaxCounterWaits + 1; ++i) {
    e.Observe(PollIdleSessionTimeout60(kStart + 5 * i, {next_took}, {Held(12, 2)}, Stats(0, 1, 0)));
  }
  EXPECT_EQ(e.Released("session_closed"), 1);
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
}

// ---- Advisory hold states ---------------------------------------------------------------------

SessionId SessionOf(int pid) { return {pid, kStart - 1000 - pid}; }

TEST(AdvisoryHoldStateTest, HeldThenBackendEndingThenSettlingThenEndedLost) {
  // pg_terminate_backend as two polls and the second read see it: the lock gone from a session
  // still listed that ran nothing since (kBackendEnding), then the session gone with no end
  // counted (kSettling), then the termination counted by the second read (kEnded: lost).
  InventoryTier tier{std::chrono::milliseconds(0)};
  EventTracker tracker;
  LockNames names;
  Counters counters;
  std::optional<HoldState> at_second_read;
  const auto judge = [&](const PollData& p, std::optional<DatabaseStats> later) {
    auto data = std::make_shared<PollData>(p);
    const ReadCountersAgain read_again = [&]() {
      at_second_read = tracker.holds().StateOf(Key(1), SessionOf(10));
      return CountersReadAgain{std::vector<DatabaseStats>{later.value_or(Stats(0, 0, 0))}, 0.3};
    };
    JudgePoll(SteadyClock::now(), &data, &tier, &tracker, &names, read_again, &counters, nullptr);
  };
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "active", kStart - 5);
  judge(Poll(kStart, {a, b}, {Held(10, 1), Held(11, 2)}), std::nullopt);
  judge(Poll(kStart + 5, {a, b}, {Held(10, 1), Held(11, 2)}), std::nullopt);
  EXPECT_EQ(tracker.holds().StateOf(Key(1), SessionOf(10)), HoldState::kHeld);
  judge(Poll(kStart + 10, {a, b}, {Held(11, 2)}), std::nullopt);
  EXPECT_EQ(tracker.holds().StateOf(Key(1), SessionOf(10)), HoldState::kBackendEnding);
  EXPECT_FALSE(at_second_read.has_value()) << "nothing settles while the session is listed";
  judge(Poll(kStart + 15, {b}, {Held(11, 2)}), Stats(0, 1, 0));
  EXPECT_EQ(at_second_read, HoldState::kSettling);
  EXPECT_EQ(tracker.holds().StateOf(Key(1), SessionOf(10)), std::nullopt) << "ended: forgotten";
  EXPECT_EQ(Get(counters.losses, std::make_tuple(std::string("appdb"), std::string("unnamed"),
                                                 std::string("terminated"))),
            1);
  EXPECT_EQ(tracker.holds().StateOf(Key(2), SessionOf(11)), HoldState::kHeld);
}

TEST(AdvisoryHoldStateTest, TheTransitionsAndTheirEvidence) {
  const auto next = [](HoldState from, HoldEvidence e) { return NextHoldState(from, e); };
  HoldEvidence still;
  still.still_held = true;
  EXPECT_EQ(next(HoldState::kHeld, still).to, HoldState::kHeld);
  HoldEvidence restart;
  restart.restarted = true;
  for (HoldState from :
       {HoldState::kHeld, HoldState::kBackendEnding, HoldState::kAwaitingEndCount}) {
    EXPECT_EQ(next(from, restart).to, HoldState::kEnded) << HoldStateName(from);
    EXPECT_EQ(next(from, restart).end, HoldEnd::kServerRestart) << HoldStateName(from);
  }
  HoldEvidence ending;
  ending.backend_ending = true;
  EXPECT_EQ(next(HoldState::kHeld, ending).to, HoldState::kBackendEnding);
  HoldEvidence awaited;
  awaited.end_count_awaited = true;
  awaited.session_end = HoldEnd::kCleanClose;
  EXPECT_EQ(next(HoldState::kHeld, awaited).to, HoldState::kAwaitingEndCount);
  // Gone from a connected session: an unlock, wherever the hold comes from.
  for (HoldState from :
       {HoldState::kHeld, HoldState::kBackendEnding, HoldState::kAwaitingEndCount}) {
    EXPECT_EQ(next(from, {}).to, HoldState::kEnded);
    EXPECT_EQ(next(from, {}).end, HoldEnd::kStillConnected);
  }
  HoldEvidence clean;
  clean.session_end = HoldEnd::kCleanClose;
  EXPECT_EQ(next(HoldState::kHeld, clean).end, HoldEnd::kCleanClose) << "12/13: no second read";
  clean.can_settle = true;
  EXPECT_EQ(next(HoldState::kHeld, clean).to, HoldState::kSettling);
  EXPECT_EQ(next(HoldState::kAwaitingEndCount, clean).to, HoldState::kSettling);
  HoldEvidence killed;
  killed.session_end = HoldEnd::kTerminated;
  killed.can_settle = true;
  EXPECT_EQ(next(HoldState::kHeld, killed).end, HoldEnd::kTerminated);
  EXPECT_EQ(next(HoldState::kSettling, killed).end, HoldEnd::kTerminated);
  EXPECT_EQ(next(HoldState::kSettling, {}).end, HoldEnd::kCleanClose) << "no late count";
}

// ---- Takeovers ------------------------------------------------------------------------------

TEST(AdvisoryHoldsTest, UnlockAndRetakeByAnotherBetweenPollsIsAHandover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  const Session a_unlocked = MakeSession(10, "idle", kStart + 3);
  const Session b_took = MakeSession(11, "idle", kStart + 4);
  e.Observe(Poll(kStart + 5, {a_unlocked, b_took}, {Held(11, 1)}));
  EXPECT_EQ(e.Takeovers(), 0);
  EXPECT_EQ(e.Handovers(), 1);
  EXPECT_EQ(e.Released("unlocked"), 1);
}

TEST(AdvisoryHoldsTest, CloseAndRetakeByTheNextWorkerIsAHandover) {
  // Two workers contending: the first closes its session, the second gets the key, both between
  // two polls.
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {Held(11, 1)}));
  EXPECT_EQ(e.Handovers(), 1);
  EXPECT_EQ(e.Takeovers(), 0);
  EXPECT_EQ(e.TotalLost(), 0);
  EXPECT_EQ(e.Released("session_closed"), 1);
}

TEST(AdvisoryHoldsTest, LossAndRetakeBetweenPollsIsATakeover) {
  Events e;
  const Session a = MakeSession(10, "active", kStart - 5),
                b = MakeSession(11, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {Held(11, 1)}, Stats(0, 1, 0)));  // a was terminated
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 0);
}

TEST(AdvisoryHoldsTest, TakeoverAfterLossAndEmptyPolls) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {}, Stats(0, 1, 0)));  // a was terminated holding the key
  e.Observe(Poll(kStart + 10, {b}, {}, Stats(0, 1, 0)));
  e.Observe(Poll(kStart + 15, {b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 0);
  e.Observe(Poll(kStart + 20, {b}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  // Held on by the same session: no further takeover.
  e.Observe(Poll(kStart + 25, {b}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  // Released and taken by yet another session: one takeover per loss, then hand-overs.
  const Session b_unlocked = MakeSession(11, "idle", kStart + 28);
  const Session c2 = MakeSession(12, "idle", kStart + 29);
  e.Observe(Poll(kStart + 30, {b_unlocked, c2}, {Held(12, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 1);
  EXPECT_EQ(e.Handovers(), 1);
}

TEST(AdvisoryHoldsTest, LostKeyTakenAfterTheTakeoverWindowIsNoTakeover) {
  Events e(/*takeover_window_seconds=*/60);
  const Session a = MakeSession(10, "active", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Lost("terminated"), 1);
  e.Observe(Poll(kStart + 70, {b}, {Held(11, 1)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(AdvisoryHoldsTest, SameSessionReHoldingIsNoTakeover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {MakeSession(10, "idle", kStart + 3)}, {}));
  e.Observe(Poll(kStart + 10, {MakeSession(10, "idle", kStart + 8)}, {Held(10, 1)}));
  EXPECT_EQ(e.Takeovers(), 0);
  EXPECT_EQ(e.Released("unlocked"), 1);
}

TEST(AdvisoryHoldsTest, KeyUnlockedCleanlyThenTakenByAnotherLaterIsNoTakeover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {a, b}, {}));
  e.Observe(Poll(kStart + 10, {a, b}, {Held(11, 1)}));
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(AdvisoryHoldsTest, SharedLockHoldersJoiningIsNoTakeover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1, false)}));
  e.Observe(Poll(kStart + 5, {a, b}, {Held(10, 1, false), Held(11, 1, false)}));
  EXPECT_EQ(e.Takeovers(), 0);
}

TEST(AdvisoryHoldsTest, TakeoverOfANamedKeyCarriesTheName) {
  Events e;
  AddBigintName(1, "sweep", &e.names());
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(10, 2)}));
  e.Observe(Poll(kStart + 5, {b}, {Held(11, 1), Held(11, 2)}, Stats(0, 1, 0)));
  EXPECT_EQ(e.Takeovers("sweep"), 1);
  EXPECT_EQ(e.Takeovers("unnamed"), 1);
  EXPECT_EQ(e.Lost("terminated", "sweep"), 1);
  EXPECT_EQ(e.Lost("terminated", "unnamed"), 1);
  // Rendered keys never become counter labels.
  for (const auto& [k, v] : e.counters().takeovers) {
    EXPECT_TRUE(std::get<1>(k) == "sweep" || std::get<1>(k) == "unnamed") << std::get<1>(k);
  }
}

// ---- Server restart -------------------------------------------------------------------------

TEST(AdvisoryHoldsTest, ServerRestartLosesEverythingAndTheNextHolderTakesOver) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "active", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1), Held(11, 2)}));
  PollData after = Poll(kStart + 30, {MakeSession(12, "idle", kStart + 25)}, {Held(12, 1)});
  after.postmaster_start = kStart + 20;
  e.Observe(after);
  EXPECT_EQ(e.Lost("server_restart"), 2);
  EXPECT_EQ(e.TotalLost(), 2);
  EXPECT_EQ(e.Released("session_closed"), 0);
  // A run that still believes it holds key 1 may overlap the new holder.
  EXPECT_EQ(e.Takeovers(), 1);
  // Key 2, lost in the restart, taken later: its own takeover; key 1 is not counted again.
  PollData later = after;
  later.now = kStart + 35;
  later.locks = {Held(12, 1), Held(12, 2)};
  e.Observe(later);
  EXPECT_EQ(e.Takeovers(), 2);
}

// kMaxLostKeys bounds the keys remembered for takeovers; past it the oldest losses are forgotten
// first, whatever their keys. 6,000 keys lost in one restart, 5,000 in a later one (the lowest keys
// and the highest, so that forgetting by key rather than by age would forget some of them): 1,000
// of the first are forgotten, and a session taking all 11,000 afterwards is 10,000 takeovers, every
// key of the later loss among them.
TEST(AdvisoryHoldsTest, LostKeysAreBoundedAndTheOldestAreForgottenFirst) {
  static_assert(kMaxLostKeys == 10'000);
  using Keys = std::vector<std::pair<int64_t, int64_t>>;  // ranges, ends included
  const Keys first_loss = {{2501, 8500}};
  const Keys later_loss = {{1, 2500}, {8501, 11000}};
  const auto holds = [](int pid, const Keys& keys) {
    std::vector<AdvisoryLock> locks;
    for (const auto& [from, to] : keys) {
      for (int64_t k = from; k <= to; ++k) locks.push_back(Held(pid, k));
    }
    return locks;
  };
  Events e;
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, holds(10, first_loss)));
  PollData first = Poll(kStart + 30, {MakeSession(11, "idle", kStart + 25)}, holds(11, later_loss));
  first.postmaster_start = kStart + 20;
  e.Observe(first);
  EXPECT_EQ(e.Lost("server_restart"), 6000);
  PollData second = Poll(kStart + 60, {MakeSession(12, "idle", kStart + 55)}, {});
  second.postmaster_start = kStart + 50;
  e.Observe(second);
  EXPECT_EQ(e.Lost("server_restart"), 11000);
  // The later loss's keys first: every one a takeover.
  PollData later = Poll(kStart + 65, {MakeSession(12, "idle", kStart + 55)}, holds(12, later_loss));
  later.postmaster_start = kStart + 50;
  e.Observe(later);
  EXPECT_EQ(e.Takeovers(), 5000);
  // Then the first loss's: 1,000 of them were forgotten.
  later.now = kStart + 70;
  later.locks = holds(12, {{1, 11000}});
  e.Observe(later);
  EXPECT_EQ(e.Takeovers(), 10000);
}

TEST(AdvisoryHoldsTest, LossThenRestartThenNewHolderIsOneTakeover) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5), b = MakeSession(11, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a, b}, {Held(10, 1)}));
  e.Observe(Poll(kStart + 5, {b}, {}, Stats(0, 1, 0)));  // lost
  PollData after = Poll(kStart + 30, {MakeSession(12, "idle", kStart + 25)}, {});
  after.postmaster_start = kStart + 20;
  e.Observe(after);
  PollData later = after;
  later.now = kStart + 35;
  later.locks = {Held(12, 1)};
  e.Observe(later);
  EXPECT_EQ(e.Lost("terminated"), 1);
  EXPECT_EQ(e.Takeovers(), 1);
}

// ---- Polls without inventory ----------------------------------------------------------------

TEST(AdvisoryHoldsTest, CheapPollsDoNotCountLockEvents) {
  Events e;
  const Session a = MakeSession(10, "idle", kStart - 5);
  e.Observe(Poll(kStart, {a}, {Held(10, 1)}));
  PollData cheap = Poll(kStart + 5, {a}, {});
  cheap.inventory = false;
  e.Observe(cheap);
  EXPECT_EQ(e.Released("unlocked"), 0);
  // Compared against the last inventory: still held, nothing happened.
  e.Observe(Poll(kStart + 10, {a}, {Held(10, 1)}));
  EXPECT_EQ(e.Released("unlocked"), 0);
  EXPECT_EQ(e.TotalLost(), 0);
}

// ---- Lock counters ----------------------------------------------------------------------------

TEST(AdvisoryHoldsTest, LockCountersAreCreatedWhereALockIsFirstSeenHeld) {
  Events e;
  AddBigintName(7, "sweep", &e.names());
  // A database with sessions but no lock: no lock event series.
  e.Observe(Poll(kStart, {MakeSession(10, "idle", kStart - 5)}, {}));
  EXPECT_TRUE(e.counters().losses.empty());
  EXPECT_TRUE(e.counters().releases.empty());
  e.Observe(Poll(kStart + 5, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 7)}));
  EXPECT_EQ(e.counters().losses.count({"appdb", "sweep", "terminated"}), 1u);
  EXPECT_EQ(e.counters().losses.count({"appdb", "unnamed", "terminated"}), 0u);
  e.Observe(Poll(kStart + 10, {MakeSession(10, "idle", kStart - 5)}, {Held(10, 7), Held(10, 8)}));
  EXPECT_EQ(e.counters().losses.count({"appdb", "unnamed", "terminated"}), 1u);
  EXPECT_EQ(e.counters().takeovers.count({"appdb", "unnamed"}), 1u);
  EXPECT_EQ(e.counters().handovers.count({"appdb", "unnamed"}), 1u);
}

}  // namespace
}  // namespace pglock
