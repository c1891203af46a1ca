// Before a migration, against a real PostgreSQL and the real HTTP server: the conflict table as the
// server applies it, an idle-in-transaction reader that a DDL would wait for, readers queued behind
// a waiting DDL, a row lock, the role's lock_timeout from each level, ?fail=1 through curl, ?wait=
// clearing when the holder commits, bad requests, hostile names, a flood refused while polls and
// scrapes go on.
#include "exporter/snapshot/preflight.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <utility>
#include <vector>

#include "exporter/http/oncall.h"
#include "exporter/http/server.h"
#include "exporter/poll/poller.h"
#include "tests/support/build_paths.h"
#include "tests/support/client_process.h"
#include "tests/support/http_get.h"
#include "tests/support/lock_libraries.h"
#include "tests/support/pg_environment.h"
#include "tests/support/pgbouncer.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::HttpGet;
using testing::HttpResponse;
using testing::LockLibrariesPath;
using testing::Pg;
using testing::Python3;
using testing::TestPoll;
using testing::TestSession;
using testing::ValidJson;
using testing::WaitFor;

constexpr const char* kDb = "preflight";

// A started poller (polls every 500 ms) serving over HTTP on a free port.
class Served {
 public:
  explicit Served(std::vector<std::string> preflight_tables = {},
                  std::vector<PoolerConfig> poolers = {})
      : poller_(Target(std::move(preflight_tables), std::move(poolers)),
                TestPoll({.interval_ms = 500})) {
    WebConfig web;
    web.listen_address = "127.0.0.1:0";
    const Status started = HttpServer::Start(
        web, [this] { return SnapshotList{poller_.Latest()}; }, ExporterInfo{"test", "test"},
        &server_);
    EXPECT_TRUE(started.ok()) << started.message();
    EXPECT_NE(server_, nullptr);
    poller_.Start();
    EXPECT_TRUE(WaitFor(15, [&] {
      const auto s = poller_.Latest();
      return s && s->up;
    }));
  }
  ~Served() { poller_.Stop(); }
  Poller& poller() { return poller_; }
  std::string Url(const std::string& query) const {
    return "http://127.0.0.1:" + std::to_string(server_->ListeningPorts().at(0)) +
           "/api/v1/preflight?" + query;
  }
  std::string Metrics() const {
    return HttpGet("http://127.0.0.1:" + std::to_string(server_->ListeningPorts().at(0)) +
                   "/metrics")
        .body;
  }
  HttpResponse Ask(const std::string& query, int max_seconds = 20) const {
    return HttpGet(Url(query), max_seconds);
  }

 private:
  static TargetConfig Target(std::vector<std::string> preflight_tables,
                             std::vector<PoolerConfig> poolers) {
    TargetConfig t;
    t.poolers = std::move(poolers);
    t.name = "main";
    t.dsn = Pg().Dsn(kDb);
    t.preflight_tables = std::move(preflight_tables);
    return t;
  }
  Poller poller_;
  std::unique_ptr<HttpServer> server_;
};

// A Python expression over the parsed body `d`, printed: "d['verdict']".
std::string Json(const std::string& body, const std::string& expr) {
  char path[] = "/tmp/pglock_preflight_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "<no temp file>";
  FILE* f = fdopen(fd, "w");
  fwrite(body.data(), 1, body.size(), f);
  fclose(f);
  std::string script = "import json,sys; d=json.load(open(sys.argv[1])); print(" + expr + ")";
  std::string quoted = "'";
  for (const char c : script) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  FILE* p = popen((Python3() + " -c " + quoted + " " + path + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n = 0;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (p != nullptr) pclose(p);
  unlink(path);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class PreflightTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (Pg().Scalar("SELECT count(*) FROM pg_database WHERE datname = 'preflight'") == "0") {
      Pg().Exec("CREATE DATABASE preflight");
    }
    Pg().Exec(
        "DROP TABLE IF EXISTS orders; CREATE TABLE orders (id int PRIMARY KEY, note text);"
        "INSERT INTO orders VALUES (1, 'a'), (2, 'b')",
        kDb);
  }
};

// "AccessShareLock" -> "ACCESS SHARE", as LOCK TABLE writes the mode.
std::string LockTableMode(const std::string& mode) {
  std::string o;
  for (size_t i = 0; i + 4 < mode.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(mode[i]))) o += ' ';
    o += static_cast<char>(std::toupper(static_cast<unsigned char>(mode[i])));
  }
  return o;
}

TEST_F(PreflightTest, TheConflictTableIsTheServers) {
  // Each held mode against each requested one: LOCK TABLE ... NOWAIT fails exactly when the
  // exporter says the two conflict.
  TestSession holder(Pg().Dsn(kDb));
  TestSession asker(Pg().Dsn(kDb));
  int checked = 0;
  for (const char* held : kTableLockModes) {
    holder.Query("BEGIN");
    holder.Query("LOCK TABLE orders IN " + LockTableMode(held) + " MODE");
    for (const char* wanted : kTableLockModes) {
      asker.Query("BEGIN");
      const std::string error =
          asker.QueryError("LOCK TABLE orders IN " + LockTableMode(wanted) + " MODE NOWAIT");
      asker.Query("ROLLBACK");
      EXPECT_EQ(!error.empty(), LockModesConflict(wanted, held))
          << wanted << " asked while " << held << " is held: " << error;
      ++checked;
    }
    holder.Query("ROLLBACK");
  }
  EXPECT_EQ(checked, 64);
}

TEST_F(PreflightTest, AnIdleInTransactionReaderMakesTheDdlWaitAndIsNamedWithItsVerdict) {
  Served s;
  const HttpResponse before = s.Ask("table=public.orders");
  ASSERT_EQ(before.code, 200) << before.body;
  EXPECT_EQ(Json(before.body, "d['verdict']"), "clear");

  TestSession reader(Pg().Dsn(kDb) + " application_name=report-app");
  reader.Query("BEGIN");
  reader.Query("SELECT count(*) FROM orders");
  const std::string pid = std::to_string(reader.Pid());
  const HttpResponse r = s.Ask("table=orders");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_TRUE(ValidJson(r.body)) << r.body;
  EXPECT_EQ(Json(r.body, "d['verdict']"), "would_wait");
  EXPECT_EQ(Json(r.body, "d['table']"), "public.orders");
  EXPECT_EQ(Json(r.body, "d['mode']"), "AccessExclusiveLock");
  EXPECT_EQ(Json(r.body, "[c['pid'] for c in d['conflicts']]"), "[" + pid + "]");
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['application_name']"), "report-app");
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['mode']"), "AccessShareLock");
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['state']"), "idle in transaction");
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['idle_in_transaction_seconds'] is not None"), "True");
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['root_pid']"), pid);
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['verdict']['action']"), "terminate");
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['verdict']['command']"),
            "SELECT pg_terminate_backend(" + pid + ")");
  EXPECT_EQ(Json(r.body, "d['poll_age_seconds'] < 5"), "True");
  EXPECT_NE(r.body.find("Give ?role="), std::string::npos);

  // The page answers for a schema.table typed into its box, escaped; a lock name is not asked.
  const std::string base = s.Url("").substr(0, s.Url("").find("/api/"));
  const HttpResponse page = HttpGet(base + "/locks?lock=public.orders", 20);
  EXPECT_EQ(page.code, 200);
  EXPECT_NE(page.body.find("Before a migration"), std::string::npos) << page.body;
  EXPECT_NE(page.body.find("would_wait"), std::string::npos);
  EXPECT_NE(page.body.find("pg_terminate_backend(" + pid + ")"), std::string::npos);
  EXPECT_EQ(HttpGet(base + "/locks?lock=sweep", 20).body.find("Before a migration"),
            std::string::npos);

  // A weaker mode that an AccessShareLock does not conflict with.
  EXPECT_EQ(Json(s.Ask("table=orders&mode=ShareUpdateExclusiveLock").body, "d['verdict']"),
            "clear");

  // For pipelines: curl --fail-with-body exits 22 on the 409, with the same body.
  const std::string curl =
      "curl -s -o /dev/null --max-time 20 --fail-with-body '" + s.Url("table=orders&fail=1") + "'";
  EXPECT_EQ(WEXITSTATUS(std::system(curl.c_str())), 22);
  const HttpResponse failed = s.Ask("table=orders&fail=1");
  EXPECT_EQ(failed.code, 409);
  EXPECT_EQ(Json(failed.body, "d['verdict']"), "would_wait");
  const std::string clear = "curl -s -o /dev/null --max-time 20 --fail-with-body '" +
                            s.Url("table=orders&fail=1&mode=RowExclusiveLock") + "'";
  EXPECT_EQ(WEXITSTATUS(std::system(clear.c_str())), 0);

  // ?wait= holds the answer until the reader commits.
  auto waited =
      std::async(std::launch::async, [&] { return s.Ask("table=orders&fail=1&wait=30s", 40); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto committed = std::chrono::steady_clock::now();
  reader.Query("COMMIT");
  const HttpResponse after = waited.get();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - committed).count();
  EXPECT_EQ(after.code, 200) << after.body;
  EXPECT_EQ(Json(after.body, "d['verdict']"), "clear");
  EXPECT_LT(took, 15) << "the held request should clear within a few polls of the commit";
}

TEST_F(PreflightTest, ReadersQueuedBehindAWaitingDdlMakeItWouldBlock) {
  Served s;
  TestSession holder(Pg().Dsn(kDb) + " application_name=idle-holder");
  holder.Query("BEGIN");
  holder.Query("SELECT count(*) FROM orders");
  TestSession ddl(Pg().Dsn(kDb) + " application_name=migration");
  ddl.Send("ALTER TABLE orders ADD COLUMN IF NOT EXISTS extra int");
  TestSession reader(Pg().Dsn(kDb) + " application_name=web");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " +
                       std::to_string(ddl.Pid())) == "1";
  }));
  reader.Send("SELECT count(*) FROM orders");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " +
                       std::to_string(reader.Pid())) == "1";
  }));
  const HttpResponse r = s.Ask("table=public.orders");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Json(r.body, "d['verdict']"), "would_block");
  EXPECT_EQ(Json(r.body, "sorted(w['pid'] for w in d['waiting'])"),
            "[" + std::to_string(std::min(ddl.Pid(), reader.Pid())) + ", " +
                std::to_string(std::max(ddl.Pid(), reader.Pid())) + "]");
  // Behind the holder and both waiters; every one of them has the holder as its root.
  EXPECT_EQ(Json(r.body, "len(d['conflicts'])"), "3");
  EXPECT_EQ(Json(r.body, "set(c['root_pid'] for c in d['conflicts'])"),
            "{" + std::to_string(holder.Pid()) + "}");
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['pid']"), std::to_string(holder.Pid()));
  // A weak mode queues behind the waiting ALTER too: PostgreSQL queues a request behind a waiter
  // whose mode conflicts with it.
  EXPECT_EQ(Json(s.Ask("table=orders&mode=RowShareLock").body, "d['verdict']"), "would_block");
  holder.Query("COMMIT");
  EXPECT_TRUE(WaitFor(10, [&] { return ddl.SendDone(); }));
  EXPECT_TRUE(WaitFor(10, [&] { return reader.SendDone(); }));
}

TEST_F(PreflightTest, ARowLockConflictsWithAccessExclusiveNotWithShareUpdateExclusive) {
  Served s;
  TestSession worker(Pg().Dsn(kDb) + " application_name=job-worker");
  worker.Query("BEGIN");
  worker.Query("SELECT id FROM orders WHERE id = 1 FOR UPDATE");
  const HttpResponse strong = s.Ask("table=orders");
  EXPECT_EQ(Json(strong.body, "d['verdict']"), "would_wait") << strong.body;
  EXPECT_EQ(Json(strong.body, "d['conflicts'][0]['mode']"), "RowShareLock");
  EXPECT_EQ(Json(s.Ask("table=orders&mode=ShareUpdateExclusiveLock").body, "d['verdict']"),
            "clear");
  EXPECT_EQ(Json(s.Ask("table=orders&mode=ExclusiveLock").body, "d['verdict']"), "would_wait");
  worker.Query("ROLLBACK");
}

TEST_F(PreflightTest, TheRolesLockTimeoutFromEachLevel) {
  Pg().Exec(
      "DROP ROLE IF EXISTS migrator; CREATE ROLE migrator; "
      "DROP ROLE IF EXISTS deployer; CREATE ROLE deployer");
  Served s;
  const auto lock_timeout = [&](const std::string& role) {
    const HttpResponse r = s.Ask("table=orders&role=" + role);
    return Json(r.body,
                "(int(d['role_timeouts']['lock_timeout']['seconds']), "
                "d['role_timeouts']['lock_timeout']['source'])");
  };
  EXPECT_EQ(lock_timeout("migrator"), "(0, 'server')");
  EXPECT_NE(s.Ask("table=orders&role=migrator").body.find("No lock_timeout for role migrator"),
            std::string::npos);
  Pg().Exec("ALTER ROLE migrator SET lock_timeout = '3s'");
  EXPECT_TRUE(WaitFor(10, [&] { return lock_timeout("migrator") == "(3, 'role migrator')"; }))
      << lock_timeout("migrator");
  Pg().Exec("ALTER ROLE migrator IN DATABASE preflight SET lock_timeout = '2s'");
  EXPECT_TRUE(WaitFor(10, [&] {
    return lock_timeout("migrator") == "(2, 'role migrator in database preflight')";
  })) << lock_timeout("migrator");
  Pg().Exec("ALTER DATABASE preflight SET lock_timeout = '4s'");
  EXPECT_TRUE(WaitFor(10, [&] { return lock_timeout("deployer") == "(4, 'database preflight')"; }))
      << lock_timeout("deployer");
  EXPECT_EQ(lock_timeout("migrator"), "(2, 'role migrator in database preflight')");
  EXPECT_EQ(Json(s.Ask("table=orders&role=migrator").body,
                 "int(d['role_timeouts']['statement_timeout']['seconds'])"),
            "0");
  Pg().Exec("ALTER DATABASE preflight RESET lock_timeout; DROP ROLE migrator; DROP ROLE deployer");
}

TEST_F(PreflightTest, BadRequestsAreRefusedAndHostileNamesEscaped) {
  Pg().Exec("DROP TABLE IF EXISTS \"we\"\"ird\\<b>\"; CREATE TABLE \"we\"\"ird\\<b>\" (x int)",
            kDb);
  Served s;
  const auto status = [&](const std::string& q) { return s.Ask(q).code; };
  EXPECT_EQ(status("table=public.nosuch"), 400);
  EXPECT_NE(s.Ask("table=public.nosuch").body.find("no table public.nosuch in database preflight"),
            std::string::npos);
  EXPECT_EQ(status(""), 400);
  EXPECT_EQ(status("table=a.b.c"), 400);
  EXPECT_EQ(status("table=%22unterminated"), 400);
  EXPECT_EQ(status("table=orders;DROP%20TABLE%20orders"), 400);
  EXPECT_EQ(status("table=orders&mode=ACCESS%20EXCLUSIVE"), 400);
  EXPECT_EQ(status("table=orders&role=nobody_here"), 400);
  EXPECT_EQ(status("table=orders&target=other"), 400);
  EXPECT_EQ(status("table=orders&wait=11m"), 400);
  EXPECT_EQ(status("table=orders&fail=maybe"), 400);
  EXPECT_EQ(Pg().Scalar("SELECT count(*) FROM orders", kDb), "2");
  // The quoted name, URL-encoded: "we""ird\<b>"
  const HttpResponse r = s.Ask("table=public.%22we%22%22ird%5C%3Cb%3E%22");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_TRUE(ValidJson(r.body)) << r.body;
  EXPECT_EQ(Json(r.body, "d['table']"), "public.we\"ird\\<b>");
  const HttpResponse bad = s.Ask("table=%22%3Cscript%3E%22.x");
  EXPECT_EQ(bad.code, 400);
  EXPECT_TRUE(ValidJson(bad.body)) << bad.body;
}

TEST_F(PreflightTest, AFloodIsRefusedWhilePollsAndScrapesGoOn) {
  Served s;
  TestSession reader(Pg().Dsn(kDb));
  reader.Query("BEGIN");
  reader.Query("SELECT count(*) FROM orders");
  const auto before = s.poller().Latest();
  // Twenty held requests at once: a quarter of the HTTP threads take them, the rest get 429.
  using Clock = std::chrono::steady_clock;
  std::vector<std::future<std::pair<HttpResponse, Clock::time_point>>> flood;
  for (int i = 0; i < 20; ++i) {
    flood.push_back(std::async(std::launch::async, [&] {
      HttpResponse r = s.Ask("table=orders&wait=4s", 30);
      return std::make_pair(std::move(r), Clock::now());
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const HttpResponse page = HttpGet(s.Url("").substr(0, s.Url("").find("/api/")) + "/metrics", 5);
  const auto scraped = Clock::now();
  EXPECT_EQ(page.code, 200);
  int ok = 0, refused = 0;
  for (auto& f : flood) {
    const auto [r, answered] = f.get();
    if (r.code == 200) {
      ++ok;
      // The scrape was answered while the held requests still held their threads: not queued
      // behind them. (A bound in seconds failed on a machine busy with the whole test run.)
      EXPECT_LT(scraped, answered) << "the scrape waited for a held request";
    }
    if (r.code == 429) ++refused;
  }
  EXPECT_EQ(ok + refused, 20);
  EXPECT_LE(ok, 4);
  EXPECT_GE(refused, 16);
  // The polls went on at their pace: about 8 polls in the 4 s the held requests took, none of them
  // waiting for a held request (which would make it last the request's 4 s).
  const auto after = s.poller().Latest();
  EXPECT_GT(after->last_success, before->last_success + 3);
  EXPECT_LT(after->poll_duration, 4.0);
  reader.Query("ROLLBACK");
}

TEST_F(PreflightTest, AHolderThroughPgbouncerIsSaidPooled) {
  testing::Pgbouncer bouncer;
  ASSERT_TRUE(bouncer.started());
  Served s({}, {{.name = "pgb", .admin_dsn = bouncer.Dsn("pgbouncer")}});
  TestSession pooled(bouncer.Dsn(kDb) + " application_name=pooled-app");
  pooled.Query("BEGIN");
  pooled.Query("SELECT count(*) FROM orders");
  const std::string backend = Pg().Scalar(
      "SELECT pid FROM pg_locks WHERE locktype = 'relation' AND mode = 'AccessShareLock' AND "
      "relation = (SELECT oid FROM pg_class WHERE relname = 'orders') LIMIT 1",
      kDb);
  ASSERT_FALSE(backend.empty());
  EXPECT_TRUE(WaitFor(10, [&] {
    const HttpResponse r = s.Ask("table=public.orders");
    return Json(r.body, "d['conflicts'][0]['pooled']['pooler']") == "pgb";
  })) << s.Ask("table=public.orders").body;
  const HttpResponse r = s.Ask("table=public.orders");
  EXPECT_EQ(Json(r.body, "d['verdict']"), "would_wait");
  EXPECT_EQ(Json(r.body, "d['conflicts'][0]['pid']"), backend);
  pooled.Query("COMMIT");
}

// knex's and node-pg-migrate's own migrations, run as a deploy step behind the gate: refused while
// a reader sits idle in transaction, run once it commits.
TEST_F(PreflightTest, MigrationToolsRunBehindTheGate) {
  const std::string modules = LockLibrariesPath();
  ASSERT_FALSE(modules.empty()) << "scripts/lib/lock_libraries.sh failed";
  Served s;
  const std::string url =
      "postgresql://postgres@127.0.0.1:" + std::to_string(Pg().port()) + "/" + kDb;
  for (const std::string tool : {"knex", "node-pg-migrate"}) {
    SCOPED_TRACE(tool);
    const std::string column = tool == "knex" ? "knex_column" : "npm_column";
    TestSession reader(Pg().Dsn(kDb) + " application_name=report-app");
    reader.Query("BEGIN");
    reader.Query("SELECT count(*) FROM orders");
    const std::string gate = "curl -sS --max-time 60 --fail-with-body '" +
                             s.Url("table=public.orders&role=postgres&fail=1&wait=40s") + "'";
    // The gate alone, at once: refused.
    EXPECT_EQ(WEXITSTATUS(std::system(("curl -s -o /dev/null --max-time 20 --fail-with-body '" +
                                       s.Url("table=public.orders&fail=1") + "'")
                                          .c_str())),
              22);
    testing::ClientProcess deploy(
        {"sh", "-c",
         gate + " >/dev/null && exec node " + testing::SourceDir() +
             "/tests/integration/npm/migrate.js " + tool + " " + url + " " + column},
        {"NODE_PATH=" + modules});
    ASSERT_TRUE(deploy.ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    EXPECT_EQ(Pg().Scalar("SELECT count(*) FROM pg_attribute WHERE attrelid = 'orders'::regclass "
                          "AND attname = '" +
                              column + "'",
                          kDb),
              "0")
        << "the migration ran before the gate cleared";
    reader.Query("COMMIT");
    EXPECT_EQ(deploy.Wait(60), 0) << deploy.Output();
    EXPECT_NE(deploy.Output().find("migrated"), std::string::npos) << deploy.Output();
    EXPECT_EQ(Pg().Scalar("SELECT count(*) FROM pg_attribute WHERE attrelid = 'orders'::regclass "
                          "AND attname = '" +
                              column + "'",
                          kDb),
              "1");
  }
}

// The value of the series `name{labels}` in a /metrics text; -1 when absent.
double Sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + series.size() + 2);
}

TEST_F(PreflightTest, WatchedTablesGaugesFollowTheHolder) {
  Served s({"public.orders", "nosuch"});
  const std::string would_wait = "pglock_ddl_would_wait{target=\"main\",table=\"public.orders\"}";
  const std::string age =
      "pglock_ddl_conflict_age_seconds{target=\"main\",table=\"public.orders\"}";
  EXPECT_TRUE(WaitFor(10, [&] { return Sample(s.Metrics(), would_wait) == 0; })) << s.Metrics();
  EXPECT_EQ(s.Metrics().find("table=\"nosuch\""), std::string::npos);
  EXPECT_NE(
      s.Metrics().find("pglock_collector_up{target=\"main\",collector=\"preflight_tables\"} 1"),
      std::string::npos);
  TestSession reader(Pg().Dsn(kDb));
  reader.Query("BEGIN");
  reader.Query("SELECT count(*) FROM orders");
  EXPECT_TRUE(WaitFor(10, [&] {
    const std::string m = s.Metrics();
    return Sample(m, would_wait) == 1 && Sample(m, age) >= 2;
  })) << s.Metrics();
  reader.Query("COMMIT");
  EXPECT_TRUE(WaitFor(10, [&] {
    const std::string m = s.Metrics();
    return Sample(m, would_wait) == 0 && Sample(m, age) == 0;
  })) << s.Metrics();
}

}  // namespace
}  // namespace pglock
