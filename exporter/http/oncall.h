// The on-call view: GET /locks (HTML readable without JavaScript, refreshing itself,
// usable on a phone), GET /api/v1/locks and GET /api/v1/events (JSON), all rendered from the
// latest target snapshots and their event logs, never from the database. Every string from the
// database is HTML- or JSON-escaped, whatever its bytes. Pure functions; thread-safe.
//
// This unit writes the page's frame and the JSON documents. What each target shows once the
// filter narrowed it is chosen in oncall_select.h, its wait forest built in wait_forest.h; its HTML
// is written by oncall_html.h (with the event sections of oncall_events_html.h and the timeline
// of timeline_page.h), its JSON by oncall_json.h; page_text.h has the formatters they share.
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
// Rows of the pooled session locks on /locks and in /api/v1/locks, the most telling first; the
// totals are stated (a verdict's dropped locks: HeldLockList::kListed). A leaked pool connection
// can hold thousands: the page stays small and the incident readable.
inline constexpr size_t kPagePooledLocks = 20;
// Leases needing a look (expired first, then held too long, then expiring; oldest first).
inline constexpr size_t kPageLeases = 20;

// A lock table this full (PglockLockTableFilling's ratio) is shown with its filling sessions.
inline constexpr double kLockTableFillingRatio = 0.7;

std::string RenderLocksPage(const SnapshotList& snapshots, const LocksFilter& filter);
std::string RenderLocksJson(const SnapshotList& snapshots, const LocksFilter& filter);
std::string RenderEventsJson(const SnapshotList& snapshots, const LocksFilter& filter);

}  // namespace pglock
