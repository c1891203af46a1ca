// The timeline's history (exporter/events/timeline.h): intervals compressed from polls, waits
// under their holder, markers from events, and the memory bound under a thousand keys changing
// holder every poll for an hour of 1 s polls (simulated time, no sleeping).
#include "exporter/events/timeline.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <chrono>
#include <cstdio>

#include "exporter/events/event_log.h"

namespace pglock {
namespace {

constexpr double kT0 = 1.8e9;

Identity Who(int pid, const std::string& application_name) {
  Identity id;
  id.pid = pid;
  id.application_name = application_name;
  return id;
}

AdvisoryLock Granted(uint32_t objid, int pid) {
  AdvisoryLock l;
  l.key.datid = 5;
  l.key.objid = objid;
  l.pid = pid;
  return l;
}

Session Client(int pid, const std::string& app) {
  Session s;
  s.pid = pid;
  s.datid = 5;
  s.datname = "app";
  s.application_name = app;
  return s;
}

PollData Poll(double now, std::vector<AdvisoryLock> locks, std::vector<Session> sessions) {
  PollData d;
  d.now = now;
  d.locks = std::move(locks);
  d.sessions = std::move(sessions);
  return d;
}

// `intervals` (a row's holds or waits) is one closed interval that ended at `end`.
void ExpectOneClosedAt(const std::vector<TimelineInterval>& intervals, double end) {
  ASSERT_EQ(intervals.size(), 1u);
  EXPECT_FALSE(intervals[0].open);
  EXPECT_DOUBLE_EQ(intervals[0].end, end);
}

// A view in which pid 8 has waited 1 s for `lock`, held by pid 7.
TargetView AWaitOn(const std::string& lock) {
  WaitEdge e;
  e.datname = "app";
  e.lock = lock;
  e.waiter.pid = 8;
  e.blocker.pid = 7;
  e.seconds = 1;
  TargetView view;
  view.waits = {e};
  return view;
}

const TimelineRowWindow* FindRow(const TimelineWindow& w, TimelineRowKind kind,
                                 const std::string& name) {
  for (const TimelineRowWindow& r : w.rows) {
    if (r.row->kind == kind && r.row->name == name) return &r;
  }
  return nullptr;
}

TEST(Timeline, OneIntervalPerHolderExtendedEachPollAndClosedWhenGone) {
  Timeline t;
  LockNames names;
  AddBigintName(7, "nightly-report", &names);
  const TargetView view;
  // pid 10 holds for polls 0..4, pid 11 from poll 5 on.
  for (int i = 0; i < 8; ++i) {
    const int pid = i < 5 ? 10 : 11;
    t.Observe(Poll(kT0 + i, {Granted(7, pid)}, {Client(pid, i < 5 ? "report-a" : "report-b")}),
              view, &names);
  }
  const TimelineWindow w = t.Query(3600);
  const TimelineRowWindow* row = FindRow(w, TimelineRowKind::kLock, "nightly-report");
  ASSERT_NE(row, nullptr);
  ASSERT_EQ(row->holds.size(), 2u);
  EXPECT_EQ(row->holds[0].pid, 10);
  EXPECT_EQ(row->holds[0].who, "report-a");
  EXPECT_DOUBLE_EQ(row->holds[0].start, kT0);
  EXPECT_DOUBLE_EQ(row->holds[0].end, kT0 + 4);
  EXPECT_FALSE(row->holds[0].open);
  EXPECT_EQ(row->holds[1].pid, 11);
  EXPECT_DOUBLE_EQ(row->holds[1].start, kT0 + 5);
  EXPECT_DOUBLE_EQ(row->holds[1].end, kT0 + 7);
  EXPECT_TRUE(row->holds[1].open);
  EXPECT_EQ(row->row->scope, "app");
  EXPECT_DOUBLE_EQ(w.now, kT0 + 7);
}

TEST(Timeline, WaitsGoUnderTheHolderTheyWaitedOnAndRootsGetRows) {
  Timeline t;
  TargetView view;
  WaitEdge e;
  e.datname = "app";
  e.lock = "7";
  e.waiter = Who(20, "waiter-app");
  e.blocker = Who(10, "holder-app");
  e.seconds = 3;
  view.waits = {e};
  BlockingRoot root;
  root.root.id = Who(10, "holder-app");
  root.root.datname = "app";
  root.blocked_pids = {20};
  view.all_blocking_roots = {root};
  t.Observe(Poll(kT0 + 10, {Granted(7, 10)}, {Client(10, "holder-app"), Client(20, "waiter-app")}),
            view, nullptr);
  const TimelineWindow w = t.Query(3600);
  const TimelineRowWindow* lock = FindRow(w, TimelineRowKind::kLock, "7");
  ASSERT_NE(lock, nullptr);
  ASSERT_EQ(lock->waits.size(), 1u);
  EXPECT_EQ(lock->waits[0].pid, 20);
  EXPECT_EQ(lock->waits[0].blocker_pid, 10);
  EXPECT_DOUBLE_EQ(lock->waits[0].start, kT0 + 7);  // it had waited 3 s when first seen
  EXPECT_EQ(lock->attention, 1);
  const TimelineRowWindow* r = FindRow(w, TimelineRowKind::kRoot, "pid 10");
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->holds.size(), 1u);
  ASSERT_EQ(r->waits.size(), 1u);
  EXPECT_EQ(r->waits[0].who, "waiter-app");
}

TEST(Timeline, MarkersFromEventsLossesFirstReleasesLeftOut) {
  Timeline t;
  Event lost;
  lost.time = kT0 + 5;
  lost.kind = EventKind::kLockLost;
  lost.cause = CauseOf(HoldEnd::kTerminated);
  lost.evidence = EndEvidence::kLog;
  lost.datname = "app";
  lost.lock = "nightly-report";
  lost.previous = Who(10, "report-a");
  Event released = lost;
  released.kind = EventKind::kLockReleased;
  Event episode;
  episode.time = kT0 + 9;
  episode.kind = EventKind::kBlockingEpisode;
  episode.datname = "app";
  episode.previous.pid = 10;
  episode.started = kT0 + 2;
  Event lease;
  lease.time = kT0 + 8;
  lease.kind = EventKind::kLeaseExpiredTakeover;
  lease.table = "public.leases";
  lease.lease = "sweep";
  t.Observe(Poll(kT0, {}, {}), TargetView{}, nullptr);  // the history begins here
  t.AddMarkers({lost, released, episode, lease});
  t.Observe(Poll(kT0 + 10, {}, {}), TargetView{}, nullptr);
  const TimelineWindow w = t.Query(3600);
  ASSERT_EQ(w.rows.size(), 3u);
  // The loss and the expiry need a look; the episode's root row comes after.
  EXPECT_EQ(w.rows[0].attention, 2);
  EXPECT_EQ(w.rows[1].attention, 2);
  const TimelineRowWindow* lock = FindRow(w, TimelineRowKind::kLock, "nightly-report");
  ASSERT_NE(lock, nullptr);
  ASSERT_EQ(lock->markers.size(), 1u);
  EXPECT_STREQ(MarkerKindName(lock->markers[0]), "lock_lost");
  EXPECT_STREQ(EventCauseName(lock->markers[0].cause), "terminated");
  EXPECT_EQ(lock->markers[0].evidence, EndEvidence::kLog);
  const TimelineRowWindow* root = FindRow(w, TimelineRowKind::kRoot, "pid 10");
  ASSERT_NE(root, nullptr);
  ASSERT_EQ(root->markers.size(), 2u);
  EXPECT_STREQ(MarkerKindName(root->markers[0]), "blocking_episode_start");
  EXPECT_DOUBLE_EQ(root->markers[0].time, kT0 + 2);
  EXPECT_STREQ(MarkerKindName(root->markers[1]), "blocking_episode_end");
  EXPECT_DOUBLE_EQ(root->markers[1].event_time, kT0 + 9);
  EXPECT_NE(FindRow(w, TimelineRowKind::kLease, "sweep"), nullptr);
  // A window of 3 s keeps only what overlaps it: the expiry (8) and the episode's end (9).
  const TimelineWindow recent = t.Query(3);
  EXPECT_EQ(recent.rows.size(), 2u);
  EXPECT_EQ(FindRow(recent, TimelineRowKind::kLock, "nightly-report"), nullptr);
}

// A restart keeps the history (Save, then Restore in the timeline of the next start). The first
// poll after it: a holder it still sees (the same pid and backend start) goes on across the gap;
// one it does not see, or a reused pid, ends at its last sighting before the stop; the gap is
// in the window; markers and closed intervals are as they were.
// The closed intervals' journal (exporter/storage/): what closed since a number, in the order
// closed, without what the bound dropped; Save without them.
TEST(Timeline, ClosedSinceGivesTheIntervalsClosedAfterANumber) {
  Timeline t;
  Session a = Client(7, "a");
  uint64_t next = 99;
  EXPECT_TRUE(t.ClosedSince(0, &next).empty());
  EXPECT_EQ(next, 0u);
  t.Observe(Poll(kT0, {Granted(1, 7), Granted(2, 7), Granted(3, 7)}, {a}), {}, nullptr);
  t.Observe(Poll(kT0 + 1, {Granted(3, 7)}, {a}), {}, nullptr);  // keys 1 and 2 closed
  uint64_t mark = 0;
  EXPECT_EQ(t.ClosedSince(0, &mark).size(), 2u);
  EXPECT_EQ(mark, 2u);
  t.Observe(Poll(kT0 + 2, {}, {a}), {}, nullptr);  // key 3 closed
  const auto added = t.ClosedSince(mark, &next);
  EXPECT_EQ(next, 3u);
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].row->name, "3");
  EXPECT_TRUE(t.ClosedSince(next, &next).empty());
  EXPECT_EQ(t.closed_count(), 3u);
  // In parts of at most `max`: each part's next is where the following part starts.
  const auto first_two = t.ClosedSince(0, &next, 2);
  ASSERT_EQ(first_two.size(), 2u);
  EXPECT_EQ(next, 2u);
  EXPECT_NE(first_two[0].row->name, "3");  // keys 1 and 2, closed together in either order
  EXPECT_NE(first_two[1].row->name, "3");
  const auto rest = t.ClosedSince(next, &next, 2);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].row->name, "3");
  EXPECT_EQ(next, 3u);
  EXPECT_TRUE(t.Save(/*with_closed=*/false).closed.empty());
  EXPECT_EQ(t.Save().closed.size(), 3u);
  // Restored: numbered from 0 again, all of them.
  Timeline after;
  after.Restore(t.Save());
  EXPECT_EQ(after.ClosedSince(0, &next).size(), 3u);
  EXPECT_EQ(next, 3u);
}

// The markers' journal: the markers taken since a number, in the order taken (across kinds),
// without those their ring's bound dropped; in parts; Save without them.
TEST(Timeline, MarkersSinceGivesTheMarkersTakenAfterANumber) {
  Timeline t;
  uint64_t next = 99;
  EXPECT_TRUE(t.MarkersSince(0, &next).empty());
  EXPECT_EQ(next, 0u);
  t.Observe(Poll(kT0, {}, {}), TargetView{}, nullptr);
  Event lost;
  lost.kind = EventKind::kLockLost;
  lost.datname = "app";
  lost.lock = "nightly-report";
  Event takeover = lost;
  takeover.kind = EventKind::kLockTakeover;
  std::vector<Event> events;
  for (size_t i = 0; i < kMarkersPerKind + 2; ++i) {  // two losses more than a ring keeps
    lost.time = kT0 + static_cast<double>(i);
    events.push_back(lost);
    if (i % 100 == 0) {
      takeover.time = lost.time;
      events.push_back(takeover);
    }
  }
  t.AddMarkers(events);
  const uint64_t taken = events.size();
  const auto all = t.MarkersSince(0, &next);
  EXPECT_EQ(next, taken);
  ASSERT_EQ(all.size(), kMarkersPerKind + 4);  // the first two losses dropped
  EXPECT_EQ(all.size(), t.markers());
  EXPECT_EQ(all[0].event_kind, EventKind::kLockTakeover);  // taken before the third loss
  EXPECT_EQ(all[1].time, kT0 + 2);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].seq, all[i].seq) << i;
  // Since a number: the later ones only.
  const auto last_two = t.MarkersSince(taken - 2, &next);
  ASSERT_EQ(last_two.size(), 2u);
  EXPECT_EQ(last_two[1].time, kT0 + static_cast<double>(kMarkersPerKind + 1));
  EXPECT_EQ(next, taken);
  EXPECT_TRUE(t.MarkersSince(next, &next).empty());
  // In parts: each part's next is where the following one starts, none left out or repeated.
  size_t parts = 0, seen = 0;
  for (uint64_t from = 0;; ++parts) {
    const auto part = t.MarkersSince(from, &from, 128);
    seen += part.size();
    if (part.size() < 128) break;
  }
  EXPECT_EQ(seen, all.size());
  EXPECT_EQ(parts, all.size() / 128);
  EXPECT_TRUE(t.Save(true, /*with_markers=*/false).markers.empty());
  // Restored: numbered from 0 again, in the order saved.
  Timeline after;
  after.Restore(t.Save());
  EXPECT_EQ(after.MarkersSince(0, &next).size(), all.size());
  EXPECT_EQ(next, all.size());
}

TEST(Timeline, ARestartKeepsTheHistoryAndGoesOnOnlyUnderTheSameSessions) {
  Session a = Client(7, "a"), b = Client(8, "b"), c = Client(9, "c");
  for (Session* s : {&a, &b, &c}) s->backend_start = kT0 - 100;
  BlockingRoot root;
  root.root.id = Who(7, "a");
  root.root.datname = "app";
  root.blocked_pids = {9};
  TargetView blocking;
  blocking.all_blocking_roots = {root};
  Timeline before;
  before.Observe(Poll(kT0, {Granted(1, 7), Granted(2, 8), Granted(3, 9), Granted(4, 9)}, {a, b, c}),
                 blocking, nullptr);
  before.Observe(Poll(kT0 + 1, {Granted(1, 7), Granted(2, 8), Granted(3, 9)}, {a, b, c}), blocking,
                 nullptr);
  Event lost;
  lost.time = kT0 + 1;
  lost.kind = EventKind::kLockLost;
  lost.datname = "app";
  lost.lock = "4";
  lost.previous = Who(9, "c");
  before.AddMarkers({lost});
  before.Observe(Poll(kT0 + 2, {Granted(1, 7), Granted(2, 8), Granted(3, 9)}, {a, b, c}), blocking,
                 nullptr);

  Timeline after;
  after.Restore(before.Save());
  EXPECT_EQ(after.intervals(), before.intervals());
  EXPECT_EQ(after.markers(), before.markers());
  // Down from kT0 + 2 to kT0 + 60: pid 7 still holds key 1 and still blocks; pid 8 is gone; pid
  // 9 is another session now, holding key 3 again.
  Session c2 = c;
  c2.backend_start = kT0 + 30;
  after.Observe(Poll(kT0 + 60, {Granted(1, 7), Granted(3, 9)}, {a, c2}), blocking, nullptr);
  const TimelineWindow w = after.Query(3600);
  EXPECT_DOUBLE_EQ(w.kept_since, kT0);
  ASSERT_EQ(w.gaps.size(), 1u);
  EXPECT_DOUBLE_EQ(w.gaps[0].from, kT0 + 2);
  EXPECT_DOUBLE_EQ(w.gaps[0].to, kT0 + 60);
  const TimelineRowWindow* one = FindRow(w, TimelineRowKind::kLock, "1");
  ASSERT_NE(one, nullptr);
  ASSERT_EQ(one->holds.size(), 1u);
  EXPECT_TRUE(one->holds[0].open);
  EXPECT_DOUBLE_EQ(one->holds[0].start, kT0);
  EXPECT_DOUBLE_EQ(one->holds[0].end, kT0 + 60);
  const TimelineRowWindow* two = FindRow(w, TimelineRowKind::kLock, "2");
  ASSERT_NE(two, nullptr);
  ExpectOneClosedAt(two->holds, kT0 + 2);
  const TimelineRowWindow* three = FindRow(w, TimelineRowKind::kLock, "3");
  ASSERT_NE(three, nullptr);
  ASSERT_EQ(three->holds.size(), 2u);
  EXPECT_FALSE(three->holds[0].open);
  EXPECT_DOUBLE_EQ(three->holds[0].end, kT0 + 2);
  EXPECT_TRUE(three->holds[1].open);
  EXPECT_DOUBLE_EQ(three->holds[1].start, kT0 + 60);
  const TimelineRowWindow* four = FindRow(w, TimelineRowKind::kLock, "4");
  ASSERT_NE(four, nullptr);
  ExpectOneClosedAt(four->holds, kT0);
  ASSERT_EQ(four->markers.size(), 1u);
  EXPECT_STREQ(MarkerKindName(four->markers[0]), "lock_lost");
  const TimelineRowWindow* r = FindRow(w, TimelineRowKind::kRoot, "pid 7");
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->holds.size(), 1u);
  EXPECT_DOUBLE_EQ(r->holds[0].start, kT0);
  EXPECT_TRUE(r->holds[0].open);
  // The wait of pid 9's old session ends before the gap; its new session's is another.
  ASSERT_EQ(r->waits.size(), 2u);
  EXPECT_DOUBLE_EQ(r->waits[0].end, kT0 + 2);
  EXPECT_DOUBLE_EQ(r->waits[1].start, kT0 + 60);
}

// The first poll after a restore that sees no lock at all closes every restored hold (no poll
// "saw the same locks" as one before the restart).
TEST(Timeline, AFirstPollWithNoLocksAfterARestoreClosesTheRestoredHolds) {
  Session a = Client(7, "a");
  a.backend_start = kT0 - 100;
  Timeline before;
  before.Observe(Poll(kT0, {Granted(1, 7)}, {a}), TargetView{}, nullptr);
  Timeline after;
  after.Restore(before.Save());
  after.Observe(Poll(kT0 + 30, {}, {a}), TargetView{}, nullptr);
  const TimelineWindow w = after.Query(3600);
  const TimelineRowWindow* one = FindRow(w, TimelineRowKind::kLock, "1");
  ASSERT_NE(one, nullptr);
  ExpectOneClosedAt(one->holds, kT0);
}

TEST(Timeline, LongHolderTextsAreCutSoMemoryStaysBounded) {
  Timeline t;
  PollData d = Poll(kT0, {}, {});
  LeaseTableData table;
  table.table = "public.leases";
  table.ok = true;
  table.now = kT0;
  LeaseRow row;
  row.name = std::string(1000, 'n');
  row.holder = std::string(127, 'h') + "\u00e9" + std::string(100000, 'h');
  row.taken_at = kT0 - 5;
  row.expires_at = kT0 + 60;
  table.rows = {row};
  d.leases = {table};
  t.Observe(d, TargetView{}, nullptr);
  const TimelineWindow w = t.Query(60);
  ASSERT_EQ(w.rows.size(), 1u);
  EXPECT_EQ(w.rows[0].row->name, std::string(128, 'n') + "\u2026");
  ASSERT_EQ(w.rows[0].holds.size(), 1u);
  // Cut before the two-byte character that straddles the limit, not inside it.
  EXPECT_EQ(w.rows[0].holds[0].who, std::string(127, 'h') + "\u2026");
  EXPECT_DOUBLE_EQ(w.rows[0].holds[0].start, kT0 - 5);  // the lease's taken_at
}

// A lease table whose read failed at one poll: its leases' intervals stay open across that poll,
// one interval each, not closed and opened again.
TEST(Timeline, AFailedLeaseTableReadKeepsItsIntervalsOpen) {
  Timeline t;
  LeaseTableData table;
  table.table = "public.leases";
  table.ok = true;
  LeaseRow row;
  row.name = "nightly-report";
  row.holder = "worker-1";
  row.pid = 4242;
  row.taken_at = kT0 - 5;
  row.expires_at = kT0 + 600;
  table.rows = {row};
  for (int p = 0; p < 3; ++p) {
    PollData d = Poll(kT0 + p, {}, {});
    table.now = d.now;
    table.ok = p != 1;
    table.rows = table.ok ? std::vector<LeaseRow>{row} : std::vector<LeaseRow>{};
    d.leases = {table};
    t.Observe(d, TargetView{}, nullptr);
  }
  const TimelineWindow w = t.Query(60);
  const TimelineRowWindow* lease = FindRow(w, TimelineRowKind::kLease, "nightly-report");
  ASSERT_NE(lease, nullptr);
  ASSERT_EQ(lease->holds.size(), 1u);
  EXPECT_TRUE(lease->holds[0].open);
  EXPECT_DOUBLE_EQ(lease->holds[0].start, kT0 - 5);
  EXPECT_DOUBLE_EQ(lease->holds[0].end, kT0 + 2);
}

// A lease table that stays unreadable: its intervals close kUnreadLeaseTableSeconds after the
// first failed read, at the time they were last seen; they hold no open slot for good.
TEST(Timeline, ALeaseTableThatStaysUnreadableClosesItsIntervals) {
  Timeline t;
  LeaseTableData table;
  table.table = "public.leases";
  LeaseRow row;
  row.name = "nightly-report";
  row.holder = "worker-1";
  row.taken_at = kT0 - 5;
  row.expires_at = kT0 + 6000;
  const auto observe = [&](double now, bool ok) {
    PollData d = Poll(now, {}, {});
    table.now = now;
    table.ok = ok;
    table.rows = ok ? std::vector<LeaseRow>{row} : std::vector<LeaseRow>{};
    d.leases = {table};
    t.Observe(d, TargetView{}, nullptr);
  };
  observe(kT0, true);
  for (int s = 10; s <= kUnreadLeaseTableSeconds; s += 10) observe(kT0 + s, false);
  const TimelineWindow within = t.Query(600);  // FindRow points into it
  const TimelineRowWindow* lease = FindRow(within, TimelineRowKind::kLease, "nightly-report");
  ASSERT_NE(lease, nullptr);
  ASSERT_EQ(lease->holds.size(), 1u);
  EXPECT_TRUE(lease->holds[0].open);                        // still within the grace
  observe(kT0 + 10 + kUnreadLeaseTableSeconds + 1, false);  // past the grace of the first failure
  const TimelineWindow past = t.Query(600);
  lease = FindRow(past, TimelineRowKind::kLease, "nightly-report");
  ASSERT_NE(lease, nullptr);
  ASSERT_EQ(lease->holds.size(), 1u);
  EXPECT_FALSE(lease->holds[0].open);
  EXPECT_DOUBLE_EQ(lease->holds[0].end, kT0);
}

TEST(Timeline, HoldersPastTheOpenBoundAreCountedNotFollowed) {
  Timeline t;
  std::vector<AdvisoryLock> locks;
  for (uint32_t k = 0; k < kOpenIntervals + 1000; ++k) locks.push_back(Granted(k, 7));
  t.Observe(Poll(kT0, locks, {}), TargetView{}, nullptr);
  // A leak of 6,000 held locks leaves kOpenReserved intervals for the waits of that incident.
  t.Observe(Poll(kT0 + 1, locks, {}), AWaitOn("0"), nullptr);
  EXPECT_EQ(t.intervals(), kOpenIntervals - kOpenReserved + 1);
  // The latest poll's, not a sum over polls.
  EXPECT_EQ(t.Query(60).untracked, 1000u + kOpenReserved);
  bool wait_drawn = false;
  for (const TimelineRowWindow& r : t.Query(60).rows) wait_drawn = wait_drawn || !r.waits.empty();
  EXPECT_TRUE(wait_drawn) << "the leak's waiter is drawn";
}

// Polls that see the very locks of the poll before take a shortcut (no lookup a lock): it must
// give what the lookups give. A holder past the bound gets its interval as soon as there is room,
// even when the locks did not change; the others are extended, and closed once let go.
TEST(Timeline, TheSameLocksPollAfterPollGiveWhatALookupALockGives) {
  Timeline t;
  std::vector<AdvisoryLock> locks;
  for (uint32_t k = 0; k < kOpenIntervals - kOpenReserved; ++k) locks.push_back(Granted(k, 7));
  const TargetView waiting = AWaitOn("a lock of its own");
  t.Observe(Poll(kT0, {}, {}), waiting, nullptr);  // the wait takes an open slot first
  t.Observe(Poll(kT0 + 1, locks, {}), waiting, nullptr);
  EXPECT_EQ(t.Query(60).untracked, 1u) << "the last holder found no room";
  t.Observe(Poll(kT0 + 2, locks, {}), TargetView{}, nullptr);  // the wait ends at this poll
  EXPECT_EQ(t.Query(60).untracked, 1u) << "no room yet while the wait was open";
  t.Observe(Poll(kT0 + 3, locks, {}), TargetView{}, nullptr);
  EXPECT_EQ(t.Query(60).untracked, 0u) << "room again: the same locks, and the last one drawn";
  const TimelineWindow w = t.Query(60);
  const TimelineRowWindow* first = FindRow(w, TimelineRowKind::kLock, "0");
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(first->holds.size(), 1u);
  EXPECT_DOUBLE_EQ(first->holds[0].end, kT0 + 3) << "extended by the polls that changed nothing";
  const std::string last = std::to_string(kOpenIntervals - kOpenReserved - 1);
  const TimelineRowWindow* late = FindRow(w, TimelineRowKind::kLock, last);
  ASSERT_NE(late, nullptr);
  ASSERT_EQ(late->holds.size(), 1u);
  EXPECT_DOUBLE_EQ(late->holds[0].start, kT0 + 3);

  locks.erase(locks.begin());  // key 0 let go
  t.Observe(Poll(kT0 + 4, locks, {}), TargetView{}, nullptr);
  t.Observe(Poll(kT0 + 5, locks, {}), TargetView{}, nullptr);
  const TimelineWindow after = t.Query(60);
  const TimelineRowWindow* gone = FindRow(after, TimelineRowKind::kLock, "0");
  ASSERT_NE(gone, nullptr);
  ExpectOneClosedAt(gone->holds, kT0 + 3);
  const TimelineRowWindow* kept = FindRow(after, TimelineRowKind::kLock, "1");
  ASSERT_NE(kept, nullptr);
  EXPECT_DOUBLE_EQ(kept->holds[0].end, kT0 + 5) << "poll 5 saw the locks of poll 4";

  locks.erase(locks.begin());  // key 1 let go right after a poll that changed nothing
  t.Observe(Poll(kT0 + 6, locks, {}), TargetView{}, nullptr);
  const TimelineWindow at6 = t.Query(60);  // kept: the rows point into it
  const TimelineRowWindow* closed = FindRow(at6, TimelineRowKind::kLock, "1");
  ASSERT_NE(closed, nullptr);
  {
    SCOPED_TRACE("closed where the last poll that saw it was");
    ExpectOneClosedAt(closed->holds, kT0 + 5);
  }

  // A wait that ends at a poll that saw the same locks again is closed by it.
  t.Observe(Poll(kT0 + 7, locks, {}), AWaitOn("the last wait"), nullptr);
  t.Observe(Poll(kT0 + 8, locks, {}), TargetView{}, nullptr);
  const TimelineWindow at8 = t.Query(60);
  const TimelineRowWindow* wait = FindRow(at8, TimelineRowKind::kLock, "the last wait");
  ASSERT_NE(wait, nullptr);
  ExpectOneClosedAt(wait->waits, kT0 + 7);
}

// The polls that saw the same locks extend the intervals open then, and no other: not one opened
// after them at a time before theirs (the server's clock stepped back, a failover to a server
// whose clock is behind).
TEST(Timeline, APollThatSawTheSameLocksExtendsOnlyTheIntervalsOpenThen) {
  Timeline t;
  t.Observe(Poll(kT0 + 10, {Granted(1, 7)}, {}), TargetView{}, nullptr);
  t.Observe(Poll(kT0 + 30, {Granted(1, 7)}, {}), TargetView{}, nullptr);  // the same locks
  t.Observe(Poll(kT0 + 20, {Granted(1, 7), Granted(2, 7)}, {}), TargetView{}, nullptr);
  const TimelineWindow w = t.Query(3600);
  const TimelineRowWindow* old = FindRow(w, TimelineRowKind::kLock, "1");
  ASSERT_NE(old, nullptr);
  ASSERT_EQ(old->holds.size(), 1u);
  EXPECT_DOUBLE_EQ(old->holds[0].end, kT0 + 30);
  const TimelineRowWindow* late = FindRow(w, TimelineRowKind::kLock, "2");
  ASSERT_NE(late, nullptr);
  ASSERT_EQ(late->holds.size(), 1u);
  EXPECT_DOUBLE_EQ(late->holds[0].start, kT0 + 20);
  EXPECT_DOUBLE_EQ(late->holds[0].end, kT0 + 20) << "not stretched to the earlier poll's now()";
}

// A thousand keys changing holder every poll for an hour of 1 s polls, each change a hand-over
// event: the history stays within its counts, the oldest dropped first, and its bytes are stated.
TEST(Timeline, AThousandKeysChangingHolderEveryPollForAnHourStayWithinTheBound) {
  constexpr int kKeys = 1000;
  constexpr int kPolls = 3600;
  Timeline t;
  const TargetView view;
  size_t peak = 0;
  double seconds = 0;  // in Observe() and AddMarkers()
  // Two alternating holders per key: the polls' locks and events are built once for each
  // parity, and only their times change from poll to poll.
  PollData polls[2];
  std::vector<Event> handovers[2];
  for (int parity = 0; parity < 2; ++parity) {
    for (int k = 0; k < kKeys; ++k) {
      const int pid = 100000 + parity * kKeys + k;
      polls[parity].locks.push_back(Granted(static_cast<uint32_t>(k), pid));
      polls[parity].sessions.push_back(Client(pid, "report-worker-" + std::to_string(pid)));
      Event e;
      e.kind = EventKind::kLockHandover;
      e.datname = "app";
      e.lock = std::to_string(k);
      e.previous = Who(pid - 1, "report-worker-previous");
      e.current = Who(pid, "report-worker-" + std::to_string(pid));
      handovers[parity].push_back(std::move(e));
    }
  }
  // The heap in use, as glibc counts it (0 under AddressSanitizer, whose allocator it does not
  // see).
  const size_t heap_before = mallinfo2().uordblks;
  for (int p = 0; p < kPolls; ++p) {
    PollData& d = polls[p % 2];
    d.now = kT0 + p;
    std::vector<Event>& events = handovers[p % 2];
    for (Event& e : events) e.time = d.now;
    const auto started = std::chrono::steady_clock::now();
    t.AddMarkers(events);
    t.Observe(d, view, nullptr);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ASSERT_LE(t.intervals(), kOpenIntervals + kClosedIntervals);
    ASSERT_LE(t.markers(), kMarkersPerKind);
    if (p % 600 == 599) peak = std::max(peak, t.ApproxBytes());
  }
  const size_t heap_after = mallinfo2().uordblks;
  const double heap = static_cast<double>(heap_after > heap_before ? heap_after - heap_before : 0);
  const TimelineWindow w = t.Query(3600);
  // The newest are kept: the last poll's holders, open, and the closed intervals before them.
  EXPECT_EQ(w.rows.size(), static_cast<size_t>(kKeys));
  EXPECT_DOUBLE_EQ(w.now, kT0 + kPolls - 1);
  EXPECT_EQ(w.dropped_intervals, static_cast<uint64_t>(kKeys) * (kPolls - 1) - kClosedIntervals);
  EXPECT_GT(w.kept_since, kT0 + kPolls - 1 - 30);  // 20,000 closed: the last 20 polls
  EXPECT_DOUBLE_EQ(w.from, w.kept_since);
  size_t open = 0;
  for (const auto& r : w.rows) {
    for (const auto& i : r.holds) open += i.open ? 1 : 0;
  }
  EXPECT_EQ(open, static_cast<size_t>(kKeys));
  EXPECT_GT(w.dropped_markers, 0u);
  EXPECT_EQ(w.untracked, 0u);
  std::printf(
      "timeline at %d keys x %d polls: %zu intervals, %zu markers, %.1f MB counted (peak %.1f MB), "
      "%.1f MB of heap in use; %.2f ms per poll in the timeline\n",
      kKeys, kPolls, t.intervals(), t.markers(), t.ApproxBytes() / 1e6, peak / 1e6, heap / 1e6,
      seconds * 1000 / kPolls);
  EXPECT_LT(heap, 8e6);
  // The stated bound: 5,000 open and 20,000 closed intervals and 300 markers per kind.
  EXPECT_LT(t.ApproxBytes(), 8u * 1000 * 1000);
}

}  // namespace
}  // namespace pglock
