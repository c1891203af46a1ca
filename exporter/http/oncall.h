// The on-call view (SPEC 4.10): GET /locks (HTML readable without JavaScript, refreshing itself,
// usable on a phone), GET /api/v1/locks and GET /api/v1/events (JSON), all rendered from the
// latest target snapshots and their event logs, never from the database. Every string from the
// database is HTML- or JSON-escaped, whatever its bytes. Pure functions; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exporter/snapshot/snapshot.h"

namespace pglock {

using SnapshotList = std::vector<std::shared_ptr<const TargetSnapshot>>;

// ?target= and ?lock= of a request: empty matches everything. `lock` matches a lock name or
// rendered key, and a lease name.
struct LocksFilter {
  std::string target;
  std::string lock;
};

// One session in the wait forest with the sessions waiting for it. A root blocks and waits for
// nothing; each child waits (`lock`, `seconds`) for its parent.
struct WaitNode {
  Identity session;
  std::string datname;
  std::string lock;    // what this session waits for; "" for a root
  double seconds = 0;  // how long it has waited
  std::vector<WaitNode> waiters;
};

// The forest of waiter -> blocker edges: roots are blockers that wait for nothing (or, in a
// cycle, the first blocker met). Other lock types' edges (issue 12) can be passed as WaitEdges
// with `lock` describing the relation and mode.
std::vector<WaitNode> BuildWaitForest(const std::vector<WaitEdge>& edges);

// Leases worth a look: expired, expiring within this many seconds, or held longer than
// kLeaseHeldTooLongSeconds (PglockLeaseHeldTooLong's threshold).
inline constexpr double kLeaseExpiringSeconds = 60;
inline constexpr double kLeaseHeldTooLongSeconds = 3600;
// Newest events shown per target on the HTML page (the JSON API gives the whole log).
inline constexpr size_t kPageEvents = 100;
inline constexpr int kPageRefreshSeconds = 10;

std::string RenderLocksPage(const SnapshotList& snapshots, const LocksFilter& filter);
std::string RenderLocksJson(const SnapshotList& snapshots, const LocksFilter& filter);
std::string RenderEventsJson(const SnapshotList& snapshots, const LocksFilter& filter);

}  // namespace pglock
