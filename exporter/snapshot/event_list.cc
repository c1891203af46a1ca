#include "exporter/snapshot/event_list.h"

#include <algorithm>
#include <queue>
#include <tuple>

namespace pglock {
namespace {

// A position in one kind's spans.
struct Cursor {
  const std::vector<EventList::Span>* spans;
  size_t span = 0;
  uint32_t slot = 0;
  const std::pair<uint64_t, const Event*>& entry() const {
    const EventList::Span& s = (*spans)[span];
    return s.chunk->slots[slot];
  }
  // The entry's event, sharing its chunk's ownership.
  std::shared_ptr<const Event> event() const {
    return std::shared_ptr<const Event>((*spans)[span].chunk, entry().second);
  }
  // Moves to the next slot; false past the last.
  bool Next() {
    if (++slot < (*spans)[span].end) return true;
    while (++span < spans->size()) {
      slot = (*spans)[span].begin;
      if (slot < (*spans)[span].end) return true;
    }
    return false;
  }
  // Moves to the first slot; false when the spans are empty.
  bool First() {
    for (span = 0; span < spans->size(); ++span) {
      slot = (*spans)[span].begin;
      if (slot < (*spans)[span].end) return true;
    }
    return false;
  }
};

}  // namespace

EventList::EventList(std::vector<std::vector<Span>> by_kind) : by_kind_(std::move(by_kind)) {
  uint64_t newest_seq = 0;
  for (const std::vector<Span>& spans : by_kind_) {
    for (const Span& s : spans) size_ += s.end - s.begin;
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->end == it->begin) continue;
      const auto& [seq, event] = it->chunk->slots[it->end - 1];
      if (newest_ == nullptr || seq > newest_seq) {
        newest_seq = seq;
        newest_ = event;
      }
      break;
    }
  }
}

std::shared_ptr<const EventList> EventList::Of(std::vector<std::shared_ptr<const Event>> events) {
  // A chunk that keeps the events it points to alive.
  struct SharingChunk : EventChunk {
    std::array<std::shared_ptr<const Event>, kSize> owned;
  };
  std::vector<Span> spans;
  std::shared_ptr<SharingChunk> filling;
  uint64_t seq = 0;
  for (auto& e : events) {
    if (spans.empty() || spans.back().end == EventChunk::kSize) {
      filling = std::make_shared<SharingChunk>();
      spans.push_back(Span{filling, 0, 0});
    }
    const uint32_t slot = spans.back().end++;
    filling->slots[slot] = {seq++, e.get()};
    filling->owned[slot] = std::move(e);
  }
  std::vector<std::vector<Span>> by_kind;
  by_kind.push_back(std::move(spans));
  return std::make_shared<const EventList>(std::move(by_kind));
}

const std::vector<std::shared_ptr<const Event>>& EventList::all() const {
  std::call_once(merged_once_, [this] {
    merged_.reserve(size_);
    // The kinds' sequences merged by sequence number: the smallest head first.
    using Head = std::pair<uint64_t, size_t>;  // sequence, cursor
    std::vector<Cursor> cursors;
    std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
    cursors.reserve(by_kind_.size());
    for (const std::vector<Span>& spans : by_kind_) {
      Cursor c{&spans};
      if (!c.First()) continue;
      heads.emplace(c.entry().first, cursors.size());
      cursors.push_back(c);
    }
    while (!heads.empty()) {
      const size_t i = heads.top().second;
      heads.pop();
      merged_.push_back(cursors[i].event());
      if (cursors[i].Next()) heads.emplace(cursors[i].entry().first, i);
    }
  });
  return merged_;
}

}  // namespace pglock
