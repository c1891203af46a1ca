// Every batch collector against a real PostgreSQL: its statements run and parse; its parser reads
// columns by name (the same rows in another column order parse to the same data); a missing
// column is an unexpected-shape error that names it. Also the tiered plan and the one-round-trip
// batch with its SET LOCAL timeouts.
#include "exporter/collectors/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "exporter/pg/batch.h"
#include "exporter/pg/connection.h"
#include "exporter/pg/session.h"
#include "exporter/poll/poller.h"
#include "tests/support/pg_environment.h"
#include "tests/support/pgbouncer.h"
#include "tests/support/statement_sql.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::StatementSql;
using testing::TestSession;

const auto kDeadline = [] { return SteadyClock::now() + std::chrono::seconds(10); };

// Every collector's prepared statements, as the poller prepares them on a new connection.
std::vector<PreparedStatement> AllPrepared(int server_version_num) {
  std::vector<PreparedStatement> out;
  for (const Collector* c : Collectors()) {
    for (PreparedStatement& p : c->Prepared(server_version_num)) out.push_back(std::move(p));
  }
  return out;
}

std::unique_ptr<PgConnection> Connect() {
  std::unique_ptr<PgConnection> conn;
  Status s = PgConnection::Connect(Pg().Dsn(), {}, kDeadline(), &conn);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!conn) return conn;
  s = PrepareStatements(*conn, AllPrepared(conn->ServerVersionNum()), kDeadline());
  EXPECT_TRUE(s.ok()) << s.message();
  return conn;
}

// The SQL of a batch statement (tests/support/statement_sql.h).
std::string SqlOf(const PgConnection& conn, const std::string& statement) {
  return StatementSql(AllPrepared(conn.ServerVersionNum()), statement);
}

PollPlan Plan(PgConnection& conn, bool inventory) {
  PollPlan plan;
  plan.server_version_num = conn.ServerVersionNum();
  plan.inventory = inventory;
  return plan;
}

// The parts of a poll the batch collectors fill, as text, to compare two parses.
// Only the sessions in `pids`: other tests' sessions may come and go between two parses.
std::string Fingerprint(const PollData& d, const std::set<int>& pids) {
  std::ostringstream o;
  o << d.server_version << '|' << d.server_version_num << '|' << d.postmaster_start << '|';
  for (const Session& s : d.sessions) {
    if (pids.count(s.pid) == 0) continue;
    o << s.pid << ',' << s.datname << ',' << s.usename << ',' << s.application_name << ','
      << s.state << ',' << s.waiting_on_lock << s.advisory_wait << ',' << s.blocked_by.size()
      << ';';
  }
  o << '|';
  for (const AdvisoryLock& l : d.locks) {
    if (pids.count(l.pid) == 0) continue;
    o << l.pid << ',' << RenderAdvisoryKey(l.key) << ',' << l.granted << l.exclusive << ';';
  }
  o << '|';
  for (const ServerSetting& s : d.settings) o << s.name << '=' << s.seconds << ';';
  for (const SettingOverride& s : d.overrides) o << s.role << ':' << s.name << '=' << s.seconds;
  o << '|' << (d.database_stats ? d.database_stats->size() : 0);
  return o.str();
}

// Runs `batch` and parses it with every collector.
Status RunAndParse(PgConnection& conn, const PollPlan& plan, const StatementBatch& batch,
                   PollData* data) {
  BatchResults results;
  if (Status s = batch.Run(conn, QueryTimeouts{5000, 500}, kDeadline(), &results); !s.ok()) {
    return s;
  }
  for (const Collector* c : Collectors()) {
    if (Status s = c->Parse(plan, results, data); !s.ok()) return s;
  }
  return Status::Ok();
}

// The batch of every collector, with `name`'s statement rewritten by `rewrite`.
template <typename Rewrite>
StatementBatch Rewritten(const PgConnection& conn, const PollPlan& plan, const std::string& name,
                         Rewrite rewrite) {
  StatementBatch all;
  for (const Collector* c : Collectors()) c->Plan(plan, &all);
  StatementBatch out;
  for (const auto& [n, sql] : all.Statements()) {
    const auto phase =
        n == "settings" ? StatementBatch::Phase::kBeforeTimeouts : StatementBatch::Phase::kMain;
    out.Add(n, n == name ? rewrite(SqlOf(conn, sql)) : sql, phase);
  }
  return out;
}

// The column names `sql` returns, in order.
std::vector<std::string> ColumnsOf(PgConnection& conn, const std::string& sql) {
  std::optional<PgResult> r;
  const Status s = conn.ExecOne("SELECT * FROM (" + sql + ") q LIMIT 0", {}, kDeadline(), &r);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<std::string> out;
  for (int i = 0; r && i < r->Columns(); ++i) out.emplace_back(r->ColumnName(i));
  return out;
}

// SELECT <columns> FROM (<sql>) q
std::string Project(PgConnection& conn, const std::string& sql,
                    const std::vector<std::string>& columns) {
  std::string list;
  for (const std::string& c : columns) list += (list.empty() ? "" : ", ") + conn.QuoteIdentifier(c);
  return "SELECT " + list + " FROM (" + sql + ") q";
}

class CollectorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    conn_ = Connect();
    ASSERT_TRUE(conn_);
    holder_ = std::make_unique<TestSession>(Pg().Dsn());
    waiter_ = std::make_unique<TestSession>(Pg().Dsn());
    holder_->Query("SELECT pg_advisory_lock(4242)");
    waiter_->Send("SELECT pg_advisory_lock(4242)");
    ASSERT_TRUE(testing::WaitFor(5, [] {
      return Pg().Scalar(
                 "SELECT count(*) FROM pg_locks WHERE NOT granted AND "
                 "locktype = 'advisory'") == "1";
    }));
    // Backends of earlier tests end asynchronously, and the fingerprints compare whole polls:
    // wait until the other sessions are the exporter's and the waiter (and Pg()'s kept one, idle).
    ASSERT_TRUE(testing::WaitFor(5, [this] {
      return holder_->Query(
                 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                 "AND pid <> pg_backend_pid() AND application_name <> 'harness'") == "2";
    }));
  }
  void TearDown() override {
    holder_->Query("SELECT pg_advisory_unlock_all()");
    ASSERT_TRUE(testing::WaitFor(5, [this] { return waiter_->SendDone(); }));
  }

  std::unique_ptr<PgConnection> conn_;
  std::unique_ptr<TestSession> holder_, waiter_;
};

TEST_F(CollectorsTest, EveryStatementRunsAndParsesInOneBatch) {
  for (const bool inventory : {true, false}) {
    SCOPED_TRACE(inventory ? "inventory" : "tiered");
    const PollPlan plan = Plan(*conn_, inventory);
    StatementBatch batch;
    for (const Collector* c : Collectors()) c->Plan(plan, &batch);
    PollData data;
    const Status s = RunAndParse(*conn_, plan, batch, &data);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_GT(data.now, 0);
    EXPECT_EQ(data.inventory, inventory);
    // idle_session_timeout and pg_stat_database.sessions_* are 14+.
    const bool v14 = plan.server_version_num >= 140000;
    EXPECT_EQ(data.settings.size(), v14 ? 7u : 6u);
    EXPECT_EQ(data.database_stats.has_value(), v14);
    const bool waiter_seen =
        std::any_of(data.sessions.begin(), data.sessions.end(), [&](const Session& x) {
          return x.pid == waiter_->Pid() && x.advisory_wait &&
                 x.blocked_by == std::vector<int>{holder_->Pid()};
        });
    EXPECT_TRUE(waiter_seen);
    // An inventory reads the holder and the waiter; the tiered poll only the waiter.
    EXPECT_EQ(data.locks.size(), inventory ? 2u : 1u);
  }
}

// The read of pg_locks returns a session's granted advisory locks grouped into one row per
// database, mode and key form: every lock still parses on its own, with its key, mode and holder,
// whatever its form and sign, and with the row-lock variant too.
TEST_F(CollectorsTest, EveryLockOfAGroupedRowParsesOnItsOwn) {
  holder_->Query("SELECT count(pg_advisory_lock(k)) FROM generate_series(1, 300) k");
  holder_->Query("SELECT pg_advisory_lock_shared(-1), pg_advisory_lock(7, 8)");
  holder_->Query("SELECT pg_advisory_lock_shared(7, 9), pg_advisory_lock(4294967296)");
  using Lock = std::tuple<uint32_t, uint32_t, int, bool>;  // classid, objid, objsubid, exclusive
  std::set<Lock> want = {{0, 4242, 1, true},
                         {0xffffffffu, 0xffffffffu, 1, false},
                         {7, 8, 2, true},
                         {7, 9, 2, false},
                         {1, 0, 1, true}};
  for (uint32_t k = 1; k <= 300; ++k) want.insert({0, k, 1, true});
  for (const bool row_locks : {false, true}) {
    SCOPED_TRACE(row_locks ? "with the row-lock tables' xids" : "advisory");
    PollPlan plan = Plan(*conn_, true);
    plan.row_locks = row_locks;
    StatementBatch batch;
    for (const Collector* c : Collectors()) c->Plan(plan, &batch);
    PollData data;
    const Status s = RunAndParse(*conn_, plan, batch, &data);
    ASSERT_TRUE(s.ok()) << s.message();
    std::set<Lock> held;
    size_t rows = 0;
    const std::string db = Pg().Scalar("SELECT oid FROM pg_database WHERE datname = 'postgres'");
    for (const AdvisoryLock& l : data.locks) {
      if (l.pid != holder_->Pid()) continue;
      ++rows;
      EXPECT_TRUE(l.granted);
      EXPECT_EQ(std::to_string(l.key.datid), db);
      held.insert({l.key.classid, l.key.objid, l.key.objsubid, l.exclusive});
    }
    EXPECT_EQ(rows, want.size());
    EXPECT_EQ(held, want);
    const auto waiting = std::count_if(data.locks.begin(), data.locks.end(), [&](const auto& l) {
      return l.pid == waiter_->Pid() && !l.granted && l.key.objid == 4242;
    });
    EXPECT_EQ(waiting, 1);
  }
}

// The plan of `sql` on the fixture's connection (EXPLAIN, no costs), one line a node; "" when it
// cannot be explained (the test then fails on what it looks for).
std::string PlanOf(PgConnection& conn, const std::string& sql) {
  std::vector<PgResult> results;
  if (!conn.Exec("EXPLAIN (COSTS OFF) " + sql, {}, kDeadline(), &results).ok()) return "";
  std::string plan;
  for (int i = 0; i < results.back().Rows(); ++i)
    plan += std::string(results.back().Text(i, 0)) + "\n";
  return plan;
}

// Grouped by sorting, the read of pg_locks costs more than sending every row: the planner must
// hash, for every variant of the statement and on every major (the matrix runs this test).
// The quiet holders' look-up (queries/advisory_locks_quiet.sql) is the small side of the join:
// hashed, or looked up once; pg_locks is never the side that is hashed or sorted.
TEST_F(CollectorsTest, TheReadOfPgLocksGroupsByHashing) {
  int quiet = 0;
  for (const PreparedStatement& p : AllPrepared(conn_->ServerVersionNum())) {
    if (p.sql.find("FROM pg_locks") == std::string::npos || p.name == "lock_table_full") continue;
    SCOPED_TRACE(p.name);
    std::string sql = p.sql;
    for (const auto& [param, value] : {std::pair{"$1", "'{1,2,3}'"}, {"$2", "'{1.5,2.5,3.5}'"}}) {
      for (size_t at = sql.find(param); at != std::string::npos; at = sql.find(param, at)) {
        sql.replace(at, 2, value);
      }
    }
    const std::string plan = PlanOf(*conn_, sql);
    EXPECT_NE(plan.find("HashAggregate"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("Sort"), std::string::npos) << plan;
    if (sql.find("pg_stat_get_activity(k.pid)") == std::string::npos) continue;
    ++quiet;
    EXPECT_NE(plan.find("Left Join"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("Right Join"), std::string::npos) << plan;  // pg_locks hashed
    // The generic plan too, which the server may choose after five executions of the prepared
    // statement: it plans the parameters' arrays without their values.
    std::vector<PgResult> ignored;
    ASSERT_TRUE(conn_
                    ->Exec("PREPARE generic_check AS " + p.sql +
                               "; SET plan_cache_mode = force_generic_plan",
                           {}, kDeadline(), &ignored)
                    .ok());
    const std::string generic = PlanOf(*conn_, "EXECUTE generic_check('{1,2,3}', '{1.5,2.5,3.5}')");
    ASSERT_TRUE(
        conn_->Exec("DEALLOCATE generic_check; RESET plan_cache_mode", {}, kDeadline(), &ignored)
            .ok());
    EXPECT_NE(generic.find("HashAggregate"), std::string::npos) << generic;
    EXPECT_EQ(generic.find("Sort"), std::string::npos) << generic;
    EXPECT_NE(generic.find("Left Join"), std::string::npos) << generic;
    EXPECT_EQ(generic.find("Right Join"), std::string::npos) << generic;
  }
  EXPECT_EQ(quiet, 2);
}

// The rows of the advisory collector's statement in `results` that have `pid`.
std::vector<int> RowsOf(const BatchResults& results, int pid) {
  const PgResult* r = results.Find("advisory_locks");
  std::vector<int> rows;
  for (int i = 0; r != nullptr && i < r->Rows(); ++i) {
    if (r->Int(i, 0) == pid) rows.push_back(i);
  }
  return rows;
}

// An inventory, given the last one as its baseline, reads the holder that stayed idle since as one
// row, its count and the sum of its keys, and takes its locks from the baseline; a holder that ran
// a statement since is read in full; a quiet holder whose count or sum disagrees (a statement run
// between the snapshot of the sessions and the read of pg_locks, here a baseline changed by hand)
// turns the poll into a tiered one, whose holders are the last inventory's.
TEST_F(CollectorsTest, AQuietHoldersLocksComeFromTheLastInventory) {
  holder_->Query("SELECT count(pg_advisory_lock(k)) FROM generate_series(1, 300) k");
  holder_->Query(  // both modes, both key forms, negative keys
      "SELECT pg_advisory_lock_shared(-1), pg_advisory_lock(7, 8), "
      "pg_advisory_lock(-4294967296)");
  const int pid = holder_->Pid();
  PollPlan plan = Plan(*conn_, true);
  const auto poll = [&](const PollData* baseline, BatchResults* results, PollData* data) {
    plan.quiet_baseline = baseline;
    StatementBatch batch;
    for (const Collector* c : Collectors()) c->Plan(plan, &batch);
    const Status s = batch.Run(*conn_, QueryTimeouts{5000, 500}, kDeadline(), results);
    ASSERT_TRUE(s.ok()) << s.message();
    for (const Collector* c : Collectors()) {
      const Status p = c->Parse(plan, *results, data);
      ASSERT_TRUE(p.ok()) << p.message();
    }
  };
  const auto held = [&](const PollData& d) {
    return std::count_if(d.locks.begin(), d.locks.end(), [&](const AdvisoryLock& l) {
      return l.pid == pid && l.granted && l.outside_transaction;
    });
  };
  BatchResults first_results;
  PollData first;
  poll(nullptr, &first_results, &first);
  ASSERT_EQ(held(first), 304);
  EXPECT_EQ(RowsOf(first_results, pid).size(), 3u);  // by mode and key form

  BatchResults quiet_results;
  PollData quiet;
  poll(&first, &quiet_results, &quiet);
  const std::vector<int> rows = RowsOf(quiet_results, pid);
  ASSERT_EQ(rows.size(), 1u);
  const PgResult& r = *quiet_results.Find("advisory_locks");
  const auto column = [&](const char* name) {
    for (int c = 0; c < r.Columns(); ++c) {
      if (r.ColumnName(c) == std::string_view(name)) return c;
    }
    ADD_FAILURE() << "no column " << name;
    return 0;
  };
  EXPECT_TRUE(r.IsNull(rows[0], column("granted"))) << "the quiet row's mark";
  EXPECT_TRUE(r.IsNull(rows[0], column("keys")));
  EXPECT_EQ(r.Int(rows[0], column("entries")), 304);
  // 1 + ... + 300 + 4242 - 1 + (7 << 32 | 8) - 4294967296
  EXPECT_EQ(r.Text(rows[0], column("digest")), "25769853175");
  EXPECT_TRUE(quiet.inventory);
  EXPECT_FALSE(quiet.quiet_mismatch);
  EXPECT_EQ(held(quiet), 304);
  // The holder's locks, in no order (two reads may group in another order).
  const auto locks = [&](const PollData& d) {
    std::multiset<std::tuple<uint32_t, uint32_t, uint32_t, int, bool, bool>> out;
    for (const AdvisoryLock& l : d.locks) {
      if (l.pid == pid) {
        out.insert(
            {l.key.datid, l.key.classid, l.key.objid, l.key.objsubid, l.exclusive, l.granted});
      }
    }
    return out;
  };
  EXPECT_EQ(locks(quiet), locks(first));

  holder_->Query("SELECT 1");  // a statement: the holder is read in full, though its locks are
  BatchResults again_results;  // the same
  PollData again;
  poll(&quiet, &again_results, &again);
  ASSERT_EQ(RowsOf(again_results, pid).size(), 3u);
  for (int row : RowsOf(again_results, pid)) {
    EXPECT_FALSE(again_results.Find("advisory_locks")->IsNull(row, column("granted")));
  }
  EXPECT_EQ(held(again), 304);
  EXPECT_EQ(locks(again), locks(first));

  PollData changed = again;  // the holder stays idle; its baseline lost key 7 and gained 9999
  for (AdvisoryLock& l : changed.locks) {
    if (l.pid == pid && l.key.objid == 7) l.key.objid = 9999;
  }
  BatchResults changed_results;
  PollData fell_back;
  poll(&changed, &changed_results, &fell_back);
  EXPECT_FALSE(fell_back.inventory);
  EXPECT_TRUE(fell_back.quiet_mismatch);
  EXPECT_EQ(std::count_if(fell_back.locks.begin(), fell_back.locks.end(),
                          [](const AdvisoryLock& l) { return l.granted; }),
            0);
  EXPECT_TRUE(std::any_of(fell_back.locks.begin(), fell_back.locks.end(), [&](const auto& l) {
    return l.pid == waiter_->Pid() && !l.granted;
  }));  // the pending requests it read stay

  // The count alone disagrees: key 7 lost and key 8 become 15 (now twice), the sum unchanged.
  PollData fewer = again;
  std::erase_if(fewer.locks,
                [&](const AdvisoryLock& l) { return l.pid == pid && l.key.objid == 7; });
  for (AdvisoryLock& l : fewer.locks) {
    if (l.pid == pid && l.key.objid == 8 && l.key.objsubid == 1) l.key.objid = 15;
  }
  BatchResults fewer_results;
  PollData fewer_fell_back;
  poll(&fewer, &fewer_results, &fewer_fell_back);
  EXPECT_TRUE(fewer_fell_back.quiet_mismatch);
  EXPECT_FALSE(fewer_fell_back.inventory);
}

// The sessions' database names come from one hash of pg_database, not from a scan of it per
// session (a nested loop, which the planner picks when it sees the sessions' filter first).
TEST_F(CollectorsTest, TheReadOfTheSessionsHashesTheDatabaseNames) {
  int checked = 0;
  for (const PreparedStatement& p : AllPrepared(conn_->ServerVersionNum())) {
    if (p.name.rfind("activity", 0) != 0) continue;
    SCOPED_TRACE(p.name);
    const std::string plan = PlanOf(*conn_, p.sql);
    EXPECT_NE(plan.find("Hash Left Join"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("Nested Loop"), std::string::npos) << plan;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST_F(CollectorsTest, TieredPlanReadsNoLocksWhenNobodyWaits) {
  holder_->Query("SELECT pg_advisory_unlock_all()");
  ASSERT_TRUE(testing::WaitFor(5, [this] { return waiter_->SendDone(); }));
  const PollPlan plan = Plan(*conn_, false);
  StatementBatch batch;
  for (const Collector* c : Collectors()) c->Plan(plan, &batch);
  PollData data;
  const Status s = RunAndParse(*conn_, plan, batch, &data);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(data.locks.empty());  // the waiter holds 4242 now, but tiers skip holders
  waiter_->Query("SELECT pg_advisory_unlock_all()");
  holder_->Query("SELECT pg_advisory_lock(4242)");
  waiter_->Send("SELECT pg_advisory_lock(4242)");
}

// The settings are read again only when the session's pg_conf_load_time() moved since the poll
// before: otherwise the statement returns no row and the poll carries them over; a reload that
// changes one is read at the next poll the session has taken it in.
TEST_F(CollectorsTest, SettingsAreReadAgainOnlyAfterAReload) {
  // One poll given the settings of the one before (none: a new connection).
  const auto poll = [&](const std::shared_ptr<const PollData>& previous, int* rows) {
    PollPlan plan = Plan(*conn_, false);
    std::optional<SettingsRead> read;
    if (previous) read = SettingsRead{previous->settings, previous->settings_loaded_us};
    plan.settings_read = read ? &*read : nullptr;
    StatementBatch batch;
    for (const Collector* c : Collectors()) c->Plan(plan, &batch);
    BatchResults results;
    const Status s = batch.Run(*conn_, QueryTimeouts{5000, 500}, kDeadline(), &results);
    EXPECT_TRUE(s.ok()) << s.message();
    auto data = std::make_shared<PollData>();
    for (const Collector* c : Collectors()) EXPECT_TRUE(c->Parse(plan, results, data.get()).ok());
    *rows = results.Find("settings") ? results.Find("settings")->Rows() : -1;
    return std::shared_ptr<const PollData>(data);
  };
  const auto lock_timeout = [](const PollData& d) {
    for (const ServerSetting& s : d.settings) {
      if (s.name == "lock_timeout") return s.seconds;
    }
    return -1.0;
  };
  int rows = 0;
  const auto first = poll(nullptr, &rows);
  EXPECT_GE(rows, 6);
  EXPECT_GT(first->settings_loaded_us, 0);
  const auto second = poll(first, &rows);
  EXPECT_EQ(rows, 0) << "read again with no reload";
  EXPECT_EQ(Fingerprint(*second, {}), Fingerprint(*first, {})) << "carried over";
  EXPECT_EQ(second->settings_loaded_us, first->settings_loaded_us);
  EXPECT_EQ(lock_timeout(*second), 0);

  Pg().Exec("ALTER SYSTEM SET lock_timeout = '7s'");
  Pg().Exec("SELECT pg_reload_conf()");
  // The session takes the reload in at a statement of its own; until then it sees no change.
  auto latest = second;
  for (int i = 0; i < 100 && lock_timeout(*latest) != 7; ++i) {
    latest = poll(latest, &rows);
    if (lock_timeout(*latest) != 7) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Pg().Exec("ALTER SYSTEM RESET lock_timeout");
  Pg().Exec("SELECT pg_reload_conf()");
  EXPECT_EQ(lock_timeout(*latest), 7);
  EXPECT_GT(rows, 0);
  EXPECT_GT(latest->settings_loaded_us, first->settings_loaded_us);
}

// The pid of the backend of `conn`, or -1 after a failed expectation.
int BackendPid(PgConnection& conn) {
  std::optional<PgResult> r;
  const Status s = conn.ExecOne("SELECT pg_backend_pid()", {}, kDeadline(), &r);
  if (!s.ok() || !r) {
    ADD_FAILURE() << s.message();
    return -1;
  }
  return std::stoi(r->String(0, 0));
}

// Minor page faults of process `pid` so far (/proc/<pid>/stat, field 10; the server runs on this
// machine), or -1 after a failed expectation.
long MinorFaults(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 1));  // the name may hold spaces
  std::string field;
  for (int i = 3; i <= 10; ++i) fields >> field;  // fields 3 (state) .. 10 (minflt)
  if (!fields || field.empty()) {
    ADD_FAILURE() << "no page fault count in /proc/" << pid << "/stat: " << stat;
    return -1;
  }
  return std::stol(field);
}

// Whether the kernel backs all anonymous memory with huge pages where it can: the faults of a
// poll's regrown heap are then far fewer, and the count of the plain backend below proves nothing.
bool HugePagesAlways() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(in, modes);
  return modes.find("[always]") != std::string::npos;
}

// The exporter's session keeps the memory of one poll for the next (queries/backend_memory.sql):
// at 15k held locks a backend without it gives the read of pg_locks' memory back to the kernel
// after every poll and faults it in again at the next (460-513 faults a poll on PostgreSQL 12 to
// 18, a count that follows the size of each major's lock status data); the exporter's, 5-8.
TEST_F(CollectorsTest, TheExportersBackendFaultsInNoMemoryPollAfterPoll) {
  holder_->Query("SELECT count(pg_advisory_lock(k)) FROM generate_series(1, 15000) k");
  std::unique_ptr<PgConnection> exporters;
  Status s = OpenSession(Pg().Dsn(), "", kDeadline(), nullptr, &exporters);
  ASSERT_TRUE(s.ok()) << s.message();
  s = PrepareStatements(*exporters, AllPrepared(exporters->ServerVersionNum()), kDeadline());
  ASSERT_TRUE(s.ok()) << s.message();
  // Page faults a full poll, after two polls that settle the backend's memory.
  const auto faults_a_poll = [](PgConnection& conn) {
    const PollPlan plan = Plan(conn, true);
    StatementBatch batch;
    for (const Collector* c : Collectors()) c->Plan(plan, &batch);
    const int pid = BackendPid(conn);
    constexpr int kPolls = 5;
    long before = 0;
    for (int i = 0; i < 2 + kPolls; ++i) {
      if (i == 2) before = MinorFaults(pid);
      PollData data;
      const Status polled = RunAndParse(conn, plan, batch, &data);
      EXPECT_TRUE(polled.ok()) << polled.message();
      EXPECT_GE(data.locks.size(), 15000u);
    }
    return (MinorFaults(pid) - before) / kPolls;
  };
  const long plain = faults_a_poll(*conn_);  // the same statements, without the session's setup
  const long exporter = faults_a_poll(*exporters);
  RecordProperty("faults_a_poll_without_setup", std::to_string(plain));
  RecordProperty("faults_a_poll_exporter", std::to_string(exporter));
  if (!HugePagesAlways()) {
    EXPECT_GT(plain, 200) << "a backend no longer gives a poll's memory back: the setup's "
                             "allocation has nothing left to save";
  }
  EXPECT_LT(exporter, 20) << "without the setup: " << plain << " faults a poll";
}

TEST_F(CollectorsTest, ParsersReadColumnsByName) {
  const PollPlan plan = Plan(*conn_, true);
  StatementBatch base;
  for (const Collector* c : Collectors()) c->Plan(plan, &base);
  PollData expected;
  ASSERT_TRUE(RunAndParse(*conn_, plan, base, &expected).ok());
  ASSERT_FALSE(expected.locks.empty());
  for (const auto& [name, sql] : base.Statements()) {
    SCOPED_TRACE(name);
    std::vector<std::string> columns = ColumnsOf(*conn_, SqlOf(*conn_, sql));
    ASSERT_GE(columns.size(), 2u);
    std::rotate(columns.begin(), columns.begin() + 1, columns.end());  // every column moves
    PollData reordered;
    const Status s =
        RunAndParse(*conn_, plan,
                    Rewritten(*conn_, plan, name,
                              [&](const std::string& q) { return Project(*conn_, q, columns); }),
                    &reordered);
    ASSERT_TRUE(s.ok()) << s.message();
    // now() differs between the two transactions; everything else is the same data.
    const std::set<int> ours = {holder_->Pid(), waiter_->Pid()};
    EXPECT_EQ(Fingerprint(reordered, ours), Fingerprint(expected, ours));
  }
}

TEST_F(CollectorsTest, MissingColumnIsAnUnexpectedShapeNamingIt) {
  const PollPlan plan = Plan(*conn_, true);
  StatementBatch base;
  for (const Collector* c : Collectors()) c->Plan(plan, &base);
  for (const auto& [name, sql] : base.Statements()) {
    SCOPED_TRACE(name);
    std::vector<std::string> columns = ColumnsOf(*conn_, SqlOf(*conn_, sql));
    const std::string dropped = columns.back();
    columns.pop_back();
    PollData data;
    const Status s =
        RunAndParse(*conn_, plan,
                    Rewritten(*conn_, plan, name,
                              [&](const std::string& q) { return Project(*conn_, q, columns); }),
                    &data);
    EXPECT_EQ(s.kind(), Status::Kind::kUnexpectedShape) << s.message();
    EXPECT_NE(s.message().find(dropped), std::string::npos) << s.message();
  }
}

TEST_F(CollectorsTest, BatchSetsTheTimeoutsLocallyAfterTheSettings) {
  StatementBatch batch;
  batch.Add("before", "SELECT current_setting('statement_timeout') AS v",
            StatementBatch::Phase::kBeforeTimeouts);
  batch.Add("after", "SELECT current_setting('statement_timeout') AS v");
  BatchResults results;
  ASSERT_TRUE(batch.Run(*conn_, QueryTimeouts{1234, 56}, kDeadline(), &results).ok());
  EXPECT_EQ(results.Find("before")->Text(0, 0), "0");
  EXPECT_EQ(results.Find("after")->Text(0, 0), "1234ms");
  EXPECT_EQ(results.Find("missing"), nullptr);
  // SET LOCAL: the session's own value is back once the batch's transaction ended.
  std::optional<PgResult> after;
  ASSERT_TRUE(conn_->ExecOne("SHOW statement_timeout", {}, kDeadline(), &after).ok());
  EXPECT_EQ(after->Text(0, 0), "0");
}

TEST_F(CollectorsTest, SessionEndCountersAreReadBeforeTheSessionsAndTheSessionsBeforeTheLocks) {
  // An ending backend releases its locks, counts its end, then leaves pg_stat_activity: read in
  // this order, an end counted belongs to a session gone from the poll's pg_stat_activity unless
  // its exit spans the two adjacent reads (EventTracker relies on it; registry.cc says why).
  for (const bool inventory : {true, false}) {
    StatementBatch batch;
    for (const Collector* c : Collectors()) c->Plan(Plan(*conn_, inventory), &batch);
    std::vector<std::string> names;
    for (const auto& [name, sql] : batch.Statements()) names.push_back(name);
    const auto at = [&](const char* name) {
      return std::find(names.begin(), names.end(), name) - names.begin();
    };
    if (conn_->ServerVersionNum() >= 140000) {  // no session end counters before 14
      EXPECT_LT(at("database_stats"), at("activity")) << inventory;
    }
    EXPECT_LT(at("activity"), at("advisory_locks")) << inventory;
    EXPECT_LT(at("advisory_locks"), static_cast<long>(names.size())) << inventory;
  }
}

TEST_F(CollectorsTest, StatusKindsOfFailures) {
  std::vector<PgResult> results;
  Status s = conn_->Exec("SELECT * FROM no_such_table", {}, kDeadline(), &results);
  EXPECT_EQ(s.kind(), Status::Kind::kStatementFailed) << s.message();
  EXPECT_FALSE(conn_->Broken());
  s = conn_->Exec("SELECT pg_sleep(5)", {}, SteadyClock::now() + std::chrono::milliseconds(200),
                  &results);
  EXPECT_EQ(s.kind(), Status::Kind::kDeadline) << s.message();
  EXPECT_TRUE(conn_->Broken());
  s = conn_->Exec("SELECT 1", {}, kDeadline(), &results);
  EXPECT_EQ(s.kind(), Status::Kind::kConnectionLost) << s.message();
}

// A session that lost the prepared statements (DISCARD ALL through a pooler, say) fails the batch
// with a message that says so and the SQLSTATE the poller reconnects on; the session stays usable.
TEST_F(CollectorsTest, LostPreparedStatementIsAClearStatementError) {
  const PollPlan plan = Plan(*conn_, false);
  StatementBatch batch;
  for (const Collector* c : Collectors()) c->Plan(plan, &batch);
  PollData data;
  ASSERT_TRUE(RunAndParse(*conn_, plan, batch, &data).ok());
  std::vector<PgResult> ignored;
  ASSERT_TRUE(conn_->Exec("DEALLOCATE ALL", {}, kDeadline(), &ignored).ok());
  const Status s = RunAndParse(*conn_, plan, batch, &data);
  EXPECT_EQ(s.kind(), Status::Kind::kStatementFailed) << s.message();
  EXPECT_EQ(s.sqlstate(), kUnknownPreparedStatement) << s.message();
  EXPECT_NE(s.message().find("lost the exporter's prepared statements"), std::string::npos)
      << s.message();
  // The first statement of the batch that runs one names it (settings, before the timeouts).
  EXPECT_NE(s.message().find("prepared statement \"settings\" does not exist"), std::string::npos)
      << s.message();
  EXPECT_FALSE(conn_->Broken());
  ASSERT_TRUE(PrepareStatements(*conn_, AllPrepared(conn_->ServerVersionNum()), kDeadline()).ok());
  EXPECT_TRUE(RunAndParse(*conn_, plan, batch, &data).ok());
}

// The same through a pooler in transaction mode with one server connection: another client's
// DEALLOCATE ALL on it makes the exporter's next poll fail with that error (pglock_up 0, not a
// crash); the poll after reconnects, prepares again and succeeds.
TEST(PreparedStatements, PollerReconnectsAfterThePoolerDroppedThem) {
  testing::Pgbouncer bouncer({"transaction", 1});
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  TargetConfig target;
  target.name = "pooled";
  target.dsn = bouncer.Dsn("postgres");
  PollConfig poll;
  poll.timeout = Duration(5000);
  Poller poller(target, poll);
  poller.PollOnceForTest();
  ASSERT_TRUE(poller.Latest()->up) << poller.Latest()->last_error;
  {
    TestSession other(bouncer.Dsn("postgres"));
    other.Query("DEALLOCATE ALL");
  }
  poller.PollOnceForTest();
  EXPECT_FALSE(poller.Latest()->up);
  EXPECT_NE(poller.Latest()->last_error.find("lost the exporter's prepared statements"),
            std::string::npos)
      << poller.Latest()->last_error;
  poller.PollOnceForTest();
  EXPECT_TRUE(poller.Latest()->up) << poller.Latest()->last_error;
}

}  // namespace
}  // namespace pglock
