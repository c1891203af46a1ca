// The words of the event log, each once: an event's kind, cause and outcome are enums, turned into
// the strings of the log line, the JSON (/api/v1/events, /api/v1/locks), the on-call page and
// docs/api.md by the one table in event_names.cc (tests/events/event_names_test.cc holds
// docs/api.md to it). The compiler finds every use of a kind; a typo does not compile. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>

#include "exporter/snapshot/session_end.h"

namespace pglock {

enum class EventKind : uint8_t {
  kLockReleased,  // cause: the reason (session_closed; unlocked is never an event)
  kLockLost,      // cause: the loss cause
  kLockHandover,  // previous -> current
  kLockTakeover,  // after a loss
  kLeaseAcquired,
  kLeaseReleased,
  kLeaseHandover,
  kLeaseExpiredTakeover,
  kLeaseOverlap,
  kPooledLockInherited,
  kBlockingEpisode,  // outcome; cause: the root's end cause when it ended
  kDeadlock,         // detail: the cycle
  kLockWait,         // from the log; outcome acquired / failed_to_acquire
  kLockTimeout,      // from the log; cause lock_timeout / nowait_failed / lock_not_available
};

// An event's cause: how a session ended (a HoldEnd, as the value of the same number: CauseOf), or
// how a lock request the log shows failed; kNone for none. The words of the ends are
// HoldEndLabel's.
enum class EventCause : uint8_t {
  // The values before kLockTimeout are the HoldEnds, in their order.
  kLockTimeout = std::size(kHoldEnds),  // lock_timeout (55P03)
  kNowaitFailed,                        // a NOWAIT that found the lock taken
  kLockNotAvailable,                    // 55P03 in a language the exporter does not read
  kNone,
};

// The cause an event gives a session end.
constexpr EventCause CauseOf(HoldEnd end) { return static_cast<EventCause>(end); }
// The session end a cause is, if it is one.
constexpr std::optional<HoldEnd> HoldEndOf(EventCause cause) {
  if (static_cast<size_t>(cause) >= std::size(kHoldEnds)) return std::nullopt;
  return static_cast<HoldEnd>(cause);
}

enum class EventOutcome : uint8_t {
  kNone,
  kReleased,  // blocking episodes: the root let go
  kRootEnded,
  kWaitersLeft,
  kAcquired,  // lock waits
  kFailedToAcquire,
};

// What a read of a lease table found a lease did since the last read: the `kind` label of
// pglock_lease_transitions_total. Each but a renewal (routine, once per poll per lease) is also
// an event, of the kind named "lease_" and its label.
enum class LeaseTransition : uint8_t {
  kAcquired,
  kReleased,
  kRenewed,
  kHandover,
  kExpiredTakeover,
  kOverlap,
};
// Every transition, in the order of the enum (the counters seeded at 0).
inline constexpr LeaseTransition kLeaseTransitions[] = {
    LeaseTransition::kAcquired, LeaseTransition::kReleased,        LeaseTransition::kRenewed,
    LeaseTransition::kHandover, LeaseTransition::kExpiredTakeover, LeaseTransition::kOverlap};

struct EventKindInfo {
  EventKind kind;
  const char* name;
  bool pages;      // a loss, takeover, overlap, inheritance, timeout or deadlock: red on the page
  bool coalesced;  // many locks of one session at one poll make one event (CoalesceEvents)
};

// Every kind, in the order of the enum.
std::span<const EventKindInfo> EventKinds();
const EventKindInfo& InfoOf(EventKind kind);
inline const char* EventKindName(EventKind kind) { return InfoOf(kind).name; }
std::optional<EventKind> EventKindNamed(std::string_view name);

// "acquired", "released", "renewed", "handover", "expired_takeover", "overlap".
const char* LeaseTransitionLabel(LeaseTransition t);
// The event a transition makes; none for a renewal.
std::optional<EventKind> EventOf(LeaseTransition t);
// True for the events of lease transitions (about a lease of a table, not a lock).
bool IsLeaseEvent(EventKind kind);

// "" for kNone.
const char* EventCauseName(EventCause cause);
const char* EventOutcomeName(EventOutcome outcome);
// Every cause and outcome but kNone, in the order of the enums (docs and tests).
std::span<const EventCause> EventCauses();
std::span<const EventOutcome> EventOutcomes();

}  // namespace pglock
