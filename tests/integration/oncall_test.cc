// The on-call view against a real PostgreSQL and the real HTTP server: /locks and the JSON APIs
// during real incidents (a wait, a lock lost to idle_in_transaction_session_timeout and taken by
// another run, a wait and a lock timeout between polls from the server's log), query texts only
// when enabled, hostile names escaped, the event log, runbooks.
#include "exporter/http/oncall.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "exporter/http/server.h"
#include "exporter/poll/poller.h"
#include "tests/support/http_get.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::TestPoll;
using testing::TestSession;
using testing::WaitFor;

constexpr const char* kHostileLock = "<script>alert('lock')</script>&\"";
constexpr const char* kHostileApp = "<img src=x onerror=alert(1)>";

TargetConfig Target() {
  TargetConfig t;
  t.name = "oncall";
  t.dsn = Pg().Dsn();
  LockNameConfig hostile;
  hostile.name = kHostileLock;
  hostile.kind = LockNameConfig::Kind::kBigint;
  hostile.key = 4242;
  LockNameConfig rebuild;
  rebuild.name = "rebuild:run";
  rebuild.kind = LockNameConfig::Kind::kBigintText;
  rebuild.key_text = "rebuild:run";
  t.locks = {hostile, rebuild};
  return t;
}

using Response = testing::HttpResponse;
Response Get(const std::string& url) { return testing::HttpGet(url); }
using testing::ValidJson;

// A poller serving its snapshots over HTTP on a free port.
class Served {
 public:
  explicit Served(PollConfig poll) : poller_(Target(), poll) {
    WebConfig web;
    web.listen_address = "127.0.0.1:0";
    const Status started = HttpServer::Start(
        web, [this] { return SnapshotList{poller_.Latest()}; }, ExporterInfo{"test", "test"},
        &server_);
    EXPECT_TRUE(started.ok()) << started.message();
    EXPECT_NE(server_, nullptr);
  }
  Poller& poller() { return poller_; }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(server_->ListeningPorts().at(0)) + path;
  }

 private:
  Poller poller_;
  std::unique_ptr<HttpServer> server_;
};

TEST(OnCall, WaitForestShowsBlockerAndWaiterEscapedAndQueryTextOnlyWhenEnabled) {
  for (const bool query_text : {false, true}) {
    SCOPED_TRACE(query_text ? "show_query_text = true" : "show_query_text = false");
    Served s(TestPoll({.interval_ms = 500, .query_text = query_text}));
    TestSession holder(Pg().Dsn() + " application_name='" + kHostileApp + "'");
    holder.Query("SELECT pg_advisory_lock(4242), 'blocker-secret-text' AS marker");
    TestSession waiter(Pg().Dsn() + " application_name=waiter-app");
    waiter.Send("SELECT pg_advisory_lock(4242) /* waiter-secret-text */");
    ASSERT_TRUE(WaitFor(10, [&] {
      return Pg().Scalar("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " +
                         std::to_string(waiter.Pid())) == "1";
    }));
    s.poller().PollOnceForTest();
    const Response page = Get(s.Url("/locks"));
    ASSERT_EQ(page.code, 200);
    EXPECT_NE(page.body.find("pid " + std::to_string(holder.Pid())), std::string::npos);
    EXPECT_NE(page.body.find("pid " + std::to_string(waiter.Pid())), std::string::npos);
    EXPECT_NE(page.body.find("&lt;script&gt;alert(&#39;lock&#39;)&lt;/script&gt;&amp;&quot;"),
              std::string::npos);
    EXPECT_NE(page.body.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
    EXPECT_EQ(page.body.find("<script>"), std::string::npos);
    EXPECT_EQ(page.body.find("<img"), std::string::npos);
    EXPECT_NE(page.body.find("http-equiv=\"refresh\""), std::string::npos);
    EXPECT_EQ(page.body.find("blocker-secret-text") != std::string::npos, query_text);
    EXPECT_EQ(page.body.find("waiter-secret-text") != std::string::npos, query_text);

    const Response api = Get(s.Url("/api/v1/locks?target=oncall"));
    ASSERT_EQ(api.code, 200);
    EXPECT_TRUE(ValidJson(api.body)) << api.body;
    EXPECT_NE(api.body.find("\"pid\":" + std::to_string(holder.Pid())), std::string::npos);
    EXPECT_NE(api.body.find("\"pid\":" + std::to_string(waiter.Pid())), std::string::npos);
    EXPECT_NE(api.body.find("\"lock\":\"<script>alert('lock')</script>&\\\"\""), std::string::npos);
    EXPECT_EQ(api.body.find("blocker-secret-text") != std::string::npos, query_text);

    // ?lock= and ?target= narrow it.
    EXPECT_EQ(Get(s.Url("/api/v1/locks?lock=sweep")).body.find("waiter-app"), std::string::npos);
    EXPECT_EQ(Get(s.Url("/locks?target=other")).body.find("waiter-app"), std::string::npos);
    waiter.Close();
    holder.Close();
  }
}

// Depth of the list item open at `at`: <li> opened minus closed before it.
int ListDepth(const std::string& html, size_t at) {
  int depth = 0;
  for (size_t i = html.find("<li>"); i < at; i = html.find("<li>", i + 1)) ++depth;
  for (size_t i = html.find("</li>"); i < at; i = html.find("</li>", i + 1)) --depth;
  return depth;
}

// The wait forest of every lock type: the pile-up (an idle transaction, an ALTER TABLE queued
// behind it, a reader queued behind the ALTER) on a table with a hostile name, and a row lock
// held by a prepared transaction with a hostile gid. Roots with state and time in it, waiters
// nested below their blockers with mode, lock type and schema.table; everything escaped.
TEST(OnCall, LockWaitForestOfEveryTypeIsATreeAndEscaped) {
  Pg().Exec("DROP TABLE IF EXISTS \"<b>pile&up\", prep_rows");
  Pg().Exec("CREATE TABLE \"<b>pile&up\" (id int PRIMARY KEY, v int)");
  Pg().Exec("INSERT INTO \"<b>pile&up\" VALUES (1, 0)");
  Pg().Exec(
      "CREATE TABLE prep_rows (id int PRIMARY KEY, v int); INSERT INTO prep_rows VALUES (1, 0)");
  TestSession idle(Pg().Dsn() + " application_name='" + kHostileApp + "'");
  TestSession ddl(Pg().Dsn() + " application_name=migration-app");
  TestSession reader(Pg().Dsn() + " application_name=reader-app");
  TestSession prepared(Pg().Dsn()), payer(Pg().Dsn() + " application_name=payer-app");
  idle.Query("BEGIN");
  idle.Query("UPDATE \"<b>pile&up\" SET v = 1");
  ddl.Send("ALTER TABLE \"<b>pile&up\" ADD COLUMN w int");
  const auto waiting = [](const TestSession& s) {
    return WaitFor(10, [&] {
      return Pg().Scalar(
                 "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                 "AND pid = " +
                 std::to_string(s.Pid())) == "1";
    });
  };
  ASSERT_TRUE(waiting(ddl));
  reader.Send("SELECT count(*) FROM \"<b>pile&up\"");
  ASSERT_TRUE(waiting(reader));
  prepared.Query("BEGIN");
  prepared.Query("UPDATE prep_rows SET v = 1");
  prepared.Query("PREPARE TRANSACTION '<gid>&\"x'");
  payer.Send("UPDATE prep_rows SET v = 2");
  ASSERT_TRUE(waiting(payer));

  Served s(TestPoll({.interval_ms = 500}));
  s.poller().PollOnceForTest();
  const Response page = Get(s.Url("/locks"));
  ASSERT_EQ(page.code, 200);
  const std::string& html = page.body;
  EXPECT_NE(html.find("Lock waits (3 waiting"), std::string::npos) << html;
  // The idle transaction is a root, with its state and how long it has been in it.
  const size_t root =
      html.find("<span class=root>root</span> <b>pid " + std::to_string(idle.Pid()));
  ASSERT_NE(root, std::string::npos) << html;
  const std::string root_line = html.substr(root, html.find('\n', root) - root);
  EXPECT_NE(root_line.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos) << root_line;
  EXPECT_NE(root_line.find("idle in transaction</span> for <b>"), std::string::npos) << root_line;
  EXPECT_NE(root_line.find("blocking 2"), std::string::npos) << root_line;
  // The ALTER waits below it; the reader below the ALTER.
  const size_t alter = html.find("<b>pid " + std::to_string(ddl.Pid()));
  const size_t read = html.find("<b>pid " + std::to_string(reader.Pid()));
  ASSERT_NE(alter, std::string::npos);
  ASSERT_NE(read, std::string::npos);
  EXPECT_EQ(ListDepth(html, root), 1);
  EXPECT_EQ(ListDepth(html, alter), 2);
  EXPECT_EQ(ListDepth(html, read), 3);
  EXPECT_LT(root, alter);
  EXPECT_LT(alter, read);
  EXPECT_NE(html.find("<span class=mode>AccessExclusiveLock</span> on relation <span "
                      "class=lock>public.&lt;b&gt;pile&amp;up</span> (postgres): <b>pid " +
                      std::to_string(ddl.Pid())),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<span class=mode>AccessShareLock</span> on relation <span "
                      "class=lock>public.&lt;b&gt;pile&amp;up</span>"),
            std::string::npos);
  // The prepared transaction is a root by its gid, with the row-lock waiter below it.
  const size_t prep = html.find(
      "<span class=root>root</span> <b>prepared transaction</b> <span "
      "class=lock>&lt;gid&gt;&amp;&quot;x</span> owner postgres <span "
      "class=st>prepared</span> for <b>");
  ASSERT_NE(prep, std::string::npos) << html;
  const size_t payer_at = html.find("<b>pid " + std::to_string(payer.Pid()));
  ASSERT_NE(payer_at, std::string::npos);
  EXPECT_EQ(ListDepth(html, payer_at), 2);
  EXPECT_NE(html.find("<span class=mode>ShareLock</span> on transactionid (postgres): <b>pid " +
                      std::to_string(payer.Pid())),
            std::string::npos);
  // Nothing from the database reaches the page unescaped.
  EXPECT_EQ(html.find("<b>pile"), std::string::npos);
  EXPECT_EQ(html.find("<gid>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);

  const Response api = Get(s.Url("/api/v1/locks"));
  EXPECT_TRUE(ValidJson(api.body)) << api.body;
  EXPECT_NE(api.body.find("\"lock_waiters\":3"), std::string::npos) << api.body;
  EXPECT_NE(api.body.find("\"pid\":" + std::to_string(idle.Pid()) +
                          ",\"application_name\":\"<img src=x onerror=alert(1)>\""),
            std::string::npos)
      << api.body;
  EXPECT_NE(api.body.find("\"locktype\":\"relation\",\"mode\":\"AccessExclusiveLock\","
                          "\"relation\":\"public.<b>pile&up\""),
            std::string::npos)
      << api.body;
  EXPECT_NE(api.body.find("\"backend_type\":\"prepared transaction\",\"gid\":\"<gid>&\\\"x\""),
            std::string::npos)
      << api.body;
  // ?lock= keeps the waits on one relation.
  const Response one = Get(s.Url("/api/v1/locks?lock=public.prep_rows"));
  EXPECT_EQ(one.body.find("\"pid\":" + std::to_string(ddl.Pid())), std::string::npos);

  payer.Close();
  Pg().Exec("ROLLBACK PREPARED '<gid>&\"x'");
  idle.Query("ROLLBACK");
  ASSERT_TRUE(WaitFor(10, [&] { return ddl.SendDone() && reader.SendDone(); }));
  Pg().Exec("DROP TABLE \"<b>pile&up\", prep_rows");
}

TEST(OnCall, IdleInTransactionTimeoutLossWithCauseTakeoverAndTimeLeftInPageAndEvents) {
  Pg().Exec("DROP ROLE IF EXISTS rebuild_job");
  Pg().Exec("CREATE ROLE rebuild_job LOGIN");
  Pg().Exec(
      "ALTER ROLE rebuild_job IN DATABASE postgres SET idle_in_transaction_session_timeout = '3s'");
  Served s(TestPoll({.interval_ms = 500}));
  TestSession first(Pg().Dsn("postgres", "rebuild_job") + " application_name=rebuild-1");
  first.Query("BEGIN");
  ASSERT_EQ(first.Query("SELECT pg_try_advisory_lock(hashtextextended('rebuild:run', 0))"), "t");
  const int first_pid = first.Pid();
  s.poller().PollOnceForTest();
  const Response before = Get(s.Url("/locks?lock=rebuild:run"));
  EXPECT_NE(before.body.find("Idle in transaction"), std::string::npos);
  EXPECT_NE(before.body.find("pid " + std::to_string(first_pid)), std::string::npos);
  const Response idle = Get(s.Url("/api/v1/locks"));
  const auto left = idle.body.find("\"timeout_remaining_seconds\":");
  ASSERT_NE(left, std::string::npos) << idle.body;
  EXPECT_LE(std::atof(idle.body.c_str() + left + 28), 3.0);

  std::unique_ptr<TestSession> second;
  Response events;
  WaitFor(20, [&] {
    s.poller().PollOnceForTest();
    if (!second && Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                               std::to_string(first_pid)) == "0") {
      second = std::make_unique<TestSession>(Pg().Dsn() + " application_name=rebuild-2");
      EXPECT_EQ(second->Query("SELECT pg_try_advisory_lock(hashtextextended('rebuild:run', 0))"),
                "t");
    }
    events = Get(s.Url("/api/v1/events?lock=rebuild:run"));
    if (events.body.find("lock_takeover") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return false;
  });
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(ValidJson(events.body)) << events.body;
  EXPECT_NE(events.body.find("\"kind\":\"lock_lost\",\"cause\":\"idle_in_transaction_timeout\""),
            std::string::npos)
      << events.body;
  EXPECT_NE(events.body.find("\"kind\":\"lock_takeover\""), std::string::npos) << events.body;
  EXPECT_NE(events.body.find("\"pid\":" + std::to_string(first_pid) +
                             ",\"application_name\":\"rebuild-1\",\"usename\":\"rebuild_job\""),
            std::string::npos)
      << events.body;
  EXPECT_NE(events.body.find("\"pid\":" + std::to_string(second->Pid()) +
                             ",\"application_name\":\"rebuild-2\""),
            std::string::npos)
      << events.body;
  const Response page = Get(s.Url("/locks?target=oncall"));
  EXPECT_NE(page.body.find("lock_lost <b>idle_in_transaction_timeout</b>"), std::string::npos);
  EXPECT_NE(page.body.find("lock_takeover"), std::string::npos);
  second.reset();
  first.Close();
  Pg().Exec("DROP ROLE rebuild_job");
}

TEST(OnCall, LeaseHoldersAreEscapedInPageAndValidJson) {
  Pg().Exec("DROP TABLE IF EXISTS oncall_leases");
  Pg().Exec(
      "CREATE TABLE oncall_leases (name text PRIMARY KEY, holder text, taken_at timestamptz, "
      "expires_at timestamptz)");
  Pg().Exec(
      "INSERT INTO oncall_leases VALUES ('<b>lease</b>', "
      "E'host:1:\\x01\"</td><script>x</script>\\n', "
      "now() - interval '5 min', now() - interval '1 min')");
  TargetConfig t = Target();
  LeaseTableConfig table;
  table.table = "oncall_leases";
  table.relation = "oncall_leases";
  t.leases = {table};
  Poller poller(t, TestPoll({.interval_ms = 500}));
  poller.PollOnceForTest();
  const SnapshotList snaps = {poller.Latest()};
  const std::string html = RenderLocksPage(snaps, {});
  EXPECT_NE(html.find("&lt;b&gt;lease&lt;/b&gt;"), std::string::npos) << html;
  EXPECT_NE(html.find("&lt;/td&gt;&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("expired"), std::string::npos);
  const std::string json = RenderLocksJson(snaps, {});
  EXPECT_TRUE(ValidJson(json)) << json;
  EXPECT_NE(json.find("\\u0001"), std::string::npos);
  Pg().Exec("DROP TABLE oncall_leases");
}

// A lock table without an expiry (held_sql): its held rows are held with no expiry, never
// "expired" with a time derived from the epoch, in the page and the JSON alike.
TEST(OnCall, LeaseWithoutExpiryIsHeldWithNoExpiry) {
  Pg().Exec("DROP TABLE IF EXISTS oncall_flags");
  Pg().Exec(
      "CREATE TABLE oncall_flags (name text, taken_at timestamptz, is_locked int); "
      "INSERT INTO oncall_flags VALUES ('fresh', now(), 1), "
      "('old', now() - interval '2 hours', 1), ('free', now(), 0)");
  TargetConfig t = Target();
  LeaseTableConfig table;
  table.table = table.relation = "oncall_flags";
  table.holder = table.expires_at = LeaseField{};
  table.held_sql = "is_locked = 1";
  t.leases = {table};
  Poller poller(t, TestPoll({.interval_ms = 500}));
  poller.PollOnceForTest();
  const SnapshotList snaps = {poller.Latest()};
  const std::string json = RenderLocksJson(snaps, {});
  EXPECT_TRUE(ValidJson(json)) << json;
  EXPECT_EQ(json.find("\"expired\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"lease\":\"old\",\"state\":\"held too long\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"expires_in_seconds\":null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"leases_held_normally\":1"), std::string::npos) << json;
  const std::string html = RenderLocksPage(snaps, {});
  EXPECT_EQ(html.find("overdue"), std::string::npos) << html;
  EXPECT_NE(html.find("no expiry"), std::string::npos) << html;
  Pg().Exec("DROP TABLE oncall_flags");
}

// Between polls, from the server's log: a named advisory lock waited for 1.5 s by a session with
// a hostile application_name, over before the next poll, then the same session's lock timeout
// behind the same holder. Both in "Between polls", newest first, escaped, and in the JSON's
// between_polls; the lock timeout red in the recent events.
TEST(OnCall, BetweenPollsShowsLoggedWaitsAndLockTimeoutsEscaped) {
  TargetConfig t = Target();
  t.server_log.path = Pg().LogDir();
  t.server_log.format = "csvlog";
  t.server_log.read_interval = Duration(200);
  Poller poller(t, TestPoll({.interval_ms = 5000}));
  ASSERT_TRUE(WaitFor(5, [&] { return poller.server_log()->reads_through() > 0; }));
  poller.PollOnceForTest();
  TestSession holder(Pg().Dsn() + " application_name=holder-app");
  TestSession waiter(Pg().Dsn() + " application_name='" + kHostileApp + "'");
  holder.Query("SELECT pg_advisory_lock(4242)");
  waiter.Send("SELECT pg_advisory_lock(4242)");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  holder.Query("SELECT pg_advisory_unlock(4242)");
  ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
  waiter.Query("SELECT pg_advisory_unlock(4242)");
  holder.Query("SELECT pg_advisory_lock(4242)");
  waiter.Query("SET lock_timeout = '1500ms'");  // longer than deadlock_timeout: logged first
  EXPECT_NE(waiter.QueryError("SELECT pg_advisory_lock(4242)"), "");
  holder.Query("SELECT pg_advisory_unlock(4242)");

  std::string html;
  ASSERT_TRUE(WaitFor(15, [&] {
    poller.PollOnceForTest();
    html = RenderLocksPage({poller.Latest()}, {});
    if (html.find("<td class=down>lock_timeout</td>") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return false;
  })) << html;
  const auto begin = html.find("<h3>Between polls (from the server's log)</h3>");
  const auto end = html.find("<h3>Recent events</h3>");
  ASSERT_NE(begin, std::string::npos) << html;
  const std::string section = html.substr(begin, end - begin);
  const std::string lock = "&lt;script&gt;alert(&#39;lock&#39;)&lt;/script&gt;&amp;&quot;";
  const auto timeout = section.find(
      "<td class=down>lock_timeout</td><td>"
      "<span class=lock>" +
      lock + "</span>");
  const auto wait = section.find("<td>lock_wait acquired</td><td><span class=lock>" + lock);
  ASSERT_NE(timeout, std::string::npos) << section;
  ASSERT_NE(wait, std::string::npos) << section;
  EXPECT_LT(timeout, wait);
  EXPECT_NE(
      section.find("pid " + std::to_string(waiter.Pid()) + " &lt;img src=x onerror=alert(1)&gt;"),
      std::string::npos)
      << section;
  EXPECT_NE(section.find("pid " + std::to_string(holder.Pid()) + " holder-app"), std::string::npos);
  EXPECT_NE(section.find("between polls"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("<td class=down>lock_timeout <small>(log)</small>"), std::string::npos);

  const std::string json = RenderLocksJson({poller.Latest()}, {});
  EXPECT_TRUE(ValidJson(json)) << json;
  const auto polls = json.find("\"between_polls\":[{");
  ASSERT_NE(polls, std::string::npos) << json;
  EXPECT_EQ(
      json.find("\"kind\":\"lock_timeout\",\"cause\":\"lock_timeout\",\"evidence\":\"log\"", polls),
      json.find("\"kind\":", polls))
      << json;
  EXPECT_NE(json.find("\"server_log\":{\"up\":true"), std::string::npos);
  waiter.Close();
  holder.Close();
}

TEST(OnCall, RunbooksAreServedAndUnknownNamesAre404) {
  Served s(TestPoll({.interval_ms = 500}));
  const Response r = Get(s.Url("/runbooks/PglockAdvisoryLockLost"));
  EXPECT_EQ(r.code, 200);
  EXPECT_NE(r.body.find("<h1>PglockAdvisoryLockLost</h1>"), std::string::npos);
  EXPECT_NE(r.body.find("<table>"), std::string::npos);
  EXPECT_NE(r.body.find("href=\"/runbooks/PglockAdvisoryLockTakeover\""), std::string::npos);
  EXPECT_EQ(Get(s.Url("/runbooks/README")).code, 200);
  for (const char* bad :
       {"/runbooks/Nope", "/runbooks/../README.md", "/runbooks/",
        "/runbooks/%2e%2e%2fCMakeLists.txt", "/runbooks/PglockAdvisoryLockLost.md"}) {
    EXPECT_EQ(Get(s.Url(bad)).code, 404) << bad;
  }
  EXPECT_NE(Get(s.Url("/")).body.find("href=\"/locks\""), std::string::npos);
}

}  // namespace
}  // namespace pglock
