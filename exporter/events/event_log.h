// The on-call event log: what happened to a lock or lease between two polls, with the
// identity of the session or holder before and after. EventTracker (events.h) produces events at
// the same points where it counts them; the poller stamps the target, logs each event once and
// appends it to the target's EventLog, whose contents are published with every snapshot.
// Event is plain data. EventLog is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/events/event_names.h"
#include "exporter/snapshot/event_list.h"
#include "exporter/snapshot/session_end.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/util/shared_text.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

// A session as an event keeps it: its pid, and its application, address, user, state and query
// as one SharedText. The first four recur together across the thousands of events a log keeps
// (one pool's sessions, a job's workers), so a party costs 16 bytes, and each distinct description
// is stored once however many events and sessions share it. The query is kept only with
// web.show_query_text; then one query from many addresses or states is stored with each.
class EventParty {
 public:
  EventParty() = default;
  EventParty(const Identity& id);  // NOLINT(google-explicit-constructor): an Identity's stand-in
  operator Identity() const;       // NOLINT(google-explicit-constructor)

  std::string_view application_name() const { return Text(0); }
  std::string_view client_addr() const { return Text(1); }
  std::string_view usename() const { return Text(2); }
  std::string_view state() const { return Text(3); }
  std::string_view query() const { return Text(4); }

  int pid = 0;

 private:
  // The i-th of the five texts: each is kept as its length (4 bytes, host order) and its bytes.
  std::string_view Text(int i) const;

  SharedText texts_;  // empty when all five are
};

// Its strings are SharedText: a log keeps thousands of events whose texts repeat. Its members
// are ordered for size.
struct Event {
  double time = 0;    // server epoch seconds: now() of the poll that saw it
  SharedText target;  // set by the poller
  // What happened (event_names.h says what each kind carries). lock_wait: a wait that outlasted
  // deadlock_timeout and ended (outcome, duration; previous: the first holder, current: the
  // waiter); lock_timeout: current gave up, previous is its blocker.
  EventKind kind = EventKind::kLockReleased;
  EventCause cause = EventCause::kNone;  // loss cause, release reason, a timeout's kind
  // blocking_episode, lock_wait, lock_timeout: how it ended (with started and duration below).
  EventOutcome outcome = EventOutcome::kNone;
  // What decided the cause of a loss or a release by session close (and a blocking episode's
  // root_ended cause): the server's log, the counters, the timing alone, a restart.
  EndEvidence evidence = EndEvidence::kNone;
  SharedText datname;
  SharedText lock;   // configured name or rendered key; pooled locks too
  SharedText table;  // lease events
  SharedText lease;
  SharedText pooler;  // pooled_lock_inherited
  // Sessions before and after (pid 0: none or unknown). For leases and pooled clients the holder
  // text is in previous_holder / current_holder.
  EventParty previous;
  EventParty current;
  SharedText previous_holder;
  SharedText current_holder;
  // blocking_episode: the root is `previous`; when it started (the first poll that saw it block),
  // how long it lasted, the peak sessions blocked and the longest wait seen.
  double started = 0;
  double duration = 0;
  int64_t peak_blocked = 0;
  double longest_wait = 0;
  SharedText detail;  // deadlock: the sessions and locks of the cycle
  // How many locks this event tells of: the locks of one session released, lost, handed over or
  // inherited at once are one event (CoalesceEvents), `lock` naming the first few.
  int64_t count = 1;
  // Judged at the exporter's first poll after a restart, across the time it was down: the last
  // poll before it stopped and the first after it started (server epoch seconds); 0 otherwise.
  double gap_from = 0;
  double gap_to = 0;
};

// The locks named in a coalesced event's `lock`; the rest are counted.
inline constexpr size_t kCoalescedNames = 5;

// One incident, one event: events of the same kind about the same sessions at the same poll (a
// session's thousands of locks released, lost, handed over or inherited at once) become one,
// with their count and the first kCoalescedNames locks named ("a, b, c, d, e and 6082 more").
// Lock events only; the order of first appearance is kept.
void CoalesceEvents(std::vector<Event>* events);

// One JSON object for an event (fields as in docs/api.md's Event schema); any bytes in
// the strings give valid JSON.
std::string EventJson(const Event& e);
// "key=value ..." for text logs; values quoted with Go-style escapes when needed.
std::string EventText(const Event& e);

// The recent events of a target: the last `capacity` of each kind, so that a flood of routine
// events (thousands of releases) cannot evict the losses, takeovers, inheritances, episodes,
// deadlocks and timeouts before it. Each kind is kept in chunks (EventChunk) that the lists it
// publishes share, so that Append and Contents cost the events added and the chunks kept, not
// the events kept.
class EventLog {
 public:
  explicit EventLog(size_t capacity) : capacity_(capacity) {}
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  void Append(std::vector<Event> events) EXCLUDES(mu_);
  // Takes every event of `from` (left empty), as if appended after this log's own in their
  // order: without a copy when this log has none yet (a restart's restored events). Returns how
  // many `from` kept.
  size_t Adopt(EventLog* from) EXCLUDES(mu_);
  // The current contents, oldest first. The same list object is returned until the next Append
  // that adds something, so a snapshot set that did not change keeps its cached pages.
  std::shared_ptr<const EventList> Contents() const EXCLUDES(mu_);
  // The kept events appended at or after sequence number `from` (the events journal's next
  // line), oldest first, and in *next the number the next appended event will have: from 0, all
  // the log keeps. Costs the events returned and the chunks they are in.
  std::vector<std::shared_ptr<const Event>> Since(uint64_t from, uint64_t* next) const
      EXCLUDES(mu_);

 private:
  // A chunk that holds its events in place: one block for kSize events, written slot by slot. Its
  // slots point into it, so it is never copied.
  struct StoredChunk : EventChunk {
    StoredChunk() = default;
    StoredChunk(const StoredChunk&) = delete;
    StoredChunk& operator=(const StoredChunk&) = delete;
    std::array<Event, kSize> events;
  };
  // One kind's events: `size` of them, from slot `front` of the first chunk on. A chunk's slots
  // are written once, in order; only the last chunk has free slots.
  struct Ring {
    std::deque<std::shared_ptr<StoredChunk>> chunks;
    size_t front = 0;
    size_t size = 0;
  };

  const size_t capacity_;
  mutable Mutex mu_;
  std::map<EventKind, Ring> rings_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  mutable std::shared_ptr<const EventList> contents_ GUARDED_BY(mu_);  // null: stale
};

}  // namespace pglock
