#include "exporter/events/event_names.h"

#include <array>

namespace pglock {
namespace {

// The one table of kinds: their names and how the page and the log treat them.
constexpr std::array<EventKindInfo, 14> kKinds = {{
    {EventKind::kLockReleased, "lock_released", false, true},
    {EventKind::kLockLost, "lock_lost", true, true},
    {EventKind::kLockHandover, "lock_handover", false, true},
    {EventKind::kLockTakeover, "lock_takeover", true, true},
    {EventKind::kLeaseAcquired, "lease_acquired", false, false},
    {EventKind::kLeaseReleased, "lease_released", false, false},
    {EventKind::kLeaseHandover, "lease_handover", false, false},
    {EventKind::kLeaseExpiredTakeover, "lease_expired_takeover", true, false},
    {EventKind::kLeaseOverlap, "lease_overlap", true, false},
    {EventKind::kPooledLockInherited, "pooled_lock_inherited", true, true},
    {EventKind::kBlockingEpisode, "blocking_episode", false, false},
    {EventKind::kDeadlock, "deadlock", true, false},
    {EventKind::kLockWait, "lock_wait", false, false},
    {EventKind::kLockTimeout, "lock_timeout", true, false},
}};

// Every session end, then the failures of lock requests.
constexpr auto kCauses = [] {
  std::array<EventCause, std::size(kHoldEnds) + 3> causes{};
  size_t n = 0;
  for (const HoldEnd end : kHoldEnds) causes[n++] = CauseOf(end);
  for (const EventCause c :
       {EventCause::kLockTimeout, EventCause::kNowaitFailed, EventCause::kLockNotAvailable}) {
    causes[n++] = c;
  }
  return causes;
}();
static_assert(kCauses.back() == EventCause::kLockNotAvailable &&
                  static_cast<size_t>(EventCause::kNone) == kCauses.size(),
              "kCauses lists every EventCause but kNone once");

constexpr std::array<EventOutcome, 5> kOutcomes = {
    EventOutcome::kReleased, EventOutcome::kRootEnded, EventOutcome::kWaitersLeft,
    EventOutcome::kAcquired, EventOutcome::kFailedToAcquire};

// The one table of lease transitions: their labels and the events they make.
struct LeaseTransitionInfo {
  LeaseTransition transition;
  const char* label;
  std::optional<EventKind> event;
};
constexpr std::array<LeaseTransitionInfo, 6> kTransitions = {{
    {LeaseTransition::kAcquired, "acquired", EventKind::kLeaseAcquired},
    {LeaseTransition::kReleased, "released", EventKind::kLeaseReleased},
    {LeaseTransition::kRenewed, "renewed", std::nullopt},
    {LeaseTransition::kHandover, "handover", EventKind::kLeaseHandover},
    {LeaseTransition::kExpiredTakeover, "expired_takeover", EventKind::kLeaseExpiredTakeover},
    {LeaseTransition::kOverlap, "overlap", EventKind::kLeaseOverlap},
}};

constexpr bool TransitionsInEnumOrder() {
  if (kTransitions.size() != std::size(kLeaseTransitions)) return false;
  for (size_t i = 0; i < kTransitions.size(); ++i) {
    if (static_cast<size_t>(kTransitions[i].transition) != i) return false;
    if (kLeaseTransitions[i] != kTransitions[i].transition) return false;
  }
  return true;
}
static_assert(TransitionsInEnumOrder(),
              "kTransitions and kLeaseTransitions list every LeaseTransition once, in enum order");

constexpr bool KindsInEnumOrder() {
  for (size_t i = 0; i < kKinds.size(); ++i) {
    if (static_cast<size_t>(kKinds[i].kind) != i) return false;
  }
  return true;
}
static_assert(KindsInEnumOrder(), "kKinds lists every EventKind once, in the order of the enum");

}  // namespace

std::span<const EventKindInfo> EventKinds() { return kKinds; }

const EventKindInfo& InfoOf(EventKind kind) { return kKinds[static_cast<size_t>(kind)]; }

std::optional<EventKind> EventKindNamed(std::string_view name) {
  for (const EventKindInfo& k : kKinds) {
    if (name == k.name) return k.kind;
  }
  return std::nullopt;
}

const char* LeaseTransitionLabel(LeaseTransition t) {
  return kTransitions[static_cast<size_t>(t)].label;
}

std::optional<EventKind> EventOf(LeaseTransition t) {
  return kTransitions[static_cast<size_t>(t)].event;
}

bool IsLeaseEvent(EventKind kind) {
  for (const LeaseTransitionInfo& t : kTransitions) {
    if (t.event == kind) return true;
  }
  return false;
}

const char* EventCauseName(EventCause cause) {
  if (const std::optional<HoldEnd> end = HoldEndOf(cause)) return HoldEndLabel(*end);
  switch (cause) {
    case EventCause::kLockTimeout:
      return "lock_timeout";
    case EventCause::kNowaitFailed:
      return "nowait_failed";
    case EventCause::kLockNotAvailable:
      return "lock_not_available";
    case EventCause::kNone:
      return "";
  }
  return "";
}

const char* EventOutcomeName(EventOutcome outcome) {
  switch (outcome) {
    case EventOutcome::kNone:
      return "";
    case EventOutcome::kReleased:
      return "released";
    case EventOutcome::kRootEnded:
      return "root_ended";
    case EventOutcome::kWaitersLeft:
      return "waiters_left";
    case EventOutcome::kAcquired:
      return "acquired";
    case EventOutcome::kFailedToAcquire:
      return "failed_to_acquire";
  }
  return "";
}

std::span<const EventCause> EventCauses() { return kCauses; }
std::span<const EventOutcome> EventOutcomes() { return kOutcomes; }

}  // namespace pglock
