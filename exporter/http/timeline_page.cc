#include "exporter/http/timeline_page.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "exporter/http/page_text.h"
#include "exporter/util/duration.h"

namespace pglock {
namespace {

// SVG geometry, in CSS pixels (x is in percent of the width, so the picture fits any screen).
constexpr int kAxisHeight = 18;
constexpr int kLabelHeight = 15;
constexpr int kHoldHeight = 15;
constexpr int kWaitHeight = 11;
constexpr int kRowGap = 6;
constexpr double kMinBarPercent = 0.4;
constexpr double kTextBarPercent = 5;  // a bar this wide carries its holder as text (clipped)

std::string WhoText(int pid, const std::string& who) {
  std::string o = AppName(who);
  if (pid != 0) o += " pid " + std::to_string(pid);
  return o;
}

std::string RowTitle(const TimelineRow& r) {
  switch (r.kind) {
    case TimelineRowKind::kLock:
      return "lock " + r.name + " (" + r.scope + ")";
    case TimelineRowKind::kLease:
      return "lease " + r.name + " (" + r.scope + ")";
    case TimelineRowKind::kRowLocks:
      return "row locks of " + r.scope;
    case TimelineRowKind::kRoot:
      return "root blocker " + r.name + " (" + r.scope + ")";
    case TimelineRowKind::kDeadlocks:
      return "deadlocks (" + r.scope + ")";
  }
  return r.name;
}

bool RowMatches(const TimelineRow& r, const std::string& lock) {
  return lock.empty() || r.name == lock ||
         (r.kind == TimelineRowKind::kRowLocks && r.scope == lock);
}

std::string MarkerTitle(const TimelineMarker& m) {
  const std::string kind = MarkerKindName(m);
  const std::string cause = EventCauseName(m.cause);
  std::string t = Clock(m.time) + " " + kind;
  if (m.outcome != EventOutcome::kNone) t += std::string(" ") + EventOutcomeName(m.outcome);
  if (!cause.empty() && cause != kind) t += ", cause " + cause;
  if (m.evidence != EndEvidence::kNone) t += std::string(" (") + EndEvidenceLabel(m.evidence) + ")";
  if (m.previous_pid != 0 || !m.previous.empty())
    t += "; before: " + WhoText(m.previous_pid, m.previous);
  if (m.current_pid != 0 || !m.current.empty())
    t += "; after: " + WhoText(m.current_pid, m.current);
  if (m.duration > 0) t += "; lasted " + Span(m.duration);
  if (m.count > 1) t += "; " + std::to_string(m.count) + " locks";
  return t;
}

template <typename T>
std::vector<T> Newest(const std::vector<T>& items, size_t n) {
  const size_t skip = items.size() > n ? items.size() - n : 0;
  return std::vector<T>(items.begin() + static_cast<std::ptrdiff_t>(skip), items.end());
}

struct Scale {
  double from, to;
  double X(double t) const {
    if (to <= from) return 100;
    return std::clamp((t - from) / (to - from) * 100, 0.0, 100.0);
  }
};

void BarSvg(const TimelineInterval& i, const Scale& s, int y, int height, std::string* o) {
  const double x = s.X(i.start);
  const double w = std::max(kMinBarPercent, s.X(i.end) - x);
  std::string title = WhoText(i.pid, i.who);
  if (i.wait) title += " waited on pid " + std::to_string(i.blocker_pid);
  if (i.expired) title += ": its lease had expired";
  if (!i.detail.empty()) title += " (" + i.detail.str() + ")";
  title += ", " + Clock(i.start) + "–" + (i.open ? std::string("now") : Clock(i.end)) + ", " +
           Span(i.end - i.start);
  *o += "<svg x=\"" + Pct(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + Pct(w) +
        "\" height=\"" + std::to_string(height) + "\" class=\"" +
        (i.expired ? "x"
         : i.wait  ? "w"
                   : "h") +
        "\"><title>" + H(title) + "</title><rect width=\"100%\" height=\"100%\"/>";
  if (w >= kTextBarPercent && !i.wait) {
    *o += "<text x=\"3\" y=\"11\">" + H(WhoText(i.pid, i.who)) + "</text>";
  }
  *o += "</svg>";
}

// A marker links to its event's row on the page, else to the events of its lock or lease (or of
// its target) in /api/v1/events.
void MarkerSvg(const TimelineMarker& m, const Scale& s, int y, const std::string& target,
               const MarkerHref& href, std::string* o) {
  std::string link = href ? href(m) : "";
  if (link.empty()) {
    link = "/api/v1/events?target=" + UrlEncode(target);
    const TimelineRow& r = *m.row;
    if (r.kind == TimelineRowKind::kLock || r.kind == TimelineRowKind::kLease) {
      link += "&lock=" + UrlEncode(r.name);
    }
  }
  *o += "<a href=\"" + H(link) + "\">";
  *o += "<svg x=\"" + Pct(s.X(m.time)) + "\" y=\"" + std::to_string(y) +
        "\" width=\"1\" height=\"1\" overflow=\"visible\" class=\"m" +
        (TimelineAlarming(m) ? " bad" : "") + "\"><title>" + H(MarkerTitle(m)) +
        "</title><path d=\"M-6,0h12l-6,9z\"/></svg>";
  *o += "</a>";
}

void AxisSvg(const Scale& s, std::string* o) {
  const double span = s.to - s.from;
  double step = 10;
  for (double nice : {10.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0}) {
    step = nice;
    if (span / nice <= 6) break;
  }
  for (double t = std::ceil(s.from / step) * step; t <= s.to; t += step) {
    const std::string x = Pct(s.X(t));
    *o += "<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"12\" y2=\"100%\" class=\"tick\"/>";
    if (s.X(t) < 94)
      *o += "<text x=\"" + x + "\" y=\"11\">" + (step < 60 ? Clock(t) : Clock(t).substr(0, 5)) +
            "</text>";
  }
}

// The exporter's own gaps (stopped, then started again) across every row: nothing was observed
// there, and a bar drawn through one only says that its holder was there on both sides.
void GapsSvg(const std::vector<TimelineGap>& gaps, const Scale& s, std::string* o) {
  for (const TimelineGap& g : gaps) {
    const double x = s.X(g.from);
    const double w = std::max(kMinBarPercent, s.X(g.to) - x);
    *o += "<rect class=\"gap\" x=\"" + Pct(x) + "\" y=\"12\" width=\"" + Pct(w) +
          "\" height=\"100%\"><title>" +
          H("the exporter was not running, " + Clock(g.from) + "–" + Clock(g.to) + " (" +
            Span(g.to - g.from) + "): nothing observed") +
          "</title></rect>";
  }
}

// One row: its label, the holders' bars, the waits under them, the markers on the bars.
int RowSvg(const TimelineRowWindow& r, const Scale& s, int y, const std::string& target,
           const MarkerHref& href, std::string* o) {
  std::string label = RowTitle(*r.row);
  const size_t more =
      (r.holds.size() > kTimelineRowHolds ? r.holds.size() - kTimelineRowHolds : 0) +
      (r.waits.size() > kTimelineRowWaits ? r.waits.size() - kTimelineRowWaits : 0) +
      (r.markers.size() > kTimelineRowMarkers ? r.markers.size() - kTimelineRowMarkers : 0);
  if (more > 0) label += " · " + std::to_string(more) + " earlier not drawn";
  *o += "<text x=\"0\" y=\"" + std::to_string(y + 11) + "\" class=\"label" +
        (r.attention == 2 ? " bad" : "") + "\">" + H(label) + "</text>";
  y += kLabelHeight;
  for (const TimelineInterval& i : Newest(r.holds, kTimelineRowHolds)) {
    BarSvg(i, s, y, kHoldHeight, o);
  }
  const int markers_y = y;
  y += kHoldHeight;
  if (!r.waits.empty()) {
    for (const TimelineInterval& i : Newest(r.waits, kTimelineRowWaits)) {
      BarSvg(i, s, y + 1, kWaitHeight - 2, o);
    }
    y += kWaitHeight;
  }
  for (const TimelineMarker& m : Newest(r.markers, kTimelineRowMarkers)) {
    MarkerSvg(m, s, markers_y - 3, target, href, o);
  }
  return y + kRowGap;
}

void WindowLinks(const TargetSnapshot& snap, const LocksFilter& filter, double since,
                 std::string* o) {
  *o += "<p class=note>window:";
  for (const auto& [text, seconds] :
       {std::pair<const char*, double>{"15m", 900}, {"1h", 3600}, {"6h", 21600}}) {
    if (std::fabs(since - seconds) < 0.5) {
      *o += std::string(" <b>") + text + "</b>";
      continue;
    }
    std::string url = "/locks?since=" + std::string(text);
    if (!filter.target.empty()) url += "&target=" + UrlEncode(filter.target);
    if (!filter.lock.empty()) url += "&lock=" + UrlEncode(filter.lock);
    *o += " <a href=\"" + H(url) + "\">" + text + "</a>";
  }
  *o += " &middot; JSON: <a href=\"/api/v1/timeline?target=" + H(UrlEncode(snap.target)) +
        "&amp;since=" + H(FormatDuration(Duration(static_cast<int64_t>(since * 1000)))) +
        "\">timeline</a></p>\n";
}

std::string IntervalJson(const TimelineInterval& i) {
  std::string o = "{\"start\":" + Num(i.start) + ",\"end\":" + Num(i.end) +
                  ",\"open\":" + (i.open ? "true" : "false") + ",\"pid\":" + std::to_string(i.pid) +
                  ",\"who\":" + J(i.who) + ",\"detail\":" + J(i.detail);
  if (i.wait) o += ",\"blocker_pid\":" + std::to_string(i.blocker_pid);
  if (i.expired) o += ",\"expired\":true";
  return o + "}";
}

std::string MarkerJson(const TimelineMarker& m) {
  return "{\"time\":" + Num(m.time) + ",\"kind\":" + J(MarkerKindName(m)) +
         ",\"cause\":" + J(EventCauseName(m.cause)) +
         ",\"evidence\":" + J(EndEvidenceLabel(m.evidence)) +
         ",\"outcome\":" + J(EventOutcomeName(m.outcome)) + ",\"duration\":" + Num(m.duration) +
         ",\"count\":" + std::to_string(m.count) +
         ",\"previous\":{\"pid\":" + std::to_string(m.previous_pid) + ",\"who\":" + J(m.previous) +
         "},\"current\":{\"pid\":" + std::to_string(m.current_pid) + ",\"who\":" + J(m.current) +
         "},\"event\":" +
         (!m.event_kind ? std::string("null")
                        : "{\"kind\":" + J(EventKindName(*m.event_kind)) +
                              ",\"time\":" + Num(m.event_time) + "}") +
         "}";
}

}  // namespace

const char kTimelineStyle[] =
    "div.tl{overflow-x:auto;max-width:100%}svg.tl{width:100%;min-width:320px;font-size:11px;"
    "font-family:sans-serif;background:#fafafa}svg.tl .tick{stroke:#ddd}svg.tl text{fill:#333}"
    "svg.tl .label{font-weight:bold}svg.tl .label.bad{fill:#b00}svg.h rect{fill:#6a9fd4}"
    "svg.h text{fill:#fff}svg.w rect{fill:#e8a33d}svg.x rect{fill:#bbb}"
    "svg.m path{fill:#456}svg.m.bad path{fill:#c00}"
    "tr:target{background:#ffe58a}span.key{display:inline-block;width:1.2em;height:.7em}"
    "span.key.h{background:#6a9fd4}span.key.w{background:#e8a33d}span.key.x{background:#bbb}"
    "span.key.bad{color:#c00;height:auto}span.key.ev{color:#456;height:auto}"
    "svg.tl rect.gap{fill:#fff;fill-opacity:.7;stroke:#999;stroke-dasharray:3 3}"
    "span.key.gap{background:#fff;border:1px dashed #999}";

Status ParseTimelineSince(const std::string& text, double* seconds) {
  if (text.empty()) {
    *seconds = kTimelineDefaultSeconds;
    return Status::Ok();
  }
  Duration d{0};
  const Status parsed = ParseDuration(text, &d);
  if (!parsed.ok() || d.count() <= 0) {
    return Status::InvalidArgument("since: want a positive duration such as 15m, 1h or 6h, got \"" +
                                   text + "\"" +
                                   (parsed.ok() ? "" : " (" + parsed.message() + ")"));
  }
  *seconds = static_cast<double>(d.count()) / 1000;
  return Status::Ok();
}

void TimelineHtml(const TargetSnapshot& snap, const LocksFilter& filter, double since,
                  const MarkerHref& href, std::string* o) {
  *o += "<h3>Timeline</h3>\n";
  WindowLinks(snap, filter, since, o);
  if (!snap.timeline) {
    *o += "<p>No history yet.</p>\n";
    return;
  }
  const TimelineWindow w = snap.timeline->Query(since);
  std::vector<const TimelineRowWindow*> rows;
  for (const TimelineRowWindow& r : w.rows) {
    if (RowMatches(*r.row, filter.lock)) rows.push_back(&r);
  }
  if (w.from > w.now - since + 1) {
    *o += "<p class=note>History kept since " + Clock(w.kept_since) + " UTC only.</p>\n";
  }
  if (w.dropped_intervals + w.dropped_markers > 0) {
    *o += "<p class=note>Dropped so far, the oldest first: " + std::to_string(w.dropped_intervals) +
          " intervals (at most " + std::to_string(kOpenIntervals) + " open and " +
          std::to_string(kClosedIntervals) + " closed are kept), " +
          std::to_string(w.dropped_markers) + " markers (" + std::to_string(kMarkersPerKind) +
          " per event kind).</p>\n";
  }
  if (w.untracked > 0) {
    *o += "<p class=note>" + std::to_string(w.untracked) +
          " holders and waits of the latest poll are not drawn: at most " +
          std::to_string(kOpenIntervals) + " are followed at once.</p>\n";
  }
  if (rows.empty()) {
    *o += "<p>Nothing held, waited for or lost in this window.</p>\n";
    return;
  }
  const Scale s{w.from, w.now};
  std::string body;
  int y = kAxisHeight;
  for (size_t i = 0; i < rows.size() && i < kTimelineRows; ++i)
    y = RowSvg(*rows[i], s, y, snap.target, href, &body);
  *o += "<div class=tl><svg class=tl height=\"" + std::to_string(y) +
        "\" role=img aria-label=\"holders, waits and events from " + Clock(w.from) + " to " +
        Clock(w.now) + " UTC\">";
  AxisSvg(s, o);
  *o += body;
  GapsSvg(w.gaps, s, o);
  *o += "</svg></div>\n";
  // What the colours mean, in the page's own classes (no image, no script).
  *o +=
      "<p class=note><span class=\"key h\"></span> held &middot; <span class=\"key w\"></span> "
      "waiting under its holder &middot; <span class=\"key x\"></span> lease expired under its "
      "holder &middot; <span class=\"key bad\">&#9660;</span> a loss, takeover, overlap, "
      "inheritance, expiry, deadlock or timeout &middot; <span class=\"key ev\">&#9660;</span> "
      "other events (hover for details, click for the event)" +
      std::string(w.gaps.empty() ? ""
                                 : " &middot; <span class=\"key gap\"></span> the exporter was "
                                   "not running (nothing observed)") +
      "</p>\n";
  if (rows.size() > kTimelineRows) {
    *o += "<p class=note>" + std::to_string(rows.size() - kTimelineRows) + " more rows of " +
          std::to_string(rows.size()) + " not drawn (all of them: the JSON).</p>\n";
  }
}

std::string RenderTimelineJson(const SnapshotList& snapshots, const LocksFilter& filter,
                               double since) {
  std::string o = "{\"since_seconds\":" + Num(since) +
                  ",\"limits\":{\"open_intervals\":" + std::to_string(kOpenIntervals) +
                  ",\"closed_intervals\":" + std::to_string(kClosedIntervals) +
                  ",\"markers_per_kind\":" + std::to_string(kMarkersPerKind) +
                  ",\"json_items\":" + std::to_string(kTimelineJsonItems) + "},\"targets\":[";
  bool first = true;
  for (const auto& snap : snapshots) {
    if (!snap || (!filter.target.empty() && snap->target != filter.target)) continue;
    const TimelineWindow w = snap->timeline ? snap->timeline->Query(since) : TimelineWindow{};
    o += std::string(first ? "" : ",") + "{\"target\":" + J(snap->target) +
         ",\"now\":" + Num(w.now) + ",\"from\":" + Num(w.from) +
         ",\"kept_since\":" + Num(w.kept_since) +
         ",\"dropped_intervals\":" + std::to_string(w.dropped_intervals) +
         ",\"dropped_markers\":" + std::to_string(w.dropped_markers) +
         ",\"untracked\":" + std::to_string(w.untracked) + ",\"exporter_gaps\":";
    JsonArray(
        w.gaps,
        [&](const TimelineGap& g) {
          o += "{\"from\":" + Num(g.from) + ",\"to\":" + Num(g.to) + "}";
        },
        &o);
    o += ",\"rows\":[";
    first = false;
    bool first_row = true;
    size_t budget = kTimelineJsonItems, rows_left_out = 0, items_left_out = 0;
    for (const TimelineRowWindow& r : w.rows) {
      if (!RowMatches(*r.row, filter.lock)) continue;
      const size_t items = r.holds.size() + r.waits.size() + r.markers.size();
      if (budget == 0) {
        ++rows_left_out;
        items_left_out += items;
        continue;
      }
      const std::vector<TimelineMarker> markers = Newest(r.markers, budget);
      const std::vector<TimelineInterval> waits = Newest(r.waits, budget - markers.size());
      const std::vector<TimelineInterval> holds =
          Newest(r.holds, budget - markers.size() - waits.size());
      const size_t kept = markers.size() + waits.size() + holds.size();
      budget -= kept;
      items_left_out += items - kept;
      o += std::string(first_row ? "" : ",") + "{\"kind\":" + J(TimelineRowKindLabel(r.row->kind)) +
           ",\"scope\":" + J(r.row->scope) + ",\"name\":" + J(r.row->name) +
           ",\"attention\":" + std::to_string(r.attention) +
           ",\"left_out\":" + std::to_string(items - kept) + ",\"holds\":";
      first_row = false;
      const auto interval = [&](const TimelineInterval& i) { o += IntervalJson(i); };
      JsonArray(holds, interval, &o);
      o += ",\"waits\":";
      JsonArray(waits, interval, &o);
      o += ",\"markers\":";
      JsonArray(
          markers, [&](const TimelineMarker& m) { o += MarkerJson(m); }, &o);
      o += "}";
    }
    o += "],\"rows_left_out\":" + std::to_string(rows_left_out) +
         ",\"items_left_out\":" + std::to_string(items_left_out);
    o += "}";
  }
  return o + "]}\n";
}

}  // namespace pglock
