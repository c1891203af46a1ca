// What a target's saved history weighs in this process's heap: the events journal read into an
// event log, then the timeline (its closed intervals' and markers' journals with the state file's
// open intervals) restored, each step's growth of malloc's bytes in use (mallinfo2), the distinct
// texts it added, and what one state write costs to encode at that size. For a state directory a
// soak kept (BENCH_KEEP=1, tests/bench/soak.sh) against one tests/bench/history_at_bounds wrote:
// whether a resident size that grew under traffic is the history's content or the heap's age.
//   build/tests/history_weight DIR TARGET [EVENTS_PER_KIND]   (default 1000: web.event_log_size)
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/events/event_names.h"
#include "exporter/events/timeline.h"
#include "exporter/storage/saved_state.h"
#include "exporter/storage/state_store.h"
#include "exporter/util/shared_text.h"

namespace {

double MiB(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

size_t InUse() { return mallinfo2().uordblks; }

// The bytes of `path` ("" and a message when it cannot be read).
std::string Read(const std::string& path, size_t max) {
  std::string bytes;
  bool missing = false;
  const pglock::Status s = pglock::ReadWholeFile(path, max, &bytes, &missing);
  if (!s.ok() || missing) {
    std::fprintf(stderr, "history_weight: %s: %s\n", path.c_str(),
                 missing ? "missing" : s.message().c_str());
  }
  return bytes;
}

double Ms(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DIR TARGET [EVENTS_PER_KIND]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1], target = argv[2];
  const size_t per_kind = argc > 3 ? static_cast<size_t>(std::atol(argv[3])) : 1000;
  pglock::SavedTarget saved;
  if (const pglock::Status s = pglock::DecodeSavedTarget(
          Read(pglock::StateFilePath(dir, target), pglock::kMaxSavedStateBytes), &saved);
      !s.ok()) {
    std::fprintf(stderr, "history_weight: the state file: %s\n", s.message().c_str());
    return 1;
  }

  size_t before = InUse(), texts = pglock::SharedText::Distinct();
  pglock::EventLog log(per_kind);
  if (saved.journal) {
    const std::string lines = Read(pglock::EventJournalPath(dir, target, saved.journal->generation),
                                   pglock::kMaxJournalBytes);
    std::vector<pglock::Event> batch;
    pglock::DecodeEventLines(lines, saved.journal->lines, [&](pglock::Event&& e) {
      batch.push_back(std::move(e));
      if (batch.size() == 64) log.Append(std::exchange(batch, {}));
    });
    log.Append(std::move(batch));
  }
  const size_t events_bytes = InUse() - before;
  const auto events = log.Contents();
  std::map<std::string, size_t> kinds;
  for (const auto& e : *events) ++kinds[pglock::EventKindName(e->kind)];
  std::printf("events: %zu kept (", events->size());
  for (const auto& [kind, n] : kinds) std::printf(" %s %zu", kind.c_str(), n);
  std::printf(" ), %.2f MiB, %zu distinct texts added\n", MiB(events_bytes),
              pglock::SharedText::Distinct() - texts);

  before = InUse();
  texts = pglock::SharedText::Distinct();
  pglock::Timeline timeline;
  if (saved.timeline) {
    pglock::TimelineSaved t = *saved.timeline;
    if (saved.timeline_journal) {
      t.closed =
          pglock::DecodeIntervalLines(
              Read(pglock::TimelineJournalPath(dir, target, saved.timeline_journal->generation),
                   pglock::kMaxJournalBytes),
              saved.timeline_journal->lines)
              .intervals;
    }
    if (saved.marker_journal) {
      t.markers = pglock::DecodeMarkerLines(
                      Read(pglock::MarkerJournalPath(dir, target, saved.marker_journal->generation),
                           pglock::kMaxJournalBytes),
                      saved.marker_journal->lines)
                      .markers;
    }
    timeline.Restore(t);
  }
  const size_t timeline_bytes = InUse() - before;
  const pglock::TimelineWindow all = timeline.Query(1e9);
  std::printf(
      "timeline: %zu intervals, %zu markers, %zu rows, %.2f MiB once restored, %zu distinct texts "
      "added\n",
      timeline.intervals(), timeline.markers(), all.rows.size(), MiB(timeline_bytes),
      pglock::SharedText::Distinct() - texts);
  std::printf("in use at the end (a window of it all included): %.2f MiB; distinct texts %zu\n",
              MiB(InUse()), pglock::SharedText::Distinct());

  // What a state write encodes at this size: the file without the journals' contents.
  const auto start = std::chrono::steady_clock::now();
  pglock::SavedTarget out = saved;
  out.timeline = timeline.Save(/*with_closed=*/false, /*with_markers=*/false);
  const std::string file = pglock::EncodeSavedTarget(out);
  std::printf("a state write's encode: %.2f ms, %zu bytes\n", Ms(start), file.size());
  return 0;
}
