// The timeline of a target (exporter/events/timeline.h) as the on-call view shows it: a
// server-side SVG on /locks (no script, no external asset) and GET /api/v1/timeline (JSON).
// Rendered from the history the poller published, never from the database. Every string from the
// database is HTML- or JSON-escaped. Pure functions; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "exporter/events/timeline.h"
#include "exporter/http/oncall.h"
#include "exporter/util/status.h"

namespace pglock {

inline constexpr double kTimelineDefaultSeconds = 3600;
// The page draws this many rows, the most telling first (the JSON has more), and per row the
// newest holds, waits and markers up to these counts: the page stays small with thousands of keys.
inline constexpr size_t kTimelineRows = 16;
inline constexpr size_t kTimelineRowHolds = 10;
inline constexpr size_t kTimelineRowWaits = 6;
inline constexpr size_t kTimelineRowMarkers = 6;
// The JSON gives each target at most this many intervals and markers, rows in the page's order,
// each row its newest markers, then waits, then holds, until they are spent: a whole history of
// 25,000 intervals with long names would be megabytes a request. What is left out is counted.
inline constexpr size_t kTimelineJsonItems = 5000;

// ?since= of /locks and /api/v1/timeline: "" is kTimelineDefaultSeconds, else a positive
// duration ("15m", "1h", "6h", "90s"), in *seconds. InvalidArgument on anything else.
Status ParseTimelineSince(const std::string& text, double* seconds);

// The CSS of the timeline, for the page's <style>.
extern const char kTimelineStyle[];

// Where a marker's event is shown on the page ("#ev-..."), or "" when it is not.
using MarkerHref = std::function<std::string(const TimelineMarker&)>;

// The timeline section of one target on /locks: the window links (keeping `filter`), the SVG
// and what was dropped. `filter.lock`, when set, keeps the rows of that lock or lease.
void TimelineHtml(const TargetSnapshot& snap, const LocksFilter& filter, double since,
                  const MarkerHref& href, std::string* o);

// GET /api/v1/timeline: every target that matches filter.target, the rows of the window up to
// kTimelineJsonItems.
std::string RenderTimelineJson(const SnapshotList& snapshots, const LocksFilter& filter,
                               double since);

}  // namespace pglock
