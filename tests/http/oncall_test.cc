// Pure parts of the on-call view: the wait forest, the Markdown converter, the runbook table, the
// page cache and the event log's JSON and text forms.
#include "exporter/http/oncall.h"

#include <gtest/gtest.h>

#include <memory>

#include "exporter/collectors/verdict_series.h"
#include "exporter/events/event_log.h"
#include "exporter/http/markdown.h"
#include "exporter/http/page_cache.h"
#include "exporter/http/page_text.h"
#include "exporter/http/runbooks.h"
#include "exporter/http/wait_forest.h"
#include "exporter/snapshot/verdict.h"
#include "tests/support/metrics_text.h"
#include "tests/support/snapshot_at_address.h"

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
  root.verdict.dropped_locks.Add([] { return "sweep"; });
  view->blocking_roots = {root};
  snap->view = view;
  auto episode = std::make_shared<Event>();
  episode->kind = EventKind::kBlockingEpisode;
  episode->outcome = EventOutcome::kWaitersLeft;
  episode->previous.pid = 1;
  episode->peak_blocked = 4;
  snap->events = EventList::Of({episode});
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
  EXPECT_NE(json.find("\"dropped_locks\":[\"sweep\"],\"dropped_locks_total\":1,"),
            std::string::npos);
  EXPECT_NE(EventJson(*episode).find("\"outcome\":\"waiters_left\""), std::string::npos);
  EXPECT_NE(EventJson(*episode).find("\"peak_blocked\":4"), std::string::npos);
}

// The text of `html` from the first `start` to the next `end`, without the code tags of its
// commands: still HTML-escaped.
std::string TextBetween(const std::string& html, const std::string& start, const std::string& end) {
  const size_t at = html.find(start);
  if (at == std::string::npos) return "(no " + start + ")";
  const size_t from = at + start.size();
  std::string o = html.substr(from, html.find(end, from) - from);
  for (const std::string tag : {"<code class=cmd>", "</code>"}) {
    for (size_t t; (t = o.find(tag)) != std::string::npos;) o.erase(t, tag.size());
  }
  return o;
}

// The words after "Do:" in the first verdict box of a page.
std::string DoText(const std::string& html) { return TextBetween(html, "<b>Do:</b> ", "<br>"); }

// The advice label of the verdict series an alert reads for `v`.
std::string AdviceLabel(VerdictSubject subject, const Verdict& v) {
  Families f;
  AddVerdictSeries("main", subject, "app", v.pid, v, &f);
  for (const auto& family : testing::ParseFamilies(f.Text())) {
    for (const auto& l : family.metric.at(0).label) {
      if (l.name == "advice") return l.value;
    }
  }
  return "(no advice label)";
}

// One source of words: what /locks says after "Do:" for a root, and what /api/v1/locks gives as
// advice, is the advice label of pglock_session_verdict_info, which the alert descriptions print.
TEST(WaitForest, ThePagesWordsForAVerdictAreTheAlertsAdviceLabel) {
  std::vector<RootFacts> roots(5);
  for (RootFacts& f : roots) {
    f.root.id = {6569, "web", "10.0.2.10", "app", "idle in transaction", ""};
    f.root.backend_type = "client backend";
    f.root.state_seconds = 300;
    f.state_seconds = 300;
    f.blocked = 2;
  }
  roots[1].pooled = PooledConnection{"pgb<1>", "app", "app", "web@10.0.2.10", "web@x"};
  roots[2].root.id.state = "active";
  roots[3].root.id.state = "active";
  roots[3].state_seconds = 5;
  roots[4].strong_request = StrongRequest{};
  roots[4].strong_request->waiter.id.pid = 7000;
  roots[4].strong_request->queued_behind = 2;
  roots[4].strong_request->mode = "AccessExclusiveLock";
  std::vector<std::string> actions;
  for (const RootFacts& f : roots) actions.push_back(VerdictActionName(DecideVerdict(f).action));
  EXPECT_EQ(actions, (std::vector<std::string>{"terminate", "pooler_reconnect", "cancel", "wait",
                                               "cancel_waiting_ddl"}));
  for (const RootFacts& f : roots) {
    auto snap = std::make_shared<TargetSnapshot>();
    snap->target = "main";
    snap->up = true;
    auto view = std::make_shared<TargetView>();
    view->lock_waits = {Edge(2, 6569, 5)};
    BlockingRoot root;
    root.root = f.root;
    root.blocked_pids = {2};
    root.verdict = DecideVerdict(f);
    view->blocking_roots = {root};
    snap->view = view;
    const std::string label = AdviceLabel(VerdictSubject::kBlockingRoot, root.verdict);
    EXPECT_EQ(label, VerdictAdvice(root.verdict));
    const std::string html = RenderLocksPage({snap}, {});
    EXPECT_EQ(DoText(html), H(label)) << VerdictActionName(root.verdict.action);
    if (!root.verdict.command.empty()) {
      EXPECT_NE(html.find("<code class=cmd>" + H(root.verdict.command) + "</code>"),
                std::string::npos)
          << html;
    }
    EXPECT_NE(RenderLocksJson({snap}, {}).find(",\"advice\":" + J(label) + ","), std::string::npos);
  }

  // An idle-in-transaction holder, pooled or not: the last cell of its row.
  for (const bool pooled : {false, true}) {
    auto snap = std::make_shared<TargetSnapshot>();
    snap->target = "main";
    snap->up = true;
    auto view = std::make_shared<TargetView>();
    IdleHolder h;
    h.datname = "app";
    h.holder = {6569, "web", "10.0.2.10", "app", "idle in transaction", ""};
    h.seconds = 300;
    h.holds = "advisory";
    view->idle_holders = {h};
    if (pooled) {
      PoolerView p;
      p.name = "pgbouncer-main";
      PooledLockRow row;
      row.pid = 6569;
      row.database = "app";
      row.user = "app";
      p.locks.push_back(row);
      view->poolers = {p};
    }
    snap->view = view;
    const std::string label =
        AdviceLabel(VerdictSubject::kIdleInTransactionHolder, IdleHolderVerdict(h, view->poolers));
    EXPECT_EQ(label.starts_with("RECONNECT app"), pooled) << label;
    EXPECT_EQ(TextBetween(RenderLocksPage({snap}, {}), "<td class=detail>", "</td></tr>"), H(label))
        << pooled;
  }

  // The session filling the lock table, pooled or not.
  auto table = std::make_shared<LockTableView>();
  table->counted = true;
  table->entries = table->slots = 6400;
  SessionLockTableEntries leak;
  leak.datname = "app";
  leak.session = {19492, "leaker", "10.0.0.9", "app", "active", ""};
  leak.locktype = "advisory";
  leak.entries = 6087;
  table->sessions = {leak};
  auto snap = std::make_shared<TargetSnapshot>();
  snap->target = "main";
  snap->lock_table_full = true;
  snap->lock_table = table;
  for (const bool pooled : {false, true}) {
    if (pooled) table->sessions[0].pooled = PooledConnection{"pgb", "app", "app", "a", "b"};
    const std::string label =
        AdviceLabel(VerdictSubject::kLockTableSession, LockTableVerdict(table->sessions[0], 6087));
    EXPECT_EQ(DoText(RenderLocksPage({snap}, {})), H(label)) << pooled;
  }
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

// A page is shared while a request holds it, and only then: an idle exporter keeps neither the
// last page asked for (the event log's JSON is megabytes) nor the snapshots it was made from.
TEST(PageCache, SharesAPageWhileARequestHoldsItAndKeepsNothingAfter) {
  PageCache cache;
  auto a = std::make_shared<const TargetSnapshot>();
  int renders = 0;
  const auto render = [&] { return std::to_string(++renders); };
  auto x = cache.Get({a}, "x", render);
  EXPECT_EQ(*x, "1");
  EXPECT_EQ(cache.Get({a}, "x", render), x);  // an overlapping request: the same page
  EXPECT_EQ(*cache.Get({a}, "y", render), "2");
  auto b = std::make_shared<const TargetSnapshot>();
  EXPECT_EQ(*cache.Get({b}, "x", render), "3");  // a new snapshot set: rendered again
  EXPECT_EQ(*x, "1");                            // the page a request holds is untouched
  EXPECT_EQ(cache.renders(), 3u);

  // Released by every request of the current set: gone, and rendered again for the next one.
  auto y = cache.Get({b}, "y", render);
  EXPECT_EQ(*y, "4");
  const std::weak_ptr<const std::string> kept = y;
  y.reset();
  EXPECT_TRUE(kept.expired());
  EXPECT_EQ(*cache.Get({b}, "y", render), "5");

  // The snapshots the cache last saw are freed with the poller's last reference.
  const std::weak_ptr<const TargetSnapshot> snapshot = b;
  b.reset();
  a.reset();
  EXPECT_TRUE(snapshot.expired());
}

// A snapshot made where a freed one was (the same address, a new owner) is a new snapshot set.
TEST(PageCache, ASnapshotAtAFreedOnesAddressIsNotTakenForIt) {
  PageCache cache;
  int renders = 0;
  const auto render = [&] { return std::to_string(++renders); };
  auto first = SnapshotAtFixedAddress();
  const void* const address = first.get();
  const auto page = cache.Get({first}, "x", render);  // held: kept if the key matched
  first.reset();
  const auto second = SnapshotAtFixedAddress();
  ASSERT_EQ(static_cast<const void*>(second.get()), address);
  EXPECT_EQ(*cache.Get({second}, "x", render), "2");
  EXPECT_EQ(*page, "1");
}

Event Logged(EventKind kind, double time) {
  Event e;
  e.kind = kind;
  e.time = time;
  e.evidence = EndEvidence::kLog;
  e.datname = "app";
  return e;
}

// The part of `html` from `from` up to the next `to` (or the end).
std::string Between(const std::string& html, const std::string& from, const std::string& to) {
  const auto begin = html.find(from);
  if (begin == std::string::npos) return "";
  const auto end = html.find(to, begin + from.size());
  return html.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// What the server's log told of locks between polls: lock waits, lock timeouts and deadlocks in
// their own section, newest first, at most kPageLogged, every string escaped (names, identities,
// the log's detail, the reader's error); the lock timeout and the deadlock red in the recent
// events; the same in the JSON's between_polls. A target without a log says how to read one.
TEST(BetweenPolls, LoggedWaitsTimeoutsAndDeadlocksNewestFirstBoundedAndEscaped) {
  const std::string hostile = "<script>x('\"&')</script>";
  std::vector<std::shared_ptr<const Event>> events;
  for (int i = 0; i < 30; ++i) {
    Event old = Logged(EventKind::kLockWait, 1000 + i);
    old.outcome = EventOutcome::kAcquired;
    old.lock = "old-wait-" + std::to_string(i);
    old.duration = 1.5;
    events.push_back(std::make_shared<const Event>(old));
  }
  Event nowait = Logged(EventKind::kLockTimeout, 1999);
  nowait.cause = EventCause::kNowaitFailed;
  nowait.lock = "relation queue";
  events.push_back(std::make_shared<const Event>(nowait));
  Event wait = Logged(EventKind::kLockWait, 2000);
  wait.outcome = EventOutcome::kFailedToAcquire;
  wait.lock = hostile;
  wait.current = Identity{11, hostile, "10.0.0.1", "app<1>", "", ""};
  wait.previous = Identity{12, "</td><td>", "", "owner", "", ""};
  wait.duration = 2.5;
  wait.started = 1997.5;
  wait.detail = "ShareLock; holders 12; between polls <b>";
  events.push_back(std::make_shared<const Event>(wait));
  Event timeout = Logged(EventKind::kLockTimeout, 2001);
  timeout.cause = EventCause::kLockTimeout;
  timeout.lock = "relation jobs";
  timeout.current = Identity{31, "migrate", "", "deploy<er>", "", ""};
  timeout.previous = Identity{32, "report", "", "app", "", ""};
  timeout.detail = "holders 32; statement: ALTER TABLE \"<t>\" ADD c int";
  events.push_back(std::make_shared<const Event>(timeout));
  Event deadlock = Logged(EventKind::kDeadlock, 2002);
  deadlock.previous = Identity{21, hostile, "", "app", "", ""};
  deadlock.lock = "transaction 5";
  deadlock.detail =
      "cancelled pid 21: pid 21 waits for ShareLock on transaction 5, blocked by pid 22 "
      "(query: <img src=x onerror=alert(1)>)";
  events.push_back(std::make_shared<const Event>(deadlock));
  Event lost = Logged(EventKind::kLockLost, 2003);
  lost.cause = CauseOf(HoldEnd::kTerminated);
  lost.lock = "lost-lock";
  events.push_back(std::make_shared<const Event>(lost));

  auto snap = std::make_shared<TargetSnapshot>();
  snap->target = "main";
  snap->up = true;
  snap->events = EventList::Of(std::move(events));
  auto log = std::make_shared<ServerLogStatus>();
  log->up = false;
  log->error = "open <dir>: permission denied";
  log->untranslated = true;
  log->dropped = 3;
  snap->server_log = log;
  auto plain = std::make_shared<TargetSnapshot>();
  plain->target = "nolog";
  plain->up = true;

  const std::string html = RenderLocksPage({snap, plain}, {});
  EXPECT_EQ(html.find("<script>"), std::string::npos) << html;
  EXPECT_EQ(html.find("<img"), std::string::npos);
  const std::string section =
      Between(html, "<h3>Between polls (from the server's log)</h3>", "<h3>Recent events</h3>");
  ASSERT_FALSE(section.empty()) << html;
  EXPECT_NE(section.find("cannot be read: open &lt;dir&gt;: permission denied"), std::string::npos)
      << section;
  EXPECT_NE(section.find("lc_messages is not English"), std::string::npos);
  EXPECT_NE(section.find("3 lock records dropped"), std::string::npos);
  // Newest first: the deadlock, the timeout, the failed wait, the failed NOWAIT, then the newest
  // 16 old waits: 20 rows and the header.
  const auto d = section.find("<td class=down>deadlock</td>");
  const auto t = section.find("<td class=down>lock_timeout</td>");
  const auto w = section.find("<td>lock_wait <b>failed_to_acquire</b></td>");
  ASSERT_NE(d, std::string::npos) << section;
  ASSERT_NE(t, std::string::npos) << section;
  ASSERT_NE(w, std::string::npos) << section;
  EXPECT_LT(d, t);
  EXPECT_LT(t, w);
  EXPECT_EQ(Occurrences(section, "<tr>"), kPageLogged + 1);
  EXPECT_NE(section.find("<td class=down>lock_timeout <b>nowait_failed</b></td>"),
            std::string::npos);
  EXPECT_NE(section.find("old-wait-14</span>"), std::string::npos);
  EXPECT_EQ(section.find("old-wait-13</span>"), std::string::npos);
  EXPECT_EQ(section.find("lost-lock"), std::string::npos);
  // Who waited, behind whom, for what, how long, and the log's detail, escaped.
  EXPECT_NE(section.find("<span class=lock>&lt;script&gt;x(&#39;&quot;&amp;&#39;)&lt;/script&gt;"
                         "</span> app"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("pid 11 &lt;script&gt;"), std::string::npos);
  EXPECT_NE(section.find("app&lt;1&gt;@10.0.0.1"), std::string::npos);
  EXPECT_NE(section.find("pid 12 &lt;/td&gt;&lt;td&gt; owner@local"), std::string::npos);
  EXPECT_NE(section.find("<td>2.5 s</td>"), std::string::npos);
  EXPECT_NE(section.find("between polls &lt;b&gt;"), std::string::npos);
  EXPECT_NE(section.find("deploy&lt;er&gt;"), std::string::npos);
  EXPECT_NE(section.find("statement: ALTER TABLE &quot;&lt;t&gt;&quot; ADD c int"),
            std::string::npos);
  EXPECT_NE(section.find("cancelled: pid 21 &lt;script&gt;"), std::string::npos);
  EXPECT_NE(section.find("(query: &lt;img src=x onerror=alert(1)&gt;)"), std::string::npos);
  // A deadlock from the log is not a blocking-episode row as well.
  EXPECT_NE(Between(html, "<h3>Recent blocking episodes</h3>", "<h3>Between polls")
                .find("None seen since the exporter started"),
            std::string::npos);
  // The recent events: what returned an error to an application is red.
  EXPECT_NE(html.find("<td class=down>lock_timeout <small>(log)</small>"), std::string::npos);
  EXPECT_NE(html.find("<td class=down>deadlock <small>(log)</small>"), std::string::npos);
  EXPECT_NE(html.find("<td>lock_wait failed_to_acquire <small>(log)</small>"), std::string::npos);
  // The target without a log says how to read one.
  const std::string nolog = Between(html, "<h2>nolog", "</section>");
  EXPECT_NE(nolog.find("Not read: this target has no <code>[targets.server_log]</code>"),
            std::string::npos)
      << nolog;
  EXPECT_NE(nolog.find("\"The server's log\""), std::string::npos);
  EXPECT_NE(nolog.find("<a href=\"/runbooks/README#the-servers-log\">"), std::string::npos);

  const std::string json = RenderLocksJson({snap, plain}, {});
  EXPECT_NE(json.find("\"server_log\":{\"up\":false,\"error\":\"open <dir>: permission denied\","
                      "\"format\":\"\",\"untranslated\":true,\"dropped\":3}"),
            std::string::npos)
      << json;
  const std::string between = Between(json, "\"between_polls\":[", "]}");
  EXPECT_EQ(between.find("\"between_polls\":[{\"time\":2002.000,\"target\":\"\",\"kind\":"
                         "\"deadlock\""),
            0u)
      << between;
  EXPECT_EQ(Occurrences(between, "\"kind\":"), kPageLogged);
  EXPECT_EQ(between.find("lock_lost"), std::string::npos);
  EXPECT_NE(json.find("\"server_log\":null,\"between_polls\":[]}"), std::string::npos) << json;
}

// A poll failed with the table full: the page shows the last figures, the sessions filling the
// table and what frees it, escaped; a pooled filler gets its pooler's RECONNECT.
TEST(LockTable, FullTableShowsFiguresFillersAndTheCommandEscaped) {
  const std::string hostile = "<script>x('\"&')</script>";
  auto table = std::make_shared<LockTableView>();
  table->counted = true;
  table->entries = 6400;
  table->slots = 6400;
  table->age = 42;
  SessionLockTableEntries leak;
  leak.datname = "db<1>";
  leak.session = {19492, hostile, "10.0.0.9", "app\"x", "idle", ""};
  leak.locktype = "advisory";
  leak.entries = 6087;
  SessionLockTableEntries other = leak;
  other.session = {77, "reporter", "", "report", "active", ""};
  other.locktype = "relation";
  other.entries = 12;
  table->sessions = {leak, other};
  auto snap = std::make_shared<TargetSnapshot>();
  snap->target = "main";
  snap->state = "down";
  snap->last_error = "out of shared memory";
  snap->lock_table_full = true;
  snap->lock_table = table;
  const std::string html = RenderLocksPage({snap}, {});
  EXPECT_EQ(html.find("<script>"), std::string::npos) << html;
  EXPECT_NE(html.find("Shared lock table FULL"), std::string::npos) << html;
  EXPECT_NE(html.find("6400 entries used of 6400 slots (100%)"), std::string::npos) << html;
  EXPECT_NE(html.find("figures from 42.0 s ago"), std::string::npos) << html;
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("db&lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("<code class=cmd>SELECT pg_terminate_backend(19492)</code>"),
            std::string::npos);
  EXPECT_NE(html.find("Frees</b> 6087 entries"), std::string::npos);
  EXPECT_NE(html.find("session locks are dropped"), std::string::npos);
  const std::string json = RenderLocksJson({snap}, {});
  EXPECT_NE(json.find("\"lock_table\":{\"full\":true,\"entries\":6400,\"slots\":6400"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"application_name\":\"<script>x('\\\"&')</script>\""), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"command\":\"SELECT pg_terminate_backend(19492)\""), std::string::npos);

  table->sessions[0].pooled = PooledConnection{"bouncer<1>", "app", "app", "c1", "c2"};
  const std::string pooled = RenderLocksPage({snap}, {});
  EXPECT_NE(pooled.find("<code class=cmd>RECONNECT app</code>"), std::string::npos) << pooled;
  EXPECT_NE(pooled.find("bouncer&lt;1&gt;"), std::string::npos);
  EXPECT_EQ(pooled.find("pg_terminate_backend(19492)</code>"), std::string::npos);

  // Neither full nor filling: nothing about the table.
  snap->lock_table_full = false;
  snap->up = true;
  table->entries = 100;
  EXPECT_EQ(RenderLocksPage({snap}, {}).find("Shared lock table"), std::string::npos);
  EXPECT_NE(RenderLocksJson({snap}, {}).find("\"lock_table\":null"), std::string::npos);
}

// A job queue read as a lease table with thousands of expired rows: the page and the API show the
// 20 worst (expired first, oldest first) and the total, not every row.
TEST(Leases, ThousandsNeedingALookShowTheWorstTwentyAndTheTotal) {
  auto view = std::make_shared<TargetView>();
  LeaseTableView table;
  table.table = "jobs";
  table.ok = true;
  for (int i = 0; i < 3000; ++i) {
    LeaseView l;
    l.lease = "job-" + std::to_string(i);
    l.held = true;
    l.age = 100 + i;
    l.expires_in = i < 2000 ? 30.0 : -1.0;  // 2,000 expiring, then 1,000 expired
    table.leases.push_back(l);
  }
  view->leases = {table};
  auto snap = std::make_shared<TargetSnapshot>();
  snap->target = "main";
  snap->up = true;
  snap->state = "up";
  snap->view = view;
  const std::string html = RenderLocksPage({snap}, {});
  EXPECT_NE(html.find("job-2999"), std::string::npos) << "the oldest expired comes first";
  EXPECT_EQ(html.find("job-1999<"), std::string::npos) << "an expiring one is left out";
  EXPECT_NE(html.find("2980 more leases need a look (3000 in all"), std::string::npos);
  EXPECT_LT(html.size(), 200u << 10);
  const std::string json = RenderLocksJson({snap}, {});
  EXPECT_NE(json.find("\"leases_total\":3000"), std::string::npos);
  EXPECT_EQ(json.find("job-1999\""), std::string::npos);
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
  EXPECT_EQ(log.Contents()->newest()->time, 4);
}

TEST(EventLog, AnyBytesGiveValidJsonAndOneTextLine) {
  Event e;
  e.kind = EventKind::kLockLost;
  e.lock = std::string("a\"b\\\n\x01\xff\xfe", 8);
  e.previous = Identity{7, "app name", "", "", "", ""};
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
