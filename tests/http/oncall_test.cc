// Pure parts of the on-call view: the wait forest, the Markdown converter, the runbook table, the
// page cache and the event log's JSON and text forms.
#include "exporter/http/oncall.h"

#include <gtest/gtest.h>

#include "exporter/events/event_log.h"
#include "exporter/http/markdown.h"
#include "exporter/http/page_cache.h"
#include "exporter/http/runbooks.h"

namespace pglock {
namespace {

LockWaitEdge Edge(int waiter, int blocker, double seconds) {
  LockWaitEdge e;
  e.locktype = "advisory";
  e.lock = "k";
  e.waiter.id.pid = waiter;
  e.blocker.id.pid = blocker;
  e.seconds = seconds;
  return e;
}

TEST(WaitForest, RootsAreBlockersThatWaitForNothing) {
  // 1 blocks 2 and 3; 3 blocks 4. 9 <-> 8 is a cycle without a root.
  const auto forest = BuildWaitForest({Edge(2, 1, 5), Edge(3, 1, 4), Edge(4, 3, 1)});
  ASSERT_EQ(forest.size(), 1u);
  EXPECT_EQ(forest[0].who.id.pid, 1);
  ASSERT_EQ(forest[0].waiters.size(), 2u);
  EXPECT_EQ(forest[0].waiters[1].who.id.pid, 3);
  ASSERT_EQ(forest[0].waiters[1].waiters.size(), 1u);
  EXPECT_EQ(forest[0].waiters[1].waiters[0].who.id.pid, 4);
  const auto cycle = BuildWaitForest({Edge(9, 8, 1), Edge(8, 9, 1)});
  ASSERT_EQ(cycle.size(), 1u);
  EXPECT_EQ(cycle[0].waiters.size(), 1u);
  EXPECT_TRUE(cycle[0].waiters[0].waiters.empty());
}

TEST(WaitForest, RootsCarryTheirVerdictIntoThePageAndTheJson) {
  auto snap = std::make_shared<TargetSnapshot>();
  snap->target = "main";
  snap->up = true;
  auto view = std::make_shared<TargetView>();
  view->lock_waits = {Edge(2, 1, 5)};
  BlockingRoot root;
  root.root.id.pid = 1;
  root.blocked_pids = {2};
  root.verdict.action = VerdictAction::kTerminate;
  root.verdict.pid = 1;
  root.verdict.command = "SELECT pg_terminate_backend(1)";
  root.verdict.frees = 1;
  root.verdict.cost = "its transaction <rolls> back";
  root.verdict.dropped_locks = {"sweep"};
  view->blocking_roots = {root};
  snap->view = view;
  auto episode = std::make_shared<Event>();
  episode->kind = "blocking_episode";
  episode->outcome = "waiters_left";
  episode->previous.pid = 1;
  episode->peak_blocked = 4;
  snap->events = std::make_shared<const EventList>(EventList{episode});
  const std::string html = RenderLocksPage({snap}, {});
  EXPECT_NE(html.find("<code class=cmd>SELECT pg_terminate_backend(1)</code>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("its transaction &lt;rolls&gt; back"), std::string::npos);
  EXPECT_NE(html.find("Recent blocking episodes"), std::string::npos);
  EXPECT_NE(html.find("waiters_left"), std::string::npos);
  const std::string json = RenderLocksJson({snap}, {});
  EXPECT_NE(json.find("\"verdict\":{\"action\":\"terminate\",\"pid\":1,\"command\":"
                      "\"SELECT pg_terminate_backend(1)\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"dropped_locks\":[\"sweep\"]"), std::string::npos);
  EXPECT_NE(EventJson(*episode).find("\"outcome\":\"waiters_left\""), std::string::npos);
  EXPECT_NE(EventJson(*episode).find("\"peak_blocked\":4"), std::string::npos);
}

TEST(Markdown, EscapesEverythingAndKeepsOnlySafeLinks) {
  const std::string html = MarkdownToHtml(
      "# T <x>\n\ntext with `<code>` and **bold** and [next](Other.md#a) "
      "[bad](javascript:alert(1))\n\n- one\n- two\n\n| a | b |\n|---|---|\n| `x|y` | <i> |\n\n"
      "```\n<script>\n```\n");
  EXPECT_NE(html.find("<h1>T &lt;x&gt;</h1>"), std::string::npos) << html;
  EXPECT_NE(html.find("<code>&lt;code&gt;</code>"), std::string::npos);
  EXPECT_NE(html.find("<strong>bold</strong>"), std::string::npos);
  EXPECT_NE(html.find("<a href=\"/runbooks/Other#a\">next</a>"), std::string::npos);
  EXPECT_EQ(html.find("javascript"), std::string::npos);
  EXPECT_NE(html.find("<ul>\n<li>one</li>\n<li>two</li>\n</ul>"), std::string::npos);
  EXPECT_NE(html.find("<td><code>x|y</code></td><td>&lt;i&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("<pre><code>&lt;script&gt;\n</code></pre>"), std::string::npos);
}

TEST(Runbooks, EveryAlertHasOneAndNamesAreExact) {
  EXPECT_NE(FindRunbook("PglockAdvisoryLockLost"), nullptr);
  EXPECT_NE(FindRunbook("README"), nullptr);
  EXPECT_EQ(FindRunbook("../README"), nullptr);
  EXPECT_EQ(FindRunbook("PglockAdvisoryLockLost.md"), nullptr);
  EXPECT_EQ(FindRunbook(""), nullptr);
  EXPECT_GE(Runbooks().size(), 15u);
}

TEST(PageCache, RendersOncePerSnapshotSetAndVariant) {
  PageCache cache;
  auto a = std::make_shared<const TargetSnapshot>();
  int renders = 0;
  const auto render = [&] { return std::to_string(++renders); };
  EXPECT_EQ(*cache.Get({a}, "x", render), "1");
  EXPECT_EQ(*cache.Get({a}, "x", render), "1");
  EXPECT_EQ(*cache.Get({a}, "y", render), "2");
  auto b = std::make_shared<const TargetSnapshot>();
  EXPECT_EQ(*cache.Get({b}, "x", render), "3");
  EXPECT_EQ(cache.renders(), 3u);
}

Event At(double time) {
  Event e;
  e.time = time;
  return e;
}

TEST(EventLog, BoundedOldestFirstAndSameListUntilAppend) {
  EventLog log(2);
  log.Append({At(1), At(2), At(3)});
  const auto c = log.Contents();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[0]->time, 2);
  EXPECT_EQ(log.Contents(), c);
  log.Append({At(4)});
  EXPECT_NE(log.Contents(), c);
  EXPECT_EQ(log.Contents()->back()->time, 4);
}

TEST(EventLog, AnyBytesGiveValidJsonAndOneTextLine) {
  Event e;
  e.kind = "lock_lost";
  e.lock = std::string("a\"b\\\n\x01\xff\xfe", 8);
  e.previous.pid = 7;
  e.previous.application_name = "app name";
  const std::string json = EventJson(e);
  EXPECT_NE(json.find("\"lock\":\"a\\\"b\\\\\\n\\u0001\xEF\xBF\xBD\xEF\xBF\xBD\""),
            std::string::npos)
      << json;
  const std::string text = EventText(e);
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_NE(text.find("previous_application_name=\"app name\""), std::string::npos);
}

}  // namespace
}  // namespace pglock
