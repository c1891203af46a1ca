// The lease transitions' state machine (exporter/events/lease_transitions.h) on hand-made polls
// of a lease table judged through JudgePoll(): acquired, renewed, released, hand-overs, overlaps
// and expired takeovers, the write counters as evidence, and the bounds on the series.
#include "exporter/events/lease_transitions.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "exporter/events/event_names.h"
#include "exporter/snapshot/poll_data.h"
#include "tests/events/event_test_support.h"

namespace pglock {
namespace {

using testing::Events;
using testing::kPostmasterStart;
using testing::MakeSession;
using testing::Poll;

// ---- Leases ---------------------------------------------------------------------------------

LeaseTableData Leases(std::vector<LeaseRow> rows, int64_t total = -1,
                      std::optional<TableWrites> writes = std::nullopt) {
  LeaseTableData t;
  t.table = "leases";
  t.ok = true;
  t.total = total >= 0 ? total : static_cast<int64_t>(rows.size());
  t.rows = std::move(rows);
  t.writes = writes;
  return t;
}

// One table with its write counters (n_tup_upd, n_tup_del).
LeaseTableData Written(std::vector<LeaseRow> rows, int64_t updated, int64_t deleted) {
  return Leases(std::move(rows), -1, TableWrites{updated, deleted});
}

PollData LeasePoll(double now, LeaseTableData table) {
  PollData d = Poll(now, {}, {});
  table.now = now;
  d.leases = {std::move(table)};
  return d;
}

TEST(LeaseTransitionsTest, LeaseTransitions) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}})));
  // No "acquired" for what already existed at the first poll.
  EXPECT_EQ(e.TotalLeaseTransitions(), 0);

  // a renewed by its holder; b new.
  e.Observe(LeasePoll(1005, Leases({{"a", "h1", 900, 1200}, {"b", "h9", 1001, 1300}})));
  EXPECT_EQ(e.Lease("a", "renewed"), 1);
  EXPECT_EQ(e.Lease("b", "acquired"), 1);
  EXPECT_EQ(e.TotalLeaseTransitions(), 2);

  // Nothing changed: nothing counted.
  e.Observe(LeasePoll(1010, Leases({{"a", "h1", 900, 1200}, {"b", "h9", 1001, 1300}})));
  EXPECT_EQ(e.TotalLeaseTransitions(), 2);

  // a's holder edited in place (taken_at unchanged) before h1's lease expired (1150 < 1200); b
  // gone.
  e.Observe(LeasePoll(1150, Leases({{"a", "h2", 900, 1250}})));
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.Lease("b", "released"), 1);

  // a taken by h3 once h2's lease had expired (1250 >= 1250).
  e.Observe(LeasePoll(1300, Leases({{"a", "h3", 1250, 1350}})));
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 1);
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.TotalLeaseTransitions(), 5);
}

// A name twice in one read (a name_sql that gives two rows one name): its first row stands, so a
// read that goes on showing both counts nothing read after read, and a new name twice is acquired
// once.
TEST(LeaseTransitionsTest, ANameTwiceInOneReadIsJudgedByItsFirstRow) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}, {"a", "h2", 950, 1100}})));
  const auto twice = Leases({{"a", "h1", 900, 1100},
                             {"a", "h2", 950, 1100},
                             {"b", "h3", 1001, 1300},
                             {"b", "h4", 1002, 1300}});
  e.Observe(LeasePoll(1005, twice));
  EXPECT_EQ(e.Lease("b", "acquired"), 1);
  EXPECT_EQ(e.TotalLeaseTransitions(), 1);
  e.Observe(LeasePoll(1010, twice));
  e.Observe(LeasePoll(1015, twice));
  EXPECT_EQ(e.TotalLeaseTransitions(), 1) << "the same read again is no transition";
}

// A restart of the exporter keeps the tables' last reads (SaveLeases, then RestoreLeases in the
// tracker of the next start): the first read after it is judged against the last one before.
TEST(LeaseTransitionsTest, LeaseReadsKeptAcrossARestartAreJudgedAcrossTheGap) {
  Events before;
  const auto read_before =
      Written({{"a", "h1", 999, 1120}, {"b", "h5", 990, 1500}, {"c", "h7", 995, 1500}}, 10, 0);
  before.Observe(LeasePoll(1000, read_before));
  // Down 200 s: a expired and was taken by h2 after its expiry; b is still h5's; c was deleted
  // by h7 and taken by h8 while it was valid (the table counts one delete: a give-back).
  const auto read_after =
      Written({{"a", "h2", 1130, 1250}, {"b", "h5", 990, 1500}, {"c", "h8", 1190, 1800}}, 11, 1);
  Events after;
  after.tracker().RestoreLeases(before.tracker().SaveLeases());
  after.Observe(LeasePoll(1200, read_after));
  EXPECT_EQ(after.Lease("a", "expired_takeover"), 1);
  EXPECT_EQ(after.Lease("c", "handover"), 1);
  EXPECT_EQ(after.TotalLeaseTransitions(), 2) << "b, held by the same holder, is no transition";
  ASSERT_EQ(after.events().size(), 2u);
  // Without them, that read is a first read: nothing is judged.
  Events fresh;
  fresh.Observe(LeasePoll(1200, read_after));
  EXPECT_EQ(fresh.TotalLeaseTransitions(), 0);
}

// ---- Hand-overs and overlaps (a leases table given back with DELETE, the next round taking it at
// once)

TEST(LeaseTransitionsTest, DeleteAndRetakeBetweenPollsIsAHandover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // h1 deleted its row at 1000.5, h2 inserted at 1000.55: a new holder before h1's expiry.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.55, 1120.55}}, 0, 1)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  e.Observe(LeasePoll(1030, Written({{"a", "h2", 1000.55, 1120.55}}, 0, 1)));
  EXPECT_EQ(e.Lease("a", "overlap"), 0);
  EXPECT_EQ(e.TotalLeaseTransitions(), 1);
}

TEST(LeaseTransitionsTest, TakeWithoutGiveBackIsAnOverlapOnceTheCountersHadTimeToArrive) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 10, 0)));
  // An upsert that forgot `WHERE expires_at < now()`: one update, no delete.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.5, 1120.5}}, 11, 0)));
  for (double now = 1002; now < 1001 + kLeaseWritesDelaySeconds; now += 1) {
    e.Observe(LeasePoll(now, Written({{"a", "h2", 1000.5, 1120.5}}, 11, 0)));
    EXPECT_EQ(e.Lease("a", "overlap"), 0) << "judged before the counters could arrive, at " << now;
  }
  e.Observe(
      LeasePoll(1001 + kLeaseWritesDelaySeconds, Written({{"a", "h2", 1000.5, 1120.5}}, 11, 0)));
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.Lease("a", "handover"), 0);
  e.Observe(LeasePoll(1030, Written({{"a", "h2", 1000.5, 1120.5}}, 11, 0)));
  EXPECT_EQ(e.Lease("a", "overlap"), 1) << "counted once";
}

TEST(LeaseTransitionsTest, CountersArrivingLateTurnAPendingChangeIntoAHandover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // The deleting backend had flushed less than a second before: its delete shows 9 s later.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.5, 1120.5}}, 0, 0)));
  e.Observe(LeasePoll(1005, Written({{"a", "h2", 1000.5, 1120.5}}, 0, 0)));
  e.Observe(LeasePoll(1010, Written({{"a", "h2", 1000.5, 1120.5}}, 0, 1)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  e.Observe(LeasePoll(1030, Written({{"a", "h2", 1000.5, 1120.5}}, 0, 1)));
  EXPECT_EQ(e.Lease("a", "overlap"), 0);
}

TEST(LeaseTransitionsTest, HolderEditedInPlaceIsAnOverlapAtOnceWhateverTheCounters) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // UPDATE leases SET holder = 'intruder': taken_at unchanged, so nobody took the lease; the
  // deletes of other rows' clean-up prove nothing about it.
  e.Observe(LeasePoll(1001, Written({{"a", "intruder", 999, 1120}}, 1, 5)));
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.Lease("a", "handover"), 0);
}

TEST(LeaseTransitionsTest, HolderEditedInPlaceAfterExpiryIsAnExpiredTakeover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 900, 990}}, 0, 0)));
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 900, 990}}, 1, 0)));
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 1);
  EXPECT_EQ(e.Lease("a", "overlap"), 0);
}

TEST(LeaseTransitionsTest, ExpiryMovedToThePastIsAReleaseAndTheNextTakeAHandover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // UPDATE leases SET expires_at = now() WHERE name = 'a' AND holder = 'h1'
  e.Observe(LeasePoll(1001, Written({{"a", "h1", 999, 1000.5}}, 1, 0)));
  EXPECT_EQ(e.Lease("a", "released"), 1);
  EXPECT_EQ(e.Lease("a", "renewed"), 0);
  // Taken later by the upsert, after the moved expiry: a hand-over, not an expired takeover.
  e.Observe(LeasePoll(1040, Written({{"a", "h2", 1039, 1160}}, 2, 0)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 0);
  // A lease that simply runs out and is taken is still an expired takeover.
  e.Observe(LeasePoll(1200, Written({{"a", "h3", 1190, 1300}}, 3, 0)));
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 1);
}

TEST(LeaseTransitionsTest, ExpiryGiveBackAndTakeBetweenPollsNeedTwoUpdates) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}, {"b", "h1", 999, 1120}}, 0, 0)));
  // a: given back and taken (two updates); b: taken without a give-back (one update).
  e.Observe(
      LeasePoll(1001, Written({{"a", "h2", 1000.6, 1120.6}, {"b", "h2", 1000.6, 1120.6}}, 3, 0)));
  for (double now = 1002; now <= 1001 + kLeaseWritesDelaySeconds; now += 1) {
    e.Observe(
        LeasePoll(now, Written({{"a", "h2", 1000.6, 1120.6}, {"b", "h2", 1000.6, 1120.6}}, 3, 0)));
  }
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.Lease("b", "overlap"), 1) << "three updates explain one give-back and take, not two";
}

TEST(LeaseTransitionsTest, ADeleteSeenAsAReleaseIsNoEvidenceForAnotherLease) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}, {"c", "h9", 999, 1120}}, 0, 0)));
  // c deleted (seen: released); a taken without a give-back.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.5, 1120.5}}, 1, 1)));
  EXPECT_EQ(e.Lease("c", "released"), 1);
  e.Observe(
      LeasePoll(1001 + kLeaseWritesDelaySeconds, Written({{"a", "h2", 1000.5, 1120.5}}, 1, 1)));
  EXPECT_EQ(e.Lease("a", "overlap"), 1);
  EXPECT_EQ(e.Lease("a", "handover"), 0);
}

TEST(LeaseTransitionsTest, SeveralRoundsBetweenTwoPollsAreOneHandover) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 0, 0)));
  // h1 -> h2 -> h3 between two polls: two deletes, one change seen.
  e.Observe(LeasePoll(1005, Written({{"a", "h3", 1004, 1124}}, 0, 2)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.TotalLeaseTransitions(), 1);
}

TEST(LeaseTransitionsTest, WithoutCountersNothingIsAnOverlapButAnInPlaceEdit) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 999, 1120}, {"b", "h1", 999, 1120}})));
  // A standby, or track_counts off: no counters.
  e.Observe(LeasePoll(1001, Leases({{"a", "h2", 1000.5, 1120.5}, {"b", "h2", 999, 1120}})));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.Lease("b", "overlap"), 1);
}

TEST(LeaseTransitionsTest, CounterResetIsNoEvidenceOfAnOverlap) {
  Events e;
  e.Observe(LeasePoll(1000, Written({{"a", "h1", 999, 1120}}, 500, 40)));
  // pg_stat_reset() between the polls.
  e.Observe(LeasePoll(1001, Written({{"a", "h2", 1000.5, 1120.5}}, 1, 0)));
  EXPECT_EQ(e.Lease("a", "handover"), 1);
  EXPECT_EQ(e.Lease("a", "overlap"), 0);
}

TEST(LeaseTransitionsTest, CappedLeaseTableReportsNoAcquiredOrReleased) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}}, /*total=*/50)));
  // "b" shows up and "a" drops out of the capped rows: neither is a real acquire or release.
  e.Observe(LeasePoll(1005, Leases({{"b", "h2", 950, 1010}}, /*total=*/50)));
  EXPECT_EQ(e.TotalLeaseTransitions(), 0);
  // Changes to rows seen in both polls are still counted.
  e.Observe(LeasePoll(1010, Leases({{"b", "h2", 950, 1020}}, /*total=*/50)));
  EXPECT_EQ(e.Lease("b", "renewed"), 1);
}

TEST(LeaseTransitionsTest, CappedThenCompleteDoesNotReportAcquired) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}}, /*total=*/2)));
  e.Observe(LeasePoll(1005, Leases({{"a", "h1", 900, 1100}, {"b", "h2", 800, 1200}})));
  EXPECT_EQ(e.Lease("b", "acquired"), 0);
}

TEST(LeaseTransitionsTest, FailedLeaseReadIsNotARelease) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}})));
  LeaseTableData failed;
  failed.table = "leases";
  failed.ok = false;
  failed.error = "permission denied";
  e.Observe(LeasePoll(1005, failed));
  EXPECT_EQ(e.TotalLeaseTransitions(), 0);
  e.Observe(LeasePoll(1010, Leases({{"a", "h1", 900, 1100}})));
  EXPECT_EQ(e.TotalLeaseTransitions(), 0);
}

TEST(LeaseTransitionsTest, LeaseTransitionsSurviveAServerRestart) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({{"a", "h1", 900, 1100}})));
  PollData after = LeasePoll(1200, Leases({{"a", "h2", 1150, 1300}}));
  after.postmaster_start = kPostmasterStart + 10;
  e.Observe(after);
  EXPECT_EQ(e.Lease("a", "expired_takeover"), 1);
}

TEST(LeaseTransitionsTest, LeaseNamesAreCappedPerTable) {
  Events e;
  e.Observe(LeasePoll(1000, Leases({})));
  std::vector<LeaseRow> rows;
  for (size_t i = 0; i < kMaxLeaseCounterNames + 5; ++i) {
    rows.push_back({"job-" + std::to_string(i), "h", 1000, 2000});
  }
  e.Observe(LeasePoll(1005, Leases(rows)));
  std::set<std::string> names;
  for (const auto& [k, v] : e.counters().lease_transitions) names.insert(std::get<1>(k));
  EXPECT_EQ(names.size(), kMaxLeaseCounterNames + 1);
  EXPECT_EQ(e.Lease("other", "acquired"), 5);
  EXPECT_EQ(e.TotalLeaseTransitions(), static_cast<double>(kMaxLeaseCounterNames + 5));
}

TEST(LeaseTransitionsTest, RowLockLeaseEventsNameTheHoldingSessions) {
  // A row_lock table's row held by pid 41's transaction, then by pid 42's, then by none: each
  // event carries the pid and identity of the session whose transaction held the row.
  const auto row = [](const std::string& holder, int pid) {
    LeaseRow r{"job-7", holder, 1000, 0};
    r.row_locked = pid != 0;
    r.pid = pid;
    return r;
  };
  const auto poll = [](double now, std::vector<LeaseRow> rows, std::vector<Session> sessions) {
    PollData d = LeasePoll(now, Leases(std::move(rows)));
    d.sessions = std::move(sessions);
    return d;
  };
  Session worker1 = MakeSession(41, "idle in transaction", 1000);
  worker1.application_name = "worker-1";
  Session worker2 = MakeSession(42, "idle in transaction", 1004);
  worker2.application_name = "worker-2";
  Events e;
  e.Observe(poll(1000, {}, {worker1}));
  e.Observe(poll(1002, {row("pid 41", 41)}, {worker1}));
  e.Observe(poll(1006, {row("pid 42", 42)}, {worker1, worker2}));
  e.Observe(poll(1010, {}, {worker1, worker2}));
  std::vector<const Event*> lease;
  for (const Event& ev : e.events()) {
    if (std::string_view(EventKindName(ev.kind)).starts_with("lease_")) lease.push_back(&ev);
  }
  ASSERT_EQ(lease.size(), 3u);
  EXPECT_EQ(lease[0]->kind, EventKind::kLeaseAcquired);
  EXPECT_EQ(lease[0]->current.pid, 41);
  EXPECT_EQ(lease[0]->current.application_name(), "worker-1");
  EXPECT_EQ(lease[1]->kind, EventKind::kLeaseHandover);
  EXPECT_EQ(lease[1]->previous.pid, 41);
  EXPECT_EQ(lease[1]->current.pid, 42);
  EXPECT_EQ(lease[1]->current.application_name(), "worker-2");
  EXPECT_EQ(lease[2]->kind, EventKind::kLeaseReleased);
  EXPECT_EQ(lease[2]->previous.pid, 42);
  EXPECT_EQ(lease[2]->current.pid, 0);
}

TEST(LeaseTransitionsTest, AJobQueuesEverNewIdsKeepTheSeriesBoundedOverDays) {
  // A job queue read as a lock table: a few claimed jobs at a time, each id seen for a few polls
  // and never again. 20,000 ids: the zero-seeded counters stop at kMaxSeededLeases names, the
  // counted ones at kMaxLeaseCounterNames, then "other".
  Events e;
  size_t after_cap = 0;
  for (int poll = 0; poll < 5000; ++poll) {
    std::vector<LeaseRow> rows;
    for (int j = 0; j < 4; ++j) {
      const int id = poll * 4 + j;
      rows.push_back({std::to_string(id), "worker", 1000.0 + poll, 0});
    }
    e.Observe(LeasePoll(1000.0 + poll, Leases(rows)));
    if (poll == 1000) after_cap = e.counters().lease_transitions.size();
  }
  std::set<std::string> names;
  for (const auto& [k, v] : e.counters().lease_transitions) names.insert(std::get<1>(k));
  EXPECT_LE(names.size(), kMaxLeaseCounterNames + 1);
  EXPECT_EQ(e.counters().lease_transitions.size(), after_cap) << "series grew after the cap";
  EXPECT_GT(e.Lease("other", "acquired"), 10'000);
}

}  // namespace
}  // namespace pglock
