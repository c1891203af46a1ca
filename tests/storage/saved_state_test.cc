// The state file's encoding (exporter/storage/saved_state.h): what is written is what is read
// back (the episodes in progress, the lease tables and the timeline too, and through the very
// classes that keep them), a file without those sections is read with none, and any damage (every
// truncation, flipped bytes, another version or format, too large) is an error that leaves nothing
// half-read. The poller's use of it is in tests/integration/restart_state_test.cc.
#include "exporter/storage/saved_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/events/events.h"
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
  e.previous = Identity{4242, "runner", "", "", "", ""};
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

  EpisodeTrackerSaved episodes;
  SavedEpisode ep;
  ep.pid = 4242;
  ep.backend_start = session.backend_start;
  ep.episode.state = EpisodeState::kEnding;
  ep.episode.root.id.pid = 4242;
  ep.episode.root.id.application_name = "runner";
  ep.episode.root.datname = "app";
  ep.episode.root.state_seconds = 12.5;
  ep.episode.started = 1796399900;
  ep.episode.peak_blocked = 3;
  ep.episode.longest_wait = 42.5;
  ep.episode.lock = "nightly-report";
  ep.episode.last_seen = session;
  ep.episode.last_seen_at = 1796399999.5;
  ep.episode.counters_end = HoldEnd::kTerminated;
  ep.episode.share =
      AbandonedShare{5, "app", 1796399990, 1796399999.5, true, 1, {{4242, 1796300000}}};
  episodes.episodes.push_back(ep);
  SavedEpisode prepared;
  prepared.gid = "tx-1";
  prepared.episode.root.gid = "tx-1";
  prepared.episode.party_since = 1796399000;
  episodes.episodes.push_back(prepared);
  episodes.last_stats = {{5, "app", 1, 2, 3, 4}};
  episodes.postmaster_start = 1796000000;
  episodes.cycles = {{12, 13}};
  s.episodes = episodes;

  LeaseTransitions::Saved leases;
  LeaseTransitions::LeaseTableState& table = leases.tables["public.leases"];
  table.leases["sweep"].row = {"sweep", "worker-1", 1796399000, 1796400100, true, 77, 901};
  table.leases["sweep"].state = LeaseState::kGivenBack;
  table.complete = true;
  table.next_seq = 7;
  table.marks = {{5, 1796399990, TableWrites{10, 2}, {1, 0}}, {6, 1796399999.5, std::nullopt, {}}};
  table.pending = {{"sweep", 5, 6, "worker-0", "worker-1"}};
  table.gone = {"old-job"};
  table.new_names = 3;
  table.returned = 1;
  leases.detected = {"public.jobs"};
  leases.seeded_names = {{"public.leases", 1}};
  s.leases = leases;

  TimelineSaved timeline;
  timeline.now = 1796399999.5;
  timeline.first_poll = 1796390000;
  timeline.dropped_intervals = 2;
  timeline.dropped_markers = 1;
  timeline.gaps = {{1796391000, 1796391060}};
  const auto lock_row = std::make_shared<const TimelineRow>(
      TimelineRow{TimelineRowKind::kLock, "app", "nightly-report"});
  const auto root_row =
      std::make_shared<const TimelineRow>(TimelineRow{TimelineRowKind::kRoot, "app", "pid 4242"});
  TimelineSavedOpen open;
  open.datid = 5;
  open.classid = 0xFFFFFFFF;
  open.objid = 7;
  open.objsubid = 2;
  open.pid = 4242;
  open.backend_start = session.backend_start;
  open.interval = {.row = lock_row,
                   .start = 1796390000,
                   .end = 1796399999.5,
                   .who = "réport\nrunner",
                   .detail = {},
                   .pid = 4242,
                   .open = true};
  timeline.open.push_back(open);
  TimelineSavedOpen waiting;
  waiting.key_kind = TimelineRowKind::kRoot;
  waiting.pid = 4343;
  waiting.wait = true;
  waiting.text =
      "app\x1f\x1f"
      "4242";
  waiting.interval = {.row = root_row,
                      .start = 1796399000,
                      .end = 1796399999.5,
                      .who = "waiter",
                      .detail = {},
                      .pid = 4343,
                      .wait = true,
                      .open = true};
  waiting.interval.blocker_pid = 4242;
  timeline.open.push_back(waiting);
  timeline.closed.push_back({.row = lock_row,
                             .start = 1796380000,
                             .end = 1796389000,
                             .who = "old",
                             .detail = {},
                             .pid = 4141});
  TimelineMarker marker;
  marker.row = lock_row;
  marker.time = 1796389000;
  marker.cause = CauseOf(HoldEnd::kTerminated);
  marker.evidence = EndEvidence::kLog;
  marker.previous_pid = 4141;
  marker.previous = "old";
  marker.event_kind = EventKind::kLockLost;
  marker.event_time = 1796389000;
  timeline.markers.push_back(marker);
  s.timeline = timeline;
  return s;
}

// The file as written before the episodes, the lease tables and the timeline were kept.
std::string OlderFile() {
  SavedTarget s = Sample();
  s.episodes.reset();
  s.leases.reset();
  s.timeline.reset();
  return EncodeSavedTarget(s);
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

  ASSERT_TRUE(r.episodes.has_value());
  ASSERT_EQ(r.episodes->episodes.size(), 2u);
  const SavedEpisode& ep = r.episodes->episodes[0];
  EXPECT_EQ(ep.pid, 4242);
  EXPECT_EQ(ep.backend_start, 1796300000.125);
  EXPECT_EQ(ep.episode.state, EpisodeState::kEnding);
  EXPECT_EQ(ep.episode.root.id.application_name, "runner");
  EXPECT_EQ(ep.episode.root.state_seconds, 12.5);
  EXPECT_EQ(ep.episode.started, 1796399900);
  EXPECT_EQ(ep.episode.peak_blocked, 3);
  EXPECT_EQ(ep.episode.longest_wait, 42.5);
  EXPECT_EQ(ep.episode.lock, "nightly-report");
  ASSERT_TRUE(ep.episode.last_seen.has_value());
  EXPECT_EQ(ep.episode.last_seen->application_name, "réport\nrunner");
  EXPECT_EQ(ep.episode.counters_end, HoldEnd::kTerminated);
  ASSERT_TRUE(ep.episode.share.has_value());
  EXPECT_EQ(ep.episode.share->gone, (std::vector<SessionId>{{4242, 1796300000}}));
  EXPECT_EQ(r.episodes->episodes[1].gid, "tx-1");
  EXPECT_EQ(r.episodes->episodes[1].episode.party_since, 1796399000);
  EXPECT_FALSE(r.episodes->episodes[1].episode.last_seen.has_value());
  EXPECT_EQ(r.episodes->last_stats[0].deadlocks, 4);
  EXPECT_EQ(r.episodes->postmaster_start, 1796000000);
  EXPECT_EQ(r.episodes->cycles, (std::vector<std::vector<int>>{{12, 13}}));

  ASSERT_TRUE(r.leases.has_value());
  const LeaseTransitions::LeaseTableState& table = r.leases->tables.at("public.leases");
  const LeaseTransitions::LeaseSeen& sweep = table.leases.at("sweep");
  EXPECT_EQ(sweep.row.holder, "worker-1");
  EXPECT_EQ(sweep.row.expires_at, 1796400100);
  EXPECT_TRUE(sweep.row.row_locked);
  EXPECT_EQ(sweep.row.xid, 901u);
  EXPECT_EQ(sweep.state, LeaseState::kGivenBack);
  EXPECT_EQ(table.next_seq, 7u);
  ASSERT_EQ(table.marks.size(), 2u);
  EXPECT_EQ(table.marks[0].writes->deleted, 2);
  EXPECT_FALSE(table.marks[1].writes.has_value());
  ASSERT_EQ(table.pending.size(), 1u);
  EXPECT_EQ(table.pending[0].previous_holder, "worker-0");
  EXPECT_EQ(table.gone.count("old-job"), 1u);
  EXPECT_EQ(r.leases->detected.count("public.jobs"), 1u);
  EXPECT_EQ(r.leases->seeded_names.at("public.leases"), 1u);

  ASSERT_TRUE(r.timeline.has_value());
  EXPECT_EQ(r.timeline->first_poll, 1796390000);
  EXPECT_EQ(r.timeline->dropped_intervals, 2u);
  ASSERT_EQ(r.timeline->gaps.size(), 1u);
  EXPECT_EQ(r.timeline->gaps[0].to, 1796391060);
  ASSERT_EQ(r.timeline->open.size(), 2u);
  const TimelineSavedOpen& open = r.timeline->open[0];
  EXPECT_EQ(open.classid, 0xFFFFFFFFu);
  EXPECT_EQ(open.objsubid, 2);
  EXPECT_EQ(open.backend_start, 1796300000.125);
  EXPECT_EQ(open.interval.row->name, "nightly-report");
  EXPECT_EQ(open.interval.who, "réport\nrunner");
  EXPECT_EQ(r.timeline->open[1].text,
            "app\x1f\x1f"
            "4242");
  EXPECT_EQ(r.timeline->open[1].interval.row->kind, TimelineRowKind::kRoot);
  EXPECT_EQ(r.timeline->open[1].interval.blocker_pid, 4242);
  ASSERT_EQ(r.timeline->closed.size(), 1u);
  // One row object per row: the closed interval and the marker share the open one's.
  EXPECT_EQ(r.timeline->closed[0].row, open.interval.row);
  ASSERT_EQ(r.timeline->markers.size(), 1u);
  EXPECT_EQ(r.timeline->markers[0].evidence, EndEvidence::kLog);
  EXPECT_EQ(r.timeline->markers[0].row, open.interval.row);
  // Written again, the same bytes.
  EXPECT_EQ(EncodeSavedTarget(r), bytes);
}

// Through the classes that keep them: what a timeline, a blocking episode tracker and a lease
// tracker save is, written, read back and restored, what they save again.
TEST(SavedState, WhatTheTimelineAndTheTrackersSaveIsWhatTheyRestore) {
  PollData poll;
  poll.now = 1796399990;
  poll.postmaster_start = 1796000000;
  Session root;
  root.pid = 4242;
  root.datname = "app";
  root.backend_start = 1796300000.125;
  root.application_name = "runner";
  poll.sessions = {root};
  AdvisoryLock lock;
  lock.key = {5, 0, 7, 1};
  lock.pid = 4242;
  poll.locks = {lock};
  poll.database_stats = std::vector<DatabaseStats>{{5, "app", 0, 1, 0, 0}};
  LeaseTableData table;
  table.table = "public.leases";
  table.ok = true;
  table.rows = {{"sweep", "worker-1", 1796399000, 1796400100}};
  table.total = 1;
  table.now = poll.now;
  table.writes = TableWrites{3, 1};
  poll.leases = {table};
  TargetView view;
  BlockingRoot blocking;
  blocking.root.id.pid = 4242;
  blocking.root.datname = "app";
  blocking.blocked_pids = {4343};
  view.all_blocking_roots = {blocking};

  Timeline timeline;
  BlockingEpisodeTracker episodes;
  EventTracker events;
  Counters counters;
  for (double now : {1796399990.0, 1796399995.0}) {
    poll.now = now;
    timeline.Observe(poll, view, nullptr);
    episodes.Observe(poll, view, &counters, nullptr);
    events.Observe(std::make_shared<PollData>(poll), nullptr, nullptr, &counters, nullptr);
  }
  Event lost;
  lost.time = 1796399991;
  lost.kind = EventKind::kLockLost;
  lost.datname = "app";
  lost.lock = "9";
  timeline.AddMarkers({lost});

  SavedTarget s = Sample();
  s.timeline = timeline.Save();
  s.episodes = episodes.Save();
  s.leases = events.SaveLeases();
  ASSERT_EQ(s.timeline->open.size(), 4u);  // the hold, the root, its waiter, the lease
  ASSERT_EQ(s.timeline->markers.size(), 1u);
  ASSERT_EQ(s.episodes->episodes.size(), 1u);
  ASSERT_EQ(s.leases->tables.size(), 1u);
  const std::string bytes = EncodeSavedTarget(s);
  SavedTarget r;
  const Status status = DecodeSavedTarget(bytes, &r);
  ASSERT_TRUE(status.ok()) << status.message();
  Timeline timeline_again;
  BlockingEpisodeTracker episodes_again;
  EventTracker events_again;
  timeline_again.Restore(*r.timeline);
  episodes_again.Restore(*r.episodes);
  events_again.RestoreLeases(*r.leases);
  EXPECT_EQ(episodes_again.open(), 1u);
  SavedTarget again = Sample();
  again.timeline = timeline_again.Save();
  again.episodes = episodes_again.Save();
  again.leases = events_again.SaveLeases();
  EXPECT_EQ(EncodeSavedTarget(again), bytes);
}

// A file written before the episodes, the lease tables and the timeline were kept has none of
// them: read, with none (they start afresh, as they did then).
TEST(SavedState, AnOlderFileWithoutEpisodesLeasesOrTimelineIsRead) {
  const std::string bytes = OlderFile();
  for (const char* key : {"\"episodes\"", "\"leases\"", "\"timeline\""}) {
    ASSERT_EQ(bytes.find(key), std::string::npos) << key;
  }
  SavedTarget r;
  const Status status = DecodeSavedTarget(bytes, &r);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_FALSE(r.episodes.has_value());
  EXPECT_FALSE(r.leases.has_value());
  EXPECT_FALSE(r.timeline.has_value());
  EXPECT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.pooled.size(), 1u);
}

// Damage inside the new sections is an error for the whole file (a fresh start, one log line at
// the poller), never a crash, never a part of it read.
TEST(SavedState, DamagedEpisodesLeasesOrTimelineAreRefusedWithAReason) {
  const std::string bytes = EncodeSavedTarget(Sample());
  const std::vector<std::tuple<std::string, std::string, std::string>> damage = {
      {"\"counters_end\":\"terminated\"", "\"counters_end\":\"bored\"", "counters_end"},
      {"\"root_key\":[4242,", "\"root_key\":[4242.5,", "episode pid"},
      {"[\"sweep\",5,6,", "[\"sweep\",4,6,", "no such read"},
      {"[[5,1796399990,", "[[9,1796399990,", "out of order"},
      {"\"rows\":[[\"lock\"", "\"rows\":[[\"lodge\"", "row kind"},
      {"\"closed\":[[0,", "\"closed\":[[2,", "timeline row"},
      {"\"markers\":[[0,1796389000,\"lock_lost\",\"terminated\",\"log\"",
       "\"markers\":[[0,1796389000,\"lock_lost\",\"terminated\",\"logs\"", "marker evidence"},
      {"[0,1796389000,\"lock_lost\"", "[0,1796389000,\"lock_lots\"", "marker kind"},
      {"\"lock_lost\",\"terminated\",\"log\"", "\"lock_lost\",\"bored\",\"log\"", "marker cause"},
      {"\"timeline\":{\"now\":", "\"timeline\":{\"then\":", "missing \"now\""},
      {"\"leases\":{\"tables\":[", "\"leases\":{\"tablez\":[", "missing \"tables\""},
  };
  for (const auto& [from, to, why] : damage) {
    std::string damaged = bytes;
    const size_t at = damaged.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    damaged.replace(at, from.size(), to);
    SavedTarget r;
    const Status s = DecodeSavedTarget(damaged, &r);
    EXPECT_NE(s.message().find(why), std::string::npos) << to << ": " << s.message();
    EXPECT_TRUE(r.target.empty() && !r.inventory && !r.timeline && !r.episodes && !r.leases) << to;
  }
}

// A timeline past its room in the file (here texts that escape to six bytes a byte) leaves its
// oldest closed intervals out, counted as dropped: the file stays one that the next start reads.
TEST(SavedState, ATimelineTooLargeForTheFileLosesItsOldestHistoryFirst) {
  SavedTarget s = Sample();
  const std::string escaped(kTimelineTextBytes, '\x01');
  TimelineSaved& t = *s.timeline;
  for (int i = 0; i < 6000; ++i) {
    auto row = std::make_shared<const TimelineRow>(
        TimelineRow{TimelineRowKind::kLock, escaped, escaped + std::to_string(i)});
    t.closed.push_back({.row = row,
                        .start = 1796380000.0 + i,
                        .end = 1796380000.5 + i,
                        .who = escaped,
                        .detail = escaped,
                        .pid = i});
  }
  const std::string bytes = EncodeSavedTarget(s);
  EXPECT_LE(bytes.size(), kMaxSavedTimelineBytes + EncodeSavedTarget(Sample()).size());
  SavedTarget r;
  const Status status = DecodeSavedTarget(bytes, &r);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(r.timeline.has_value());
  ASSERT_FALSE(r.timeline->closed.empty());
  const size_t left_out = t.closed.size() - r.timeline->closed.size();
  EXPECT_GT(left_out, 0u);
  EXPECT_EQ(r.timeline->dropped_intervals, t.dropped_intervals + left_out);
  EXPECT_EQ(r.timeline->closed.back().pid, 5999) << "the newest are kept";
  EXPECT_EQ(r.timeline->open.size(), 2u);
  EXPECT_EQ(r.timeline->markers.size(), 1u);
}

// Every marker of every kind is written, in order; past the file's bound each kind keeps its
// newest.
TEST(SavedState, EveryMarkerIsWrittenAndPastTheBoundTheNewestOfEachKind) {
  SavedTarget s = Sample();
  TimelineSaved& t = *s.timeline;
  const TimelineMarker lost = t.markers[0];
  for (int i = 1; i <= 299; ++i) {
    TimelineMarker m = lost;
    m.time = lost.time + i;
    m.previous_pid = 5000 + i;
    t.markers.push_back(m);
  }
  for (int i = 0; i < 5; ++i) {
    TimelineMarker m;
    m.row = lost.row;
    m.time = 1796389500.0 + i;
    m.moment = MarkerMoment::kLeaseExpiry;
    t.markers.push_back(m);
  }
  SavedTarget r;
  Status status = DecodeSavedTarget(EncodeSavedTarget(s), &r);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(r.timeline->markers.size(), 305u);
  EXPECT_EQ(r.timeline->dropped_markers, t.dropped_markers);
  for (size_t i = 0; i < 305; ++i) {
    EXPECT_EQ(r.timeline->markers[i].time, t.markers[i].time) << i;
    EXPECT_EQ(r.timeline->markers[i].moment, t.markers[i].moment) << i;
  }

  // Markers too many for the file: each kind keeps its newest (half the ring, then less).
  const std::string escaped(kTimelineTextBytes, '\x01');
  t.markers.resize(1);
  t.markers[0].previous = escaped;
  t.markers[0].current = escaped;
  for (int i = 1; i < 15000; ++i) {
    TimelineMarker m = t.markers[0];
    m.time = lost.time + i;
    t.markers.push_back(m);
  }
  TimelineMarker expiry;
  expiry.row = lost.row;
  expiry.time = 1796389500;
  expiry.moment = MarkerMoment::kLeaseExpiry;
  t.markers.push_back(expiry);
  status = DecodeSavedTarget(EncodeSavedTarget(s), &r);
  ASSERT_TRUE(status.ok()) << status.message();
  const std::vector<TimelineMarker>& m = r.timeline->markers;
  ASSERT_EQ(m.size(), kMarkersPerKind / 2 + 1);
  EXPECT_EQ(m[kMarkersPerKind / 2 - 1].time, lost.time + 14999) << "the newest are kept";
  EXPECT_EQ(m[0].time, lost.time + 15000 - kMarkersPerKind / 2);
  EXPECT_EQ(m.back().moment, MarkerMoment::kLeaseExpiry);
  EXPECT_EQ(r.timeline->dropped_markers, t.dropped_markers + 15000 - kMarkersPerKind / 2);
}

// Markers as the file has always written them (their kinds and causes as words, the event's kind
// apart, "" for a lease's expiry) are read as the typed moments and events, and written again the
// same.
TEST(SavedState, MarkerKindsReadAsWrittenBefore) {
  const std::string bytes = EncodeSavedTarget(Sample());
  const std::string from =
      "\"markers\":[[0,1796389000,\"lock_lost\",\"terminated\",\"log\",\"\",0,1,4141,\"old\",0,"
      "\"\",\"lock_lost\",1796389000]]";
  const std::string to =
      "\"markers\":[[0,1796389000,\"lock_lost\",\"terminated\",\"log\",\"\",0,1,4141,\"old\",0,"
      "\"\",\"lock_lost\",1796389000],"
      "[0,1796389001,\"lease_expiry\",\"\",\"\",\"\",0,1,4141,\"old\",0,\"\",\"\",0],"
      "[0,1796389002,\"blocking_episode_start\",\"connection_lost\",\"counters\",\"root_ended\","
      "3,1,4141,\"old\",0,\"\",\"blocking_episode\",1796389005],"
      "[0,1796389005,\"blocking_episode_end\",\"connection_lost\",\"counters\",\"root_ended\","
      "3,1,4141,\"old\",0,\"\",\"blocking_episode\",1796389005]]";
  std::string old = bytes;
  const size_t at = old.find(from);
  ASSERT_NE(at, std::string::npos) << bytes;
  old.replace(at, from.size(), to);
  SavedTarget r;
  const Status status = DecodeSavedTarget(old, &r);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(r.timeline.has_value());
  const std::vector<TimelineMarker>& m = r.timeline->markers;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].moment, MarkerMoment::kEvent);
  EXPECT_EQ(m[0].event_kind, EventKind::kLockLost);
  EXPECT_EQ(m[0].cause, CauseOf(HoldEnd::kTerminated));
  EXPECT_EQ(m[1].moment, MarkerMoment::kLeaseExpiry);
  EXPECT_FALSE(m[1].event_kind.has_value());
  EXPECT_EQ(m[2].moment, MarkerMoment::kEpisodeStart);
  EXPECT_EQ(m[3].moment, MarkerMoment::kEpisodeEnd);
  EXPECT_EQ(m[3].event_kind, EventKind::kBlockingEpisode);
  EXPECT_EQ(m[3].cause, CauseOf(HoldEnd::kConnectionLost));
  EXPECT_EQ(m[3].outcome, EventOutcome::kRootEnded);
  EXPECT_EQ(EncodeSavedTarget(r), old);
}

// A file written before pooled locks were kept has no "pooled": read, with none.
TEST(SavedState, AFileWithoutPooledLocksIsReadWithNone) {
  std::string bytes = OlderFile();
  const size_t at = bytes.find(",\"pooled\":[");
  ASSERT_NE(at, std::string::npos);
  bytes.erase(at, bytes.rfind(']') + 1 - at);
  SavedTarget r;
  const Status status = DecodeSavedTarget(bytes, &r);
  ASSERT_TRUE(status.ok()) << status.message() << "\n" << bytes.substr(bytes.size() - 80);
  EXPECT_TRUE(r.pooled.empty());
  EXPECT_EQ(r.events.size(), 1u);
}

// A counter added after a file was written is not in it: it starts at 0, and the rest of the
// state (the other counters, the events) is read.
TEST(SavedState, AFileWithoutACounterReadsItAsZero) {
  std::string bytes = EncodeSavedTarget(Sample());
  const std::string key = "\"deadlocks\":";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos) << bytes;
  // The key and its array (nested arrays inside), with the comma that joins it to the next key.
  size_t end = at + key.size();
  int depth = 0;
  do {
    if (bytes[end] == '[') ++depth;
    if (bytes[end] == ']') --depth;
    ++end;
  } while (depth > 0 && end < bytes.size());
  if (end < bytes.size() && bytes[end] == ',') ++end;
  bytes.erase(at, end - at);
  ASSERT_EQ(bytes.find(key), std::string::npos);
  SavedTarget r;
  const Status status = DecodeSavedTarget(bytes, &r);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(r.counters.deadlocks.empty());
  EXPECT_EQ((r.counters.losses[{"app", "nightly-report", "terminated"}]), 3);
  EXPECT_FALSE(r.events.empty());
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

std::vector<std::shared_ptr<const Event>> JournalEvents() {
  std::vector<std::shared_ptr<const Event>> out;
  for (int i = 0; i < 3; ++i) {
    Event e = Sample().events.at(0);
    e.time += i;
    e.lock = "job \"" + std::to_string(i) + "\"\nnext";
    e.previous.pid = 100 + i;
    out.push_back(std::make_shared<const Event>(std::move(e)));
  }
  return out;
}

TEST(EventJournal, TheLinesReadBackTheEventsInOrder) {
  const auto events = JournalEvents();
  const std::string bytes = EncodeEventLines(events);
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), '\n'), 3);
  const JournalRead all = DecodeEventLines(bytes, 3);
  EXPECT_EQ(all.lines, 3u);
  EXPECT_EQ(all.damaged, 0u);
  ASSERT_EQ(all.events.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(EventJson(all.events[i]), EventJson(*events[i])) << i;
  }
  // Only the lines the state names: those appended after it (before a crash) are not read.
  const JournalRead two = DecodeEventLines(bytes, 2);
  EXPECT_EQ(two.lines, 2u);
  ASSERT_EQ(two.events.size(), 2u);
  EXPECT_EQ(two.events[1].previous.pid, 101);
  EXPECT_TRUE(DecodeEventLines(bytes, 0).events.empty());
}

TEST(EventJournal, ATornLastLineIsNotReadAndADamagedLineIsSkippedAlone) {
  const std::string bytes = EncodeEventLines(JournalEvents());
  // Cut inside the third line: two lines, though the state named four.
  const JournalRead torn = DecodeEventLines(bytes.substr(0, bytes.size() - 10), 4);
  EXPECT_EQ(torn.lines, 2u);
  EXPECT_EQ(torn.events.size(), 2u);
  EXPECT_EQ(torn.damaged, 0u);
  // The second line damaged: it alone is lost, and said.
  const size_t second = bytes.find('\n') + 1;
  std::string damaged = bytes;
  damaged.replace(second, 9, "{\"tim\":1,");
  const JournalRead read = DecodeEventLines(damaged, 3);
  EXPECT_EQ(read.lines, 3u);
  EXPECT_EQ(read.damaged, 1u);
  ASSERT_EQ(read.events.size(), 2u);
  EXPECT_EQ(read.events[0].previous.pid, 100);
  EXPECT_EQ(read.events[1].previous.pid, 102);
  EXPECT_EQ(read.first_damage.rfind("line 2: ", 0), 0u) << read.first_damage;
  // Anything at all: an answer, never a crash.
  for (const std::string& junk :
       {std::string("\n\n\n"), std::string("\x00\xff{[\n", 5), std::string("[]\n{}\n\"x\"\n")}) {
    const JournalRead r = DecodeEventLines(junk, 10);
    EXPECT_TRUE(r.events.empty());
    EXPECT_EQ(r.damaged, r.lines);
  }
}

TEST(EventJournal, TheStateNamesItsJournalAndAnOlderFileHasNone) {
  SavedTarget s = Sample();
  s.events.clear();
  s.journal = SavedJournal{7, 12345678901234ull};
  SavedTarget r;
  ASSERT_TRUE(DecodeSavedTarget(EncodeSavedTarget(s), &r).ok());
  ASSERT_TRUE(r.journal.has_value());
  EXPECT_EQ(r.journal->generation, 7u);
  EXPECT_EQ(r.journal->lines, 12345678901234ull);
  EXPECT_TRUE(r.events.empty());
  SavedTarget older;
  ASSERT_TRUE(DecodeSavedTarget(OlderFile(), &older).ok());
  EXPECT_FALSE(older.journal.has_value());
  EXPECT_EQ(older.events.size(), 1u);
}

TEST(EventJournal, TheTimelinesClosedIntervalsReadBackWithTheirRows) {
  std::vector<TimelineInterval> closed;
  for (int i = 0; i < 3; ++i) {
    TimelineInterval v;
    v.row = std::make_shared<const TimelineRow>(
        TimelineRow{i == 1 ? TimelineRowKind::kLease : TimelineRowKind::kLock, "app",
                    "job \"" + std::to_string(i) + "\""});
    v.wait = i == 2;
    v.start = 1796390000.25 + i;
    v.end = v.start + 0.5;
    v.expired = i == 1;
    v.pid = 100 + i;
    v.who = "réport\nrunner";
    v.detail = "ExclusiveLock";
    v.blocker_pid = i;
    closed.push_back(v);
  }
  TimelineInterval no_row;  // never written
  closed.push_back(no_row);
  size_t written = 0;
  const std::string bytes = EncodeIntervalLines(closed, &written);
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), '\n'), 3);
  EXPECT_EQ(written, 3u);  // the journal counts the lines written, not the intervals given
  const IntervalJournalRead read = DecodeIntervalLines(bytes, 3);
  EXPECT_EQ(read.damaged, 0u);
  ASSERT_EQ(read.intervals.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const TimelineInterval& a = closed[i];
    const TimelineInterval& b = read.intervals[i];
    EXPECT_EQ(b.row->kind, a.row->kind) << i;
    EXPECT_EQ(b.row->name, a.row->name) << i;
    EXPECT_EQ(std::tie(b.wait, b.start, b.end, b.expired, b.pid, b.who, b.detail, b.blocker_pid),
              std::tie(a.wait, a.start, a.end, a.expired, a.pid, a.who, a.detail, a.blocker_pid))
        << i;
  }
  std::string damaged = bytes;
  damaged.replace(bytes.find('\n') + 2, 4, "xxxx");  // the second line's row kind
  const IntervalJournalRead d = DecodeIntervalLines(damaged, 3);
  EXPECT_EQ(d.damaged, 1u);
  EXPECT_EQ(d.intervals.size(), 2u);
  EXPECT_EQ(d.first_damage.rfind("line 2: ", 0), 0u) << d.first_damage;
  SavedTarget s = Sample();
  s.timeline_journal = SavedJournal{3, 3};
  SavedTarget r;
  ASSERT_TRUE(DecodeSavedTarget(EncodeSavedTarget(s), &r).ok());
  ASSERT_TRUE(r.timeline_journal.has_value());
  EXPECT_EQ(r.timeline_journal->generation, 3u);
  EXPECT_FALSE(r.journal.has_value());
}

TEST(EventJournal, TheTimelinesMarkersReadBackWithTheirRows) {
  std::vector<TimelineMarker> markers;
  for (int i = 0; i < 4; ++i) {
    TimelineMarker m;
    m.row = std::make_shared<const TimelineRow>(
        TimelineRow{i == 1 ? TimelineRowKind::kLease : TimelineRowKind::kRoot, "app",
                    "pid \"" + std::to_string(i) + "\""});
    m.time = 1796390000.25 + i;
    m.moment = i == 1 ? MarkerMoment::kLeaseExpiry
                      : (i == 2 ? MarkerMoment::kEpisodeStart : MarkerMoment::kEvent);
    if (i != 1) m.event_kind = i == 2 ? EventKind::kBlockingEpisode : EventKind::kLockLost;
    m.event_time = m.time + 1;
    m.cause = i == 0 ? CauseOf(HoldEnd::kTerminated) : EventCause::kNone;
    m.evidence = i == 0 ? EndEvidence::kLog : EndEvidence::kNone;
    m.outcome = i == 2 ? EventOutcome::kReleased : EventOutcome::kNone;
    m.duration = 0.5 * i;
    m.count = 1 + i;
    m.previous_pid = 100 + i;
    m.previous = "réport\nrunner";
    m.current_pid = 200 + i;
    m.current = "worker-" + std::to_string(i);
    markers.push_back(m);
  }
  markers.push_back(TimelineMarker{});  // no row: never written
  size_t written = 0;
  const std::string bytes = EncodeMarkerLines(markers, &written);
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), '\n'), 4);
  EXPECT_EQ(written, 4u);
  const MarkerJournalRead read = DecodeMarkerLines(bytes, 4);
  EXPECT_EQ(read.damaged, 0u);
  ASSERT_EQ(read.markers.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const TimelineMarker& a = markers[i];
    const TimelineMarker& b = read.markers[i];
    EXPECT_EQ(b.row->Tie(), a.row->Tie()) << i;
    EXPECT_EQ(std::tie(b.time, b.moment, b.event_kind, b.event_time, b.cause, b.evidence, b.outcome,
                       b.duration, b.count, b.previous_pid, b.previous, b.current_pid, b.current),
              std::tie(a.time, a.moment, a.event_kind, a.event_time, a.cause, a.evidence, a.outcome,
                       a.duration, a.count, a.previous_pid, a.previous, a.current_pid, a.current))
        << i;
  }
  std::string damaged = bytes;
  damaged.replace(bytes.find('\n') + 2, 4, "xxxx");  // the second line's row kind
  const MarkerJournalRead d = DecodeMarkerLines(damaged, 4);
  EXPECT_EQ(d.damaged, 1u);
  EXPECT_EQ(d.markers.size(), 3u);
  EXPECT_EQ(d.first_damage.rfind("line 2: ", 0), 0u) << d.first_damage;
  // A kind a later version wrote and this one does not know: that line alone.
  std::string later = bytes;
  later.replace(later.find("\"lease_expiry\""), 14, "\"lease_expiry_v9\"");
  const MarkerJournalRead k = DecodeMarkerLines(later, 4);
  EXPECT_EQ(k.damaged, 1u);
  EXPECT_EQ(k.markers.size(), 3u);
  EXPECT_NE(k.first_damage.find("lease_expiry_v9"), std::string::npos) << k.first_damage;
  SavedTarget s = Sample();
  s.marker_journal = SavedJournal{4, 4};
  SavedTarget r;
  ASSERT_TRUE(DecodeSavedTarget(EncodeSavedTarget(s), &r).ok());
  ASSERT_TRUE(r.marker_journal.has_value());
  EXPECT_EQ(r.marker_journal->generation, 4u);
  EXPECT_EQ(r.marker_journal->lines, 4u);
  EXPECT_FALSE(r.timeline_journal.has_value());
}

TEST(EventJournal, ItIsRewrittenPastTwiceWhatTheLogKeeps) {
  EXPECT_FALSE(JournalWantsRewrite(0, 0, 0));
  EXPECT_FALSE(JournalWantsRewrite(2000, 256, 1000));
  EXPECT_TRUE(JournalWantsRewrite(2000, 257, 1000));
  EXPECT_TRUE(JournalWantsRewrite(300, 0, 10));
}

TEST(StateStore, FileNamesAreSafeForAnyTargetName) {
  EXPECT_EQ(EventJournalPath("/var/lib/x", "a.b", 3), "/var/lib/x/a%2Eb.events.3.jsonl");
  EXPECT_EQ(TimelineJournalPath("/var/lib/x", "a", 4), "/var/lib/x/a.timeline.4.jsonl");
  EXPECT_EQ(StateFilePath("/var/lib/x", "orders-db_1"), "/var/lib/x/orders-db_1.state.json");
  EXPECT_EQ(StateFilePath("/var/lib/x/", "../etc/passwd"),
            "/var/lib/x/%2E%2E%2Fetc%2Fpasswd.state.json");
  EXPECT_EQ(StateFilePath("d", "a b"), "d/a%20b.state.json");
}

// A file written in parts is the parts in order; a body that gives up leaves the file it would
// have replaced as it was, and no temporary file.
TEST(StateStore, AFileWrittenInPartsIsAllOrNothing) {
  char dir_template[] = "/tmp/pglock-state-store-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string path = dir + "/journal.jsonl";
  ASSERT_TRUE(WriteFileAtomically(path, "old\n").ok());
  const Status given_up =
      WriteFileAtomically(path, [](const WritePart& write) { return write("a\n") && false; });
  EXPECT_FALSE(given_up.ok());
  std::string bytes;
  bool missing = false;
  ASSERT_TRUE(ReadWholeFile(path, 1 << 20, &bytes, &missing).ok());
  EXPECT_EQ(bytes, "old\n");
  ASSERT_TRUE(ReadWholeFile(path + ".tmp", 1 << 20, &bytes, &missing).ok());
  EXPECT_TRUE(missing) << "the temporary file was left behind";
  int parts = 0;
  const Status written = WriteFileAtomically(path, [&](const WritePart& write) {
    for (const char* part : {"a\n", "", "b\nc\n"}) {
      if (!write(part)) return false;
      ++parts;
    }
    return true;
  });
  ASSERT_TRUE(written.ok()) << written.message();
  EXPECT_EQ(parts, 3);
  ASSERT_TRUE(ReadWholeFile(path, 1 << 20, &bytes, &missing).ok());
  EXPECT_EQ(bytes, "a\nb\nc\n");
  ASSERT_TRUE(RemoveFile(path).ok());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace pglock
