// The state file reader ([storage] path): no crash on any bytes, nothing half-read on an error,
// and every state it accepts encodes to bytes it reads back to the same encoding. The same bytes
// as an events journal and as the timeline's journals (closed intervals, markers): no crash, and
// what it reads written again reads back the same.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/storage/saved_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const pglock::JournalRead journal = pglock::DecodeEventLines(bytes, UINT64_MAX);
  if (journal.events.size() + journal.damaged != journal.lines) std::abort();
  std::vector<std::shared_ptr<const pglock::Event>> events;
  for (const pglock::Event& e : journal.events) {
    events.push_back(std::make_shared<const pglock::Event>(e));
  }
  const std::string lines = pglock::EncodeEventLines(events);
  const pglock::JournalRead back = pglock::DecodeEventLines(lines, UINT64_MAX);
  if (back.damaged != 0 || back.events.size() != events.size()) std::abort();
  std::vector<std::shared_ptr<const pglock::Event>> again_events;
  for (const pglock::Event& e : back.events) {
    again_events.push_back(std::make_shared<const pglock::Event>(e));
  }
  if (pglock::EncodeEventLines(again_events) != lines) std::abort();
  const pglock::IntervalJournalRead intervals = pglock::DecodeIntervalLines(bytes, UINT64_MAX);
  if (intervals.intervals.size() + intervals.damaged != intervals.lines) std::abort();
  const std::string interval_lines = pglock::EncodeIntervalLines(intervals.intervals);
  const pglock::IntervalJournalRead intervals_back =
      pglock::DecodeIntervalLines(interval_lines, UINT64_MAX);
  if (intervals_back.damaged != 0 ||
      pglock::EncodeIntervalLines(intervals_back.intervals) != interval_lines) {
    std::abort();
  }
  const pglock::MarkerJournalRead markers = pglock::DecodeMarkerLines(bytes, UINT64_MAX);
  if (markers.markers.size() + markers.damaged != markers.lines) std::abort();
  const std::string marker_lines = pglock::EncodeMarkerLines(markers.markers);
  const pglock::MarkerJournalRead markers_back =
      pglock::DecodeMarkerLines(marker_lines, UINT64_MAX);
  if (markers_back.damaged != 0 ||
      pglock::EncodeMarkerLines(markers_back.markers) != marker_lines) {
    std::abort();
  }
  pglock::SavedTarget state;
  if (!pglock::DecodeSavedTarget(bytes, &state).ok()) {
    if (state.inventory || !state.events.empty() || !state.target.empty()) std::abort();
    return 0;
  }
  const std::string once = pglock::EncodeSavedTarget(state);
  pglock::SavedTarget again;
  if (!pglock::DecodeSavedTarget(once, &again).ok()) std::abort();
  if (pglock::EncodeSavedTarget(again) != once) std::abort();
  return 0;
}
