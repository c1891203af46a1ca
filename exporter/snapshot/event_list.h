// The events a snapshot shows, oldest first, and the chunks they are kept in. Publishing the event
// log with every poll must cost what the poll added, not what the log keeps: the log (EventLog,
// exporter/events/event_log.h) keeps each kind's events in fixed-size chunks, and an EventList
// holds spans of those chunks, shared with the log and the snapshots before it. The merged order
// across kinds is built on the first read that needs it (a page, the API, the state file), once
// per list.
//
// Thread-safety: an EventList is immutable once built and may be read from any thread. A chunk's
// slots are written once, by the log under its lock, before any list that spans them exists, and
// never again; a list never reads a slot past its spans.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace pglock {

struct Event;  // exporter/events/event_log.h

// Events of one kind in the order appended, each with its sequence number across kinds. The
// events themselves are kept by the chunk's owner, a type derived from it: the log's chunks
// (EventLog) hold them in place, a list built from events (EventList::Of) holds their pointers.
// A chunk is allocated whole and freed whole, so the events a log turns over leave no holes
// between the blocks that outlive them.
struct EventChunk {
  // 32 events: a kind with one event costs a chunk (6 KB in the log), a full kind 32 of them.
  static constexpr size_t kSize = 32;
  std::array<std::pair<uint64_t, const Event*>, kSize> slots{};
};

class EventList {
 public:
  // Slots [begin, end) of a chunk, in sequence order.
  struct Span {
    std::shared_ptr<const EventChunk> chunk;
    uint32_t begin = 0;
    uint32_t end = 0;
  };
  using const_iterator = std::vector<std::shared_ptr<const Event>>::const_iterator;
  using const_reverse_iterator = std::vector<std::shared_ptr<const Event>>::const_reverse_iterator;

  EventList() = default;
  // Spans grouped by kind: within a group in sequence order (the groups' order is free).
  explicit EventList(std::vector<std::vector<Span>> by_kind);
  // A list of the given events in this order (tests, and lists built outside a log).
  static std::shared_ptr<const EventList> Of(std::vector<std::shared_ptr<const Event>> events);
  EventList(const EventList&) = delete;
  EventList& operator=(const EventList&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The newest event; null when empty. Needs no merge.
  const Event* newest() const { return newest_; }

  // The merged order, oldest first (built on the first call).
  const std::vector<std::shared_ptr<const Event>>& all() const;
  const_iterator begin() const { return all().begin(); }
  const_iterator end() const { return all().end(); }
  const_reverse_iterator rbegin() const { return all().rbegin(); }
  const_reverse_iterator rend() const { return all().rend(); }
  const std::shared_ptr<const Event>& operator[](size_t i) const { return all()[i]; }

 private:
  std::vector<std::vector<Span>> by_kind_;
  size_t size_ = 0;
  const Event* newest_ = nullptr;
  mutable std::once_flag merged_once_;
  mutable std::vector<std::shared_ptr<const Event>> merged_;
};

}  // namespace pglock
