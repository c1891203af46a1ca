// What keeping a target's state costs ([storage] path): a state of N held locks (each its own
// session, the worst case for the file's size; plus a full event log) encoded, written
// atomically (fsync included) and read back, on this machine's disk. Run by hand, not by ctest:
//   build/tests/state_write_bench [LOCKS [DIR [EVENTS [FULL]]]]
//   (defaults: 20000, /tmp, 1000, 0)
// FULL=1 adds the timeline at its bounds (kOpenIntervals open, kClosedIntervals closed,
// kMarkersPerKind markers of 12 kinds, ordinary names), 100 blocking episodes in progress and a
// lease table of 1,000 rows with its evidence, and prints the bytes each section adds.
// Prints the file's size and the CPU and wall time of each step (median of 5); then the events
// journal's: an append of 10 events, the journal written whole, its read; and, side by side, the
// encode of the file as written before the journal (the events in it).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "exporter/storage/saved_state.h"
#include "exporter/storage/state_store.h"

namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Cost {
  double cpu_ms;
  double wall_ms;
};

template <typename F>
Cost Median(F f) {
  std::vector<Cost> runs;
  for (int i = 0; i < 5; ++i) {
    const double c0 = CpuSeconds(), w0 = WallSeconds();
    f();
    runs.push_back({(CpuSeconds() - c0) * 1e3, (WallSeconds() - w0) * 1e3});
  }
  std::sort(runs.begin(), runs.end(),
            [](const Cost& a, const Cost& b) { return a.wall_ms < b.wall_ms; });
  return runs[2];
}

// The timeline, episodes and lease table of FULL=1.
void AddBounds(pglock::SavedTarget* s) {
  using pglock::TimelineRow;
  using pglock::TimelineRowKind;
  pglock::TimelineSaved t;
  t.now = 1796400000;
  t.first_poll = 1796390000;
  auto row = [](int i) {
    return std::make_shared<const TimelineRow>(
        TimelineRow{TimelineRowKind::kLock, "app", "job:" + std::to_string(i)});
  };
  auto interval = [&](int i, double start, double end, bool open) {
    pglock::TimelineInterval v;
    v.row = row(i);
    v.start = start;
    v.end = end;
    v.open = open;
    v.pid = 100000 + i;
    v.who = "job-runner-" + std::to_string(i % 50);
    return v;
  };
  for (int i = 0; i < static_cast<int>(pglock::kOpenIntervals); ++i) {
    pglock::TimelineSavedOpen o;
    o.datid = 5;
    o.objid = static_cast<uint32_t>(i);
    o.objsubid = 1;
    o.pid = 100000 + i;
    o.backend_start = 1796300000.123456 + i;
    o.interval = interval(i, 1796390000.5 + i, 1796400000, true);
    t.open.push_back(std::move(o));
  }
  for (int i = 0; i < static_cast<int>(pglock::kClosedIntervals); ++i) {
    t.closed.push_back(interval(i, 1796380000.25 + i * 0.5, 1796380000.75 + i * 0.5, false));
  }
  for (int k = 0; k < 12; ++k) {
    for (int i = 0; i < static_cast<int>(pglock::kMarkersPerKind); ++i) {
      pglock::TimelineMarker m;
      m.row = row(i);
      m.time = 1796390000.5 + i;
      m.event_kind = pglock::EventKinds()[k].kind;
      m.cause = pglock::CauseOf(pglock::HoldEnd::kTerminated);
      m.outcome = pglock::EventOutcome::kReleased;
      m.previous_pid = 100000 + i;
      m.previous = "job-runner-" + std::to_string(i % 50);
      m.event_time = m.time;
      t.markers.push_back(std::move(m));
    }
  }
  s->timeline = std::move(t);
  pglock::EpisodeTrackerSaved e;
  for (int i = 0; i < 100; ++i) {
    pglock::SavedEpisode ep;
    ep.pid = 100000 + i;
    ep.backend_start = 1796300000.123456 + i;
    ep.episode.root.id.pid = ep.pid;
    ep.episode.root.id.application_name = "job-runner-" + std::to_string(i % 50);
    ep.episode.root.datname = "app";
    ep.episode.started = 1796399000.5;
    ep.episode.peak_blocked = 3;
    ep.episode.lock = "job:" + std::to_string(i);
    ep.episode.last_seen =
        s->inventory
            ->sessions[static_cast<size_t>(i) % std::max<size_t>(1, s->inventory->sessions.size())];
    ep.episode.last_seen_at = 1796399999.5;
    e.episodes.push_back(std::move(ep));
  }
  e.last_stats = {{5, "app", 1, 2, 3, 4}};
  s->episodes = std::move(e);
  pglock::LeaseTransitions::Saved leases;
  auto& table = leases.tables["public.leases"];
  for (int i = 0; i < 1000; ++i) {
    auto& seen = table.leases["lease-" + std::to_string(i)];
    seen.row = {"lease-" + std::to_string(i), "worker-" + std::to_string(i % 50), 1796399000.5,
                1796400060.5};
  }
  table.complete = true;
  table.next_seq = 3600;
  table.marks = {{3599, 1796400000, pglock::TableWrites{123456, 789}, {}}};
  s->leases = std::move(leases);
}

}  // namespace

int main(int argc, char** argv) {
  const int locks = argc > 1 ? std::atoi(argv[1]) : 20000;
  const std::string dir = argc > 2 ? argv[2] : "/tmp";
  const int events = argc > 3 ? std::atoi(argv[3]) : 1000;
  pglock::SavedTarget s;
  s.target = "bench";
  s.server = "7312345678901234567|5432";
  auto poll = std::make_shared<pglock::PollData>();
  poll->now = 1796400000;
  for (int i = 0; i < locks; ++i) {
    pglock::Session session;
    session.pid = 100000 + i;
    session.datid = 5;
    session.datname = "app";
    session.usename = "worker";
    session.application_name = "job-runner-" + std::to_string(i % 50);
    session.client_addr = "10.0.3." + std::to_string(i % 250);
    session.state = "idle";
    session.backend_start = 1796300000.123456 + i;
    session.state_change = 1796399000.654321 + i;
    poll->sessions.push_back(session);
    pglock::AdvisoryLock lock;
    lock.key = {5, 0, static_cast<uint32_t>(i), 1};
    lock.pid = session.pid;
    poll->locks.push_back(lock);
    s.first_seen.push_back({session.pid, session.backend_start, lock.key, 1796300001.5 + i});
  }
  s.inventory = poll;
  for (int i = 0; i < events; ++i) {
    pglock::Event e;
    e.time = 1796399999.5 + i;
    e.target = "bench";
    e.kind = pglock::EventKind::kLockReleased;
    e.cause = pglock::CauseOf(pglock::HoldEnd::kCleanClose);
    e.evidence = pglock::EndEvidence::kLog;
    e.lock = "job:" + std::to_string(i);
    e.previous = pglock::Identity{100000 + i, "job-runner", "", "", "", ""};
    s.events.push_back(e);
  }
  if (argc > 4 && std::atoi(argv[4]) != 0 && !s.inventory->sessions.empty()) {
    const size_t base = pglock::EncodeSavedTarget(s).size();
    AddBounds(&s);
    pglock::SavedTarget part = s;
    part.leases.reset();
    part.timeline.reset();
    const size_t episodes = pglock::EncodeSavedTarget(part).size() - base;
    part = s;
    part.episodes.reset();
    part.timeline.reset();
    const size_t leases = pglock::EncodeSavedTarget(part).size() - base;
    part = s;
    part.episodes.reset();
    part.leases.reset();
    const size_t timeline = pglock::EncodeSavedTarget(part).size() - base;
    std::printf("added: timeline %.2f MB, 100 episodes %.3f MB, 1,000 leases %.3f MB\n",
                static_cast<double>(timeline) / 1e6, static_cast<double>(episodes) / 1e6,
                static_cast<double>(leases) / 1e6);
  }
  // The events go to the journal: the state file itself holds none. Side by side: the file as
  // written before the journal (every kept event in it, encoded at every write).
  std::vector<std::shared_ptr<const pglock::Event>> kept;
  for (const pglock::Event& e : s.events) kept.push_back(std::make_shared<pglock::Event>(e));
  std::string inline_bytes;
  const Cost inline_encode = Median([&] { inline_bytes = pglock::EncodeSavedTarget(s); });
  s.events.clear();
  s.journal = pglock::SavedJournal{1, kept.size()};
  std::string bytes;
  const Cost encode = Median([&] { bytes = pglock::EncodeSavedTarget(s); });
  const std::string journal_path = pglock::EventJournalPath(dir, "bench", 1);
  std::string journal;
  const Cost rewrite = Median([&] {
    journal = pglock::EncodeEventLines(kept);
    if (!pglock::WriteFileAtomically(journal_path, journal).ok()) std::abort();
  });
  const std::vector<std::shared_ptr<const pglock::Event>> added(
      kept.end() - std::min<size_t>(kept.size(), 10), kept.end());
  const Cost append = Median([&] {
    if (!pglock::AppendToFile(journal_path, pglock::EncodeEventLines(added)).ok()) std::abort();
  });
  const Cost journal_read = Median([&] {
    if (pglock::DecodeEventLines(journal, kept.size()).events.size() != kept.size()) std::abort();
  });
  pglock::RemoveFile(journal_path).ok();
  const std::string path = pglock::StateFilePath(dir, "bench");
  const Cost write = Median([&] {
    if (!pglock::WriteFileAtomically(path, bytes).ok()) std::abort();
  });
  pglock::SavedTarget back;
  const Cost decode = Median([&] {
    if (!pglock::DecodeSavedTarget(bytes, &back).ok()) std::abort();
  });
  std::printf("locks %d, events %d: file %.2f MB (%zu bytes)\n", locks, events,
              static_cast<double>(bytes.size()) / 1e6, bytes.size());
  std::printf("encode  cpu %7.2f ms  wall %7.2f ms\n", encode.cpu_ms, encode.wall_ms);
  std::printf("write   cpu %7.2f ms  wall %7.2f ms (temporary file, fsync, rename)\n", write.cpu_ms,
              write.wall_ms);
  std::printf("decode  cpu %7.2f ms  wall %7.2f ms (once, at start)\n", decode.cpu_ms,
              decode.wall_ms);
  std::printf("events journal (%zu lines, %.2f MB):\n", kept.size(),
              static_cast<double>(journal.size()) / 1e6);
  std::printf("  append of %zu events   cpu %7.2f ms  wall %7.2f ms (encode, write, fdatasync)\n",
              added.size(), append.cpu_ms, append.wall_ms);
  std::printf(
      "  written whole          cpu %7.2f ms  wall %7.2f ms (encode, temporary file, fsync, "
      "rename; once per %llu appended events)\n",
      rewrite.cpu_ms, rewrite.wall_ms,
      static_cast<unsigned long long>(kept.size() + pglock::kJournalSlackLines));
  std::printf("  read                   cpu %7.2f ms  wall %7.2f ms (once, at start)\n",
              journal_read.cpu_ms, journal_read.wall_ms);
  std::printf(
      "before the journal: file %.2f MB, encode cpu %7.2f ms at every write (%.1fx the "
      "state file's encode now)\n",
      static_cast<double>(inline_bytes.size()) / 1e6, inline_encode.cpu_ms,
      inline_encode.cpu_ms / std::max(encode.cpu_ms, 1e-3));
  pglock::RemoveFile(path).ok();
  return 0;
}
