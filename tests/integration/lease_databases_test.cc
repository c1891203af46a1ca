// Lease tables in other databases of the target's server ([[targets.leases]] database),
// on a real PostgreSQL: read through a session of that database (labelled "database/table"),
// counted like any lease table; a database dropped, refusing connections or unknown takes down
// only its tables (logged once per state change), never the target; a reload adds and removes
// such tables and closes the session of a database no longer configured. A table's read is
// prepared once per session and executed at every poll: a new session prepares it again, and a
// reload that changes the read's text replaces it.
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "exporter/poll/poller.h"
#include "tests/support/log_capture.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::LogCapture;
using testing::Pg;
using testing::Sample;
using testing::Value;

constexpr char kTenant[] = "tenant_a";
constexpr char kOther[] = "tenant_a/leases";  // the table label of the tenant's table
constexpr char kCreateLeases[] =
    "CREATE TABLE leases (name text PRIMARY KEY, holder text NOT NULL, "
    "taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)";

std::string ExporterSessionsIn(const std::string& database) {
  return Pg().Scalar(
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pglock_exporter' AND "
      "datname = '" +
      database + "'");
}

LeaseTableConfig Leases(const std::string& database) {
  LeaseTableConfig t;
  t.table = t.relation = "leases";
  t.database = database;
  return t;
}

// One target on the `postgres` database with a lease table there and one in tenant_a, both
// named `leases`.
class LeaseDatabases : public ::testing::Test {
 protected:
  void SetUp() override {
    Pg().Exec(std::string("DROP DATABASE IF EXISTS ") + kTenant + " WITH (FORCE)");
    Pg().Exec(std::string("CREATE DATABASE ") + kTenant);
    Pg().Exec(kCreateLeases, kTenant);
    Pg().Exec("DROP TABLE IF EXISTS leases");
    Pg().Exec(kCreateLeases);
    Pg().Exec("INSERT INTO leases VALUES ('own', 'me', now(), now() + interval '1h')");
    target_.name = "one";
    target_.dsn = Pg().Dsn();
    target_.leases = {Leases(""), Leases(kTenant)};
    poll_ = testing::TestPoll({.interval_ms = 200, .timeout_ms = 2000});
    poller_ = std::make_unique<Poller>(target_, poll_);
  }
  void TearDown() override {
    poller_.reset();
    Pg().Exec(std::string("DROP DATABASE IF EXISTS ") + kTenant + " WITH (FORCE)");
  }

  std::vector<Sample> Poll() {
    poller_->PollOnceForTest();
    const std::string text = testing::Serialize({poller_->Latest()});
    std::string out;
    EXPECT_TRUE(testing::PromtoolCheck(text, &out)) << out << "\n" << text;
    return testing::ParseSamples(text);
  }

  TargetConfig target_;
  PollConfig poll_;
  std::unique_ptr<Poller> poller_;
};

TEST_F(LeaseDatabases, TableInAnotherDatabaseHasItsOwnLabelAndTransitions) {
  Pg().Exec("INSERT INTO leases VALUES ('sweep', 'worker-1', now(), now() + interval '1h')",
            kTenant);
  auto s = Poll();
  EXPECT_EQ(Value(s, "pglock_up"), 1);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "leases"}}), 1);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  // Each row under its own table: the tenant's lease is not the target database's.
  EXPECT_EQ(Value(s, "pglock_lease_held", {{"table", kOther}, {"lease", "sweep"}}), 1);
  EXPECT_FALSE(Value(s, "pglock_lease_held", {{"table", "leases"}, {"lease", "sweep"}}));
  EXPECT_EQ(Value(s, "pglock_lease_held", {{"table", "leases"}, {"lease", "own"}}), 1);
  EXPECT_FALSE(Value(s, "pglock_lease_held", {{"table", kOther}, {"lease", "own"}}));
  EXPECT_EQ(Value(s, "pglock_lease_holder_info",
                  {{"table", kOther}, {"lease", "sweep"}, {"holder", "worker-1"}}),
            1);
  // One session of its own in that database, under the exporter's name, never in a transaction.
  EXPECT_EQ(ExporterSessionsIn(kTenant), "1");
  EXPECT_EQ(Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                        "'pglock_exporter' AND datname = 'tenant_a' AND state <> 'idle'"),
            "0");

  Pg().Exec("INSERT INTO leases VALUES ('nightly', 'worker-2', now(), now() + interval '1h')",
            kTenant);
  Pg().Exec("DELETE FROM leases WHERE name = 'sweep'", kTenant);
  s = Poll();
  const std::map<std::string, std::string> tenant = {{"target", "one"}, {"table", kOther}};
  auto kind = [&](const char* lease, const char* k) {
    auto m = tenant;
    m["lease"] = lease;
    m["kind"] = k;
    return Value(s, "pglock_lease_transitions_total", m);
  };
  EXPECT_EQ(kind("nightly", "acquired"), 1);
  EXPECT_EQ(kind("sweep", "released"), 1);
  EXPECT_FALSE(Value(s, "pglock_lease_transitions_total",
                     {{"table", "leases"}, {"lease", "nightly"}, {"kind", "acquired"}}));
}

TEST_F(LeaseDatabases, DatabaseDroppedOrClosedTakesDownOnlyItsTables) {
  LogCapture log;
  auto s = Poll();
  ASSERT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);

  // Connections refused: that table down, the target and its own table up.
  Pg().Exec(std::string("ALTER DATABASE ") + kTenant + " ALLOW_CONNECTIONS false");
  Pg().Exec(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'tenant_a' AND "
      "application_name = 'pglock_exporter'");
  // Gone before the next poll (pg_terminate_backend only signals it).
  ASSERT_TRUE(testing::WaitFor(5, [] { return ExporterSessionsIn(kTenant) == "0"; }));
  for (int i = 0; i < 4; ++i) s = Poll();
  EXPECT_EQ(Value(s, "pglock_up"), 1);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 0);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "leases"}}), 1);
  EXPECT_EQ(Value(s, "pglock_lease_held", {{"table", "leases"}, {"lease", "own"}}), 1);
  EXPECT_GE(*Value(s, "pglock_collector_errors_total", {{"collector", "lease:tenant_a/leases"}}),
            1);
  EXPECT_EQ(Value(s, "pglock_poll_errors_total"), 0);
  // Logged once per state change (the session lost, then each refused connect), naming the
  // table and its database.
  EXPECT_EQ(log.Count("lease:tenant_a/leases: database \"tenant_a\": "), 2) << log.Text();
  EXPECT_EQ(log.Count("database \"tenant_a\" is not currently accepting connections"), 1)
      << log.Text();

  // Back: the table is read again once the backoff lets it try.
  Pg().Exec(std::string("ALTER DATABASE ") + kTenant + " ALLOW_CONNECTIONS true");
  for (int i = 0; i < 10 && Value(s, "pglock_lease_table_up", {{"table", kOther}}) != 1; ++i) {
    s = Poll();
  }
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  EXPECT_EQ(log.Count("lease:tenant_a/leases: ok again"), 1) << log.Text();

  // Dropped under the exporter's session.
  Pg().Exec(std::string("DROP DATABASE ") + kTenant + " WITH (FORCE)");
  for (int i = 0; i < 3; ++i) s = Poll();
  EXPECT_EQ(Value(s, "pglock_up"), 1);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 0);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "leases"}}), 1);
  EXPECT_EQ(Value(s, "pglock_poll_errors_total"), 0);
}

TEST_F(LeaseDatabases, UnknownDatabaseIsThatTablesErrorLoggedOnce) {
  LogCapture log;
  target_.leases = {Leases(""), Leases("no_such_db")};
  poller_ = std::make_unique<Poller>(target_, poll_);
  std::vector<Sample> s;
  for (int i = 0; i < 5; ++i) s = Poll();
  EXPECT_EQ(Value(s, "pglock_up"), 1);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "no_such_db/leases"}}), 0);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "leases"}}), 1);
  EXPECT_EQ(log.Count("database \"no_such_db\" does not exist"), 1) << log.Text();
}

TEST_F(LeaseDatabases, ReloadAddsAndRemovesTablesOfOtherDatabases) {
  target_.leases = {Leases("")};
  poller_ = std::make_unique<Poller>(target_, poll_);
  auto s = Poll();
  EXPECT_FALSE(Value(s, "pglock_lease_table_up", {{"table", kOther}}));
  EXPECT_EQ(ExporterSessionsIn(kTenant), "0");

  target_.leases = {Leases(""), Leases(kTenant)};
  poller_->Reconfigure(target_, poll_);
  s = Poll();
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  EXPECT_EQ(ExporterSessionsIn(kTenant), "1");

  target_.leases = {Leases("")};
  poller_->Reconfigure(target_, poll_);
  s = Poll();
  EXPECT_FALSE(Value(s, "pglock_lease_table_up", {{"table", kOther}}));
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "leases"}}), 1);
  // The session of a database no longer configured is closed.
  EXPECT_TRUE(testing::WaitFor(5, [] { return ExporterSessionsIn(kTenant) == "0"; }));
}

// The last statements the exporter's session of `database` sent: its last poll's read.
std::string LastQueryIn(const std::string& database) {
  return Pg().Scalar(
      "SELECT query FROM pg_stat_activity WHERE application_name = 'pglock_exporter' AND "
      "datname = '" +
      database + "'");
}

// The number of the rows statement the last read executed ("" when it executed none).
std::string ExecutedStatement(const std::string& last_query) {
  constexpr std::string_view kExecute = "EXECUTE lease_read_rows_";
  const size_t at = last_query.find(kExecute);
  if (at == std::string::npos) return "";
  size_t end = at + kExecute.size();
  while (end < last_query.size() && std::isdigit(static_cast<unsigned char>(last_query[end]))) {
    ++end;
  }
  return last_query.substr(at + kExecute.size(), end - at - kExecute.size());
}

TEST_F(LeaseDatabases, TheReadIsPreparedOncePerSessionAndAgainAfterAReload) {
  Pg().Exec(
      "INSERT INTO leases VALUES ('a', 'me', now(), now() + interval '1h'), "
      "('b', 'me', now(), now() + interval '1h')",
      kTenant);
  auto s = Poll();
  s = Poll();
  ASSERT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  EXPECT_EQ(Value(s, "pglock_leases", {{"table", kOther}, {"state", "held"}}), 2);
  // Executed, not sent as text: no query of the table left to parse and plan (the batch's one
  // SELECT sets its timeouts).
  const std::string read = LastQueryIn(kTenant);
  EXPECT_NE(read.find("EXECUTE lease_read_rows_"), std::string::npos) << read;
  EXPECT_NE(read.find("EXECUTE lease_read_writes_"), std::string::npos) << read;
  EXPECT_EQ(read.find("FROM"), std::string::npos) << read;
  // The same statement at the next poll: prepared once, not per poll.
  const std::string first = ExecutedStatement(read);
  ASSERT_NE(first, "");
  s = Poll();
  EXPECT_EQ(ExecutedStatement(LastQueryIn(kTenant)), first);

  // A new session (the old one ended under it): the statements prepared again on it.
  Pg().Exec(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'tenant_a' AND "
      "application_name = 'pglock_exporter'");
  // Gone before the next poll (pg_terminate_backend only signals it: the poll could otherwise
  // still find the old session and the loop below end before any poll saw it end).
  ASSERT_TRUE(testing::WaitFor(5, [] { return ExporterSessionsIn(kTenant) == "0"; }));
  for (int i = 0; i < 10; ++i) {
    s = Poll();
    if (Value(s, "pglock_lease_table_up", {{"table", kOther}}) == 1 &&
        ExporterSessionsIn(kTenant) == "1") {
      break;
    }
  }
  s = Poll();
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  EXPECT_EQ(Value(s, "pglock_leases", {{"table", kOther}, {"state", "held"}}), 2);
  const std::string second = ExecutedStatement(LastQueryIn(kTenant));
  EXPECT_NE(second, "");
  EXPECT_NE(second, first);

  // A reload that changes the read (a filter now): what the next poll reads is the new text's.
  const auto errors =
      Value(s, "pglock_collector_errors_total", {{"collector", "lease:tenant_a/leases"}});
  target_.leases[1].where_sql = "name <> 'a'";
  poller_->Reconfigure(target_, poll_);
  s = Poll();
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  EXPECT_EQ(Value(s, "pglock_leases", {{"table", kOther}, {"state", "held"}}), 1);
  EXPECT_FALSE(Value(s, "pglock_lease_held", {{"table", kOther}, {"lease", "a"}}));
  EXPECT_EQ(Value(s, "pglock_lease_held", {{"table", kOther}, {"lease", "b"}}), 1);
  EXPECT_EQ(Value(s, "pglock_collector_errors_total", {{"collector", "lease:tenant_a/leases"}}),
            errors);
  // The statements the reload replaced were deallocated after the read (the session's last
  // batch); the next poll executes the new ones.
  const std::string swept = LastQueryIn(kTenant);
  EXPECT_NE(swept.find("DEALLOCATE \"lease_read_rows_" + second + "\""), std::string::npos)
      << swept;
  EXPECT_NE(swept.find("DEALLOCATE \"lease_read_writes_" + second + "\""), std::string::npos)
      << swept;
  s = Poll();
  const std::string third = ExecutedStatement(LastQueryIn(kTenant));
  EXPECT_NE(third, "");
  EXPECT_NE(third, second);
  s = Poll();
  EXPECT_EQ(ExecutedStatement(LastQueryIn(kTenant)), third);
}

// The EXECUTEs in a batch's text.
size_t Executes(const std::string& query) {
  size_t n = 0;
  for (size_t at = query.find("EXECUTE "); at != std::string::npos;
       at = query.find("EXECUTE ", at + 1)) {
    ++n;
  }
  return n;
}

// Two tables of one session are read in one round trip; when one of them fails on a row (an
// expression the check cannot see fail), the other is still read and the failure is that table's.
TEST_F(LeaseDatabases, TablesOfOneSessionAreReadTogetherAndFailAlone) {
  Pg().Exec("CREATE TABLE mutexes (name text PRIMARY KEY, holder text, d int NOT NULL DEFAULT 1)",
            kTenant);
  Pg().Exec("INSERT INTO mutexes (name, holder) VALUES ('m1', 'me')", kTenant);
  LeaseTableConfig mutexes;
  mutexes.table = mutexes.relation = "mutexes";
  mutexes.database = kTenant;
  mutexes.held_sql = "holder IS NOT NULL AND 1 / d = 1";
  mutexes.taken_at = mutexes.expires_at = {};  // as the config makes them once held_sql is set
  target_.leases.push_back(mutexes);
  poller_ = std::make_unique<Poller>(target_, poll_);
  auto s = Poll();
  s = Poll();
  ASSERT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  ASSERT_EQ(Value(s, "pglock_lease_table_up", {{"table", "tenant_a/mutexes"}}), 1);
  EXPECT_EQ(Value(s, "pglock_lease_held", {{"table", "tenant_a/mutexes"}, {"lease", "m1"}}), 1);
  // Both tables' EXECUTEs in the session's one last batch.
  const std::string read = LastQueryIn(kTenant);
  EXPECT_EQ(Executes(read), 4u) << read;

  // A row that fails the mutexes' read: that table down, with its error; leases still read.
  Pg().Exec("INSERT INTO leases VALUES ('t', 'me', now(), now() + interval '1h')", kTenant);
  Pg().Exec("INSERT INTO mutexes (name, holder, d) VALUES ('m2', 'me', 0)", kTenant);
  s = Poll();
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "tenant_a/mutexes"}}), 0);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  EXPECT_EQ(Value(s, "pglock_lease_held", {{"table", kOther}, {"lease", "t"}}), 1);
  EXPECT_EQ(Value(s, "pglock_collector_errors_total", {{"collector", "lease:tenant_a/leases"}})
                .value_or(0),
            0);
  EXPECT_GE(Value(s, "pglock_collector_errors_total", {{"collector", "lease:tenant_a/mutexes"}})
                .value_or(0),
            1);
  // Mended: read together again once its backoff lets it try.
  Pg().Exec("DELETE FROM mutexes WHERE name = 'm2'", kTenant);
  for (int i = 0; i < 50 && Value(s, "pglock_lease_table_up", {{"table", "tenant_a/mutexes"}}) != 1;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a poll's interval
    s = Poll();
  }
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "tenant_a/mutexes"}}), 1);
  s = Poll();
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", kOther}}), 1);
  EXPECT_EQ(Value(s, "pglock_lease_table_up", {{"table", "tenant_a/mutexes"}}), 1);
  const std::string again = LastQueryIn(kTenant);
  EXPECT_EQ(Executes(again), 4u) << again;
}

}  // namespace
}  // namespace pglock
