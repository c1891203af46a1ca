// The timeline on /locks and GET /api/v1/timeline (exporter/http/timeline_page.h): ?since=,
// escaping of hostile names, and the page's size with a thousand keys changing holder every poll.
#include "exporter/http/timeline_page.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "exporter/events/event_log.h"

namespace pglock {
namespace {

constexpr double kT0 = 1.8e9;

Identity Who(int pid, const std::string& application_name) {
  Identity id;
  id.pid = pid;
  id.application_name = application_name;
  return id;
}

// /locks with the timeline of a thousand busy keys (and a full event log beside it) stays under
// this; the timeline draws kTimelineRows rows at most.
constexpr size_t kPageBudgetBytes = 160 * 1024;

std::shared_ptr<TargetSnapshot> Snapshot(std::shared_ptr<Timeline> timeline) {
  auto snap = std::make_shared<TargetSnapshot>();
  snap->target = "main";
  snap->up = true;
  snap->state = "up";
  snap->view = std::make_shared<TargetView>();
  snap->timeline = std::move(timeline);
  return snap;
}

PollData OneHolder(double now, int pid, const std::string& app) {
  PollData d;
  d.now = now;
  AdvisoryLock l;
  l.key.datid = 5;
  l.key.objid = 7;
  l.pid = pid;
  d.locks = {l};
  Session s;
  s.pid = pid;
  s.datid = 5;
  s.datname = "app";
  s.application_name = app;
  d.sessions = {s};
  return d;
}

TEST(TimelineSince, DurationsDefaultAndErrors) {
  const auto since = [](const std::string& text) {
    double seconds = -1;
    EXPECT_TRUE(ParseTimelineSince(text, &seconds).ok()) << text;
    return seconds;
  };
  EXPECT_EQ(since(""), kTimelineDefaultSeconds);
  EXPECT_EQ(since("15m"), 900);
  EXPECT_EQ(since("6h"), 21600);
  EXPECT_EQ(since("90s"), 90);
  for (const char* bad : {"abc", "-1h", "0s", "10", "1h;drop"}) {
    double seconds = -1;
    const Status s = ParseTimelineSince(bad, &seconds);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.kind(), Status::Kind::kInvalidArgument) << bad;
    EXPECT_EQ(seconds, -1) << bad;
    EXPECT_NE(s.message().find("since: want a positive duration"), std::string::npos)
        << s.message();
  }
}

TEST(TimelinePage, HostileApplicationNamesAreEscapedInTheSvgAndTheJson) {
  auto timeline = std::make_shared<Timeline>();
  const std::string hostile = "<script>alert(1)</script>\"&'";
  for (int i = 0; i < 600; ++i) timeline->Observe(OneHolder(kT0 + i, 42, hostile), {}, nullptr);
  Event lost;
  lost.time = kT0 + 500;
  lost.kind = EventKind::kLockLost;
  lost.cause = CauseOf(HoldEnd::kTerminated);
  lost.datname = "app";
  lost.lock = "7";
  lost.previous = Who(42, hostile);
  timeline->AddMarkers({lost});
  const auto snap = Snapshot(timeline);
  const std::string page = RenderLocksPage({snap}, LocksFilter{});
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&amp;&#39;"), std::string::npos)
      << page;
  EXPECT_NE(page.find("<svg class=tl"), std::string::npos);
  EXPECT_NE(page.find("<line x1="), std::string::npos) << "a time axis";
  EXPECT_NE(page.find("waiting under its holder"), std::string::npos) << "a legend";
  EXPECT_NE(page.find("lock_lost, cause terminated"), std::string::npos);
  // Its event is not on the page (no event log here): the marker links to the lock's events.
  EXPECT_NE(page.find("<a href=\"/api/v1/events?target=main&amp;lock=7\">"), std::string::npos);
  const std::string json = RenderTimelineJson({snap}, LocksFilter{}, 3600);
  EXPECT_EQ(json.find("<script>alert(1)</script>\""), std::string::npos);
  EXPECT_NE(json.find("\"who\":\"<script>alert(1)</script>\\\"&'\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"kind\":\"lock_lost\""), std::string::npos);
}

TEST(TimelinePage, WindowLinksKeepTheFilterAndNarrowTheRows) {
  auto timeline = std::make_shared<Timeline>();
  for (int i = 0; i < 5; ++i) timeline->Observe(OneHolder(kT0 + i, 42, "a"), {}, nullptr);
  LocksFilter filter{"main", "7 & 8", 900};
  const std::string page = RenderLocksPage({Snapshot(timeline)}, filter);
  EXPECT_NE(page.find("<b>15m</b>"), std::string::npos);
  EXPECT_NE(page.find("href=\"/locks?since=1h&amp;target=main&amp;lock=7%20%26%208\""),
            std::string::npos);
  // "7 & 8" names no row: nothing drawn.
  EXPECT_NE(page.find("Nothing held, waited for or lost in this window."), std::string::npos);
}

// The exporter's own gap (a stop, then a start with the history kept) is drawn across the rows
// and given in the JSON; a holder seen on both sides of it keeps one bar.
TEST(TimelinePage, TheExportersGapIsDrawnAndInTheJson) {
  Timeline before;
  for (int i = 0; i < 5; ++i) before.Observe(OneHolder(kT0 + i, 42, "a"), {}, nullptr);
  auto timeline = std::make_shared<Timeline>();
  timeline->Restore(before.Save());
  timeline->Observe(OneHolder(kT0 + 100, 42, "a"), {}, nullptr);
  const auto snap = Snapshot(timeline);
  const std::string page = RenderLocksPage({snap}, {});
  EXPECT_NE(page.find("<rect class=\"gap\""), std::string::npos) << page;
  EXPECT_NE(page.find("the exporter was not running"), std::string::npos);
  const std::string json = RenderTimelineJson({snap}, {}, 3600);
  EXPECT_NE(json.find("\"exporter_gaps\":[{\"from\":1800000004.000,\"to\":1800000100.000}]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"holds\":[{\"start\":1800000000.000,\"end\":1800000100.000,\"open\":true"),
            std::string::npos)
      << json;
  // Without a gap, neither.
  const std::string plain = RenderLocksPage({Snapshot(std::make_shared<Timeline>())}, {});
  EXPECT_EQ(plain.find("not running"), std::string::npos);
}

// A thousand keys changing holder and waiter every poll, with losses, takeovers and hand-overs
// (two minutes of polls fill the history's bound as an hour would): the rows drawn are as full as
// the page draws them, and the page stays under its budget; its size and render time are printed.
TEST(TimelinePage, AThousandKeysKeepThePageUnderItsBudget) {
  constexpr int kKeys = 1000;
  auto timeline = std::make_shared<Timeline>();
  auto log = std::make_shared<EventLog>(1000);
  for (int p = 0; p < 120; ++p) {
    PollData d;
    d.now = kT0 + p;
    TargetView view;  // a new waiter behind every key at every poll
    std::vector<Event> events;
    for (int k = 0; k < kKeys; ++k) {
      const int pid = 100000 + (p % 2) * kKeys + k;
      AdvisoryLock l;
      l.key.datid = 5;
      l.key.objid = static_cast<uint32_t>(k);
      l.pid = pid;
      d.locks.push_back(l);
      Session s;
      s.pid = pid;
      s.datid = 5;
      s.datname = "app";
      s.application_name = "report-worker-" + std::to_string(pid);
      d.sessions.push_back(s);
      WaitEdge w;
      w.datname = "app";
      w.lock = std::to_string(k);
      w.waiter = Who(200000 + p * kKeys + k, "report-waiter-" + std::to_string(p));
      w.blocker = Who(pid, s.application_name);
      view.waits.push_back(w);
      // A loss, a takeover and a hand-over of each of the first 100 keys: their rows come first,
      // their events the newest 300 (the page shows 100 of them).
      if (p >= 117 && k < 100) {
        Event e;
        e.time = d.now;
        e.kind = p == 117   ? EventKind::kLockLost
                 : p == 118 ? EventKind::kLockTakeover
                            : EventKind::kLockHandover;
        e.cause = p == 117 ? CauseOf(HoldEnd::kTerminated) : EventCause::kNone;
        e.datname = "app";
        e.lock = std::to_string(k);
        e.previous = Who(pid - kKeys, "report-worker-" + std::to_string(pid - kKeys));
        e.current = Who(pid, s.application_name);
        events.push_back(std::move(e));
      }
    }
    timeline->AddMarkers(events);
    log->Append(events);
    timeline->Observe(d, view, nullptr);
  }
  auto snap = Snapshot(timeline);
  snap->events = log->Contents();
  const auto started = std::chrono::steady_clock::now();
  const std::string page = RenderLocksPage({snap}, LocksFilter{});
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  const size_t svg = page.find("</svg></div>") - page.find("<div class=tl>");
  std::printf("/locks with 1,000 keys: %zu bytes (timeline %zu), rendered in %.1f ms\n",
              page.size(), svg, ms);
  EXPECT_LT(page.size(), kPageBudgetBytes);
  EXPECT_NE(
      page.find(std::to_string(kKeys - kTimelineRows) + " more rows of " + std::to_string(kKeys)),
      std::string::npos);
  // Markers link to the rows of the events the page shows.
  EXPECT_NE(page.find("<a href=\"#ev-0-"), std::string::npos);
  EXPECT_NE(page.find("<tr id=\"ev-0-"), std::string::npos);

  // The JSON: kTimelineJsonItems intervals and markers, the rows with a loss first, the rest
  // counted as left out.
  const std::string json = RenderTimelineJson({snap}, LocksFilter{}, kTimelineDefaultSeconds);
  const auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = json.find(what); at != std::string::npos; at = json.find(what, at + 1)) ++n;
    return n;
  };
  const size_t items = count("{\"start\":") + count("{\"time\":");
  std::printf("/api/v1/timeline with 1,000 keys: %zu bytes, %zu items\n", json.size(), items);
  EXPECT_EQ(items, kTimelineJsonItems);
  EXPECT_EQ(json.find("\"rows_left_out\":0,"), std::string::npos);
  EXPECT_EQ(json.find("\"items_left_out\":0}"), std::string::npos);
  EXPECT_LT(json.find("\"kind\":\"lock_lost\""), json.find("\"attention\":1"));
  EXPECT_LT(json.size(), 2u * 1024 * 1024);
}

}  // namespace
}  // namespace pglock
