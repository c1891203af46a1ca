// Writes a target's state directory ([storage] path) whose history is at every bound: the event
// log full (event_log_size events of every kind), the timeline's closed intervals at
// kClosedIntervals and its markers at kMarkersPerKind of every kind; nothing held, nothing open.
// An exporter started on it restores that history at its first poll (the saved server must be
// the one it polls), so that a soak measures the hour *at* the bounds rather than on the way to
// them, which its traffic would take hours to reach. The texts recur as a fleet's do: 50 lock
// names, 20 applications, 10 addresses. Run by tests/bench/soak.sh --full-history:
//   build/tests/history_at_bounds DIR TARGET SERVER NOW [EVENTS_PER_KIND]
//   (SERVER: "system_identifier|port", as the exporter keys a server; NOW: the server's epoch
//   seconds; EVENTS_PER_KIND: web.event_log_size, default 1000)
// Prints what it wrote.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/events/event_names.h"
#include "exporter/events/timeline.h"
#include "exporter/storage/saved_state.h"
#include "exporter/storage/state_store.h"

namespace {

using pglock::EventKind;

// One hour of history before `now`, the i-th of n moments in it.
double At(double now, size_t i, size_t n) {
  return now - 3600 + 3500.0 * static_cast<double>(i) / static_cast<double>(n);
}

pglock::Identity Party(size_t i) {
  return pglock::Identity{static_cast<int>(200000 + i % 5000),
                          "history-worker-" + std::to_string(i % 20) + " (sidekiq 7.1.2)",
                          "10.12.140." + std::to_string(i % 10),
                          "orders_application",
                          "idle",
                          ""};
}

std::vector<std::shared_ptr<const pglock::Event>> Events(const std::string& target, double now,
                                                         size_t per_kind) {
  std::vector<std::shared_ptr<const pglock::Event>> out;
  const auto kinds = pglock::EventKinds();
  const size_t n = per_kind * kinds.size();
  for (size_t i = 0; i < per_kind; ++i) {
    for (const pglock::EventKindInfo& k : kinds) {
      auto e = std::make_shared<pglock::Event>();
      e->time = At(now, out.size(), n);
      e->target = target;
      e->kind = k.kind;
      e->datname = "app";
      e->lock = "history-" + std::to_string(i % 50);
      e->previous = Party(i);
      e->current = Party(i + 1);
      e->evidence = pglock::EndEvidence::kLog;
      if (k.kind == EventKind::kLockLost) e->cause = pglock::CauseOf(pglock::HoldEnd::kTerminated);
      if (pglock::IsLeaseEvent(k.kind)) {
        e->table = "public.leases";
        e->lease = "history-lease-" + std::to_string(i % 50);
        e->previous_holder = "history-host-" + std::to_string(i % 20) + ":4182:a1";
        e->current_holder = "history-host-" + std::to_string((i + 1) % 20) + ":4182:a1";
      }
      if (k.kind == EventKind::kBlockingEpisode) {
        e->outcome = pglock::EventOutcome::kReleased;
        e->started = e->time - 12;
        e->duration = 12;
        e->peak_blocked = 3;
        e->longest_wait = 11;
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::shared_ptr<const pglock::TimelineRow> LockRow(size_t i) {
  return std::make_shared<const pglock::TimelineRow>(
      pglock::TimelineRow{pglock::TimelineRowKind::kLock, "app", "history-" + std::to_string(i)});
}

std::vector<pglock::TimelineInterval> ClosedIntervals(double now) {
  std::vector<pglock::TimelineInterval> out;
  const size_t n = pglock::kClosedIntervals;
  for (size_t i = 0; i < n; ++i) {
    pglock::TimelineInterval v;
    v.row = LockRow(i % 1000);
    v.start = At(now, i, n);
    v.end = v.start + 0.75;
    v.pid = Party(i).pid;
    v.who = Party(i).application_name;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<pglock::TimelineMarker> Markers(double now) {
  struct Kind {
    pglock::MarkerMoment moment;
    std::optional<EventKind> event;
    pglock::TimelineRowKind row;
  };
  std::vector<Kind> kinds;
  for (const pglock::EventKindInfo& k : pglock::EventKinds()) {
    if (k.kind == EventKind::kLockReleased) continue;  // a holder's bar ends there: no marker
    kinds.push_back({pglock::MarkerMoment::kEvent, k.kind,
                     pglock::IsLeaseEvent(k.kind) ? pglock::TimelineRowKind::kLease
                                                  : pglock::TimelineRowKind::kLock});
  }
  kinds.push_back({pglock::MarkerMoment::kEpisodeStart, EventKind::kBlockingEpisode,
                   pglock::TimelineRowKind::kRoot});
  kinds.push_back({pglock::MarkerMoment::kEpisodeEnd, EventKind::kBlockingEpisode,
                   pglock::TimelineRowKind::kRoot});
  kinds.push_back(
      {pglock::MarkerMoment::kLeaseExpiry, std::nullopt, pglock::TimelineRowKind::kLease});
  std::vector<pglock::TimelineMarker> out;
  for (const Kind& k : kinds) {
    for (size_t i = 0; i < pglock::kMarkersPerKind; ++i) {
      pglock::TimelineMarker m;
      const std::string name = k.row == pglock::TimelineRowKind::kRoot
                                   ? "pid " + std::to_string(Party(i).pid)
                                   : "history-" + std::to_string(i % 50);
      m.row = std::make_shared<const pglock::TimelineRow>(pglock::TimelineRow{
          k.row, k.row == pglock::TimelineRowKind::kLease ? "public.leases" : "app", name});
      m.time = At(now, i, pglock::kMarkersPerKind);
      m.moment = k.moment;
      m.event_kind = k.event;
      m.event_time = m.time;
      m.evidence = pglock::EndEvidence::kLog;
      m.previous_pid = Party(i).pid;
      m.previous = Party(i).application_name;
      m.current_pid = Party(i + 1).pid;
      m.current = Party(i + 1).application_name;
      out.push_back(std::move(m));
    }
  }
  return out;
}

bool Write(const std::string& path, const std::string& bytes) {
  const pglock::Status s = pglock::WriteFileAtomically(path, bytes);
  if (!s.ok()) std::fprintf(stderr, "history_at_bounds: %s\n", s.message().c_str());
  return s.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s DIR TARGET SERVER NOW [EVENTS_PER_KIND]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1], target = argv[2];
  const double now = std::atof(argv[4]);
  const size_t per_kind = argc > 5 ? static_cast<size_t>(std::atol(argv[5])) : 1000;
  if (now <= 3600 || per_kind == 0) {
    std::fprintf(stderr, "history_at_bounds: NOW and EVENTS_PER_KIND must be positive\n");
    return 2;
  }
  const auto events = Events(target, now, per_kind);
  const std::string event_lines = pglock::EncodeEventLines(events);
  size_t interval_count = 0;
  const std::string interval_lines =
      pglock::EncodeIntervalLines(ClosedIntervals(now), &interval_count);

  pglock::SavedTarget s;
  s.target = target;
  s.server = argv[3];
  s.saved_at =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto inventory = std::make_shared<pglock::PollData>();
  inventory->now = now - 1;  // a poll a second before: nothing held, nobody connected
  s.inventory = inventory;
  s.journal = pglock::SavedJournal{1, events.size()};
  s.timeline_journal = pglock::SavedJournal{1, interval_count};
  size_t markers = 0;
  const std::string marker_lines = pglock::EncodeMarkerLines(Markers(now), &markers);
  s.marker_journal = pglock::SavedJournal{1, markers};
  pglock::TimelineSaved t;
  t.now = now - 1;
  t.first_poll = now - 3600;
  s.timeline = std::move(t);
  if (!Write(pglock::EventJournalPath(dir, target, 1), event_lines) ||
      !Write(pglock::TimelineJournalPath(dir, target, 1), interval_lines) ||
      !Write(pglock::MarkerJournalPath(dir, target, 1), marker_lines) ||
      !Write(pglock::StateFilePath(dir, target), pglock::EncodeSavedTarget(s))) {
    return 1;
  }
  std::printf(
      "history at its bounds for target %s: %zu events (%zu kinds x %zu), %zu closed timeline "
      "intervals, %zu markers; journals %.1f MB, %.1f MB and %.1f MB\n",
      target.c_str(), events.size(), pglock::EventKinds().size(), per_kind, interval_count, markers,
      static_cast<double>(event_lines.size()) / 1e6,
      static_cast<double>(interval_lines.size()) / 1e6,
      static_cast<double>(marker_lines.size()) / 1e6);
  return 0;
}
