// The on-call view: GET /locks (HTML readable without JavaScript, refreshing itself,
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
  double since = 3600;  // ?since= of the page's timeline, in seconds (timeline_page.h)
};

// One party in the wait forest with the sessions waiting for it: a client session, a background
// process (who.backend_type) or a prepared transaction (pid 0, state "prepared", who.gid). A root
// blocks and waits for nothing (or, in a cycle, is the first blocker met); each child waits for its
// parent: for `mode` of a lock of `locktype` on `relation` (schema.table, else the OID, else "")
// or on the advisory lock `lock`.
struct WaitNode {
  LockParticipant who;
  std::string locktype;  // "" for a root
  std::string mode;
  std::string relation;
  std::string lock;
  double seconds = 0;   // how long it has waited
  int64_t blocked = 0;  // roots: sessions blocked through it, directly or not; 0 when not known
  std::vector<WaitNode> waiters;
  const Verdict* verdict = nullptr;  // roots: what to do (borrowed from the snapshot's roots)
};

// The forest of waiter -> blocker edges of every lock type (TargetView::lock_waits); `roots`
// give the roots' counts of blocked sessions.
std::vector<WaitNode> BuildWaitForest(const std::vector<LockWaitEdge>& edges,
                                      const std::vector<BlockingRoot>& roots = {});

// Leases worth a look: expired, expiring within this many seconds, or held longer than
// kLeaseHeldTooLongSeconds (PglockLeaseHeldTooLong's threshold).
inline constexpr double kLeaseExpiringSeconds = 60;
inline constexpr double kLeaseHeldTooLongSeconds = 3600;
// Newest events shown per target on the HTML page (the JSON API gives the whole log).
inline constexpr size_t kPageEvents = 100;
inline constexpr int kPageRefreshSeconds = 10;
// Newest blocking episodes and deadlocks shown per target in "Recent blocking episodes".
inline constexpr size_t kPageEpisodes = 20;
// Newest lock waits, lock timeouts and deadlocks from the server's log shown per target in
// "Between polls" (the page and /api/v1/locks' between_polls).
inline constexpr size_t kPageLogged = 20;
// Rows of the pooled session locks and names of a verdict's dropped locks on /locks and in
// /api/v1/locks, the most telling first; the totals are stated. A leaked pool connection can
// hold thousands: the page stays small and the incident readable.
inline constexpr size_t kPagePooledLocks = 20;
inline constexpr size_t kPageDroppedLocks = 20;
// Leases needing a look (expired first, then held too long, then expiring; oldest first).
inline constexpr size_t kPageLeases = 20;

// A lock table this full (PglockLockTableFilling's ratio) is shown with its filling sessions.
inline constexpr double kLockTableFillingRatio = 0.7;

std::string RenderLocksPage(const SnapshotList& snapshots, const LocksFilter& filter);
std::string RenderLocksJson(const SnapshotList& snapshots, const LocksFilter& filter);
std::string RenderEventsJson(const SnapshotList& snapshots, const LocksFilter& filter);

}  // namespace pglock
