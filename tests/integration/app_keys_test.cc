// Applications' own keys and lock tables on a real PostgreSQL: every README
// recipe (a key from a SHA-256 of a name as one bigint and as two int4, a migration tool's constant
// key, a flag-only lock table, a job table with a TTL) is configured from TOML text exactly as the
// README shows it, polled by the real Poller, and its exposition checked value by value and by
// `promtool check metrics`. Wrong types and failing expressions must name the file, line and key,
// be logged once, and leave the rest of the target working.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>

#include "exporter/poll/poller.h"
#include "tests/support/build_paths.h"
#include "tests/support/http_get.h"
#include "tests/support/log_capture.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/recipes.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::LogCapture;
using testing::Pg;
using testing::PollAndScrape;
using testing::Sample;
using testing::Select;
using testing::TestPoll;
using testing::TestSession;
using testing::Value;

TargetConfig ParseTarget(const std::string& toml) { return testing::TestTarget(Pg().Dsn(), toml); }

// --- Keys ---------------------------------------------------------------------------------------

// The key(s) a client library derives from `name` in `form` (bigint, int4-be, int4-le), computed
// by tests/integration/library_keys.py with Python's hashlib, independently of the recipes' SQL:
// "k" or "k1, k2", ready for pg_advisory_lock(...).
std::string LibraryKeys(const std::string& form, const std::string& name) {
  const std::string script = testing::SourceDir() + "/tests/integration/library_keys.py";
  FILE* p =
      popen((testing::Python3() + " " + script + " " + form + " '" + name + "'").c_str(), "r");
  std::string out;
  char buf[256];
  size_t n = 0;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_TRUE(p != nullptr && pclose(p) == 0) << script;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// One README key recipe and the library whose keys it names.
struct KeyRecipe {
  const char* library;  // what the recipe stands for
  const char* form;     // library_keys.py's form
  const char* name;     // the lock name the library hashes and the recipe names
  const char* toml;     // the README's [[targets.locks]], verbatim
};

class AppKeysSha256 : public ::testing::TestWithParam<KeyRecipe> {};

// The application holds the lock under the keys its library derives; the exporter, configured
// with the README recipe, names it, and nothing is left under a raw key.
TEST_P(AppKeysSha256, RecipeNamesTheLibrarysLock) {
  const KeyRecipe& r = GetParam();
  const TargetConfig t = ParseTarget(r.toml);
  TestSession app(Pg().Dsn() + " application_name=sha-app");
  const std::string keys = LibraryKeys(r.form, r.name);
  app.Query("SELECT pg_advisory_lock(" + keys + ")");
  Poller poller(t, TestPoll());
  const auto samples = PollAndScrape(poller);
  const auto held = Select(samples, "pglock_advisory_lock_held_seconds");
  ASSERT_EQ(held.size(), 1u) << r.library;
  EXPECT_EQ(held[0].labels.at("lock"), r.name) << r.library << ": keys " << keys;
}

INSTANTIATE_TEST_SUITE_P(
    Libraries, AppKeysSha256,
    ::testing::Values(
        // pg-advisory-lock (Node.js) and django-pglocks: readBigInt64BE / int.from_bytes "big".
        KeyRecipe{"one bigint", "bigint", "invoices", R"(
  [[targets.locks]]
  name = "invoices"
  key_sql = "('x' || left(encode(sha256('invoices'), 'hex'), 16))::bit(64)::bigint"
)"},
        // Two int4 read big-endian (readInt32BE(0), readInt32BE(4)).
        KeyRecipe{"two int4, big-endian", "int4-be", "payouts", R"(
  [[targets.locks]]
  name = "payouts"
  key1_sql = "('x' || substr(encode(sha256('payouts'), 'hex'), 1, 8))::bit(32)::int4"
  key2_sql = "('x' || substr(encode(sha256('payouts'), 'hex'), 9, 8))::bit(32)::int4"
)"},
        // advisory-lock (Node.js): readInt32LE(0), readInt32LE(4).
        KeyRecipe{"two int4, little-endian", "int4-le", "refunds", R"toml(
  [[targets.locks]]
  name = "refunds"
  key1_sql = "(SELECT get_byte(d, 0) | (get_byte(d, 1) << 8) | (get_byte(d, 2) << 16) | (get_byte(d, 3) << 24) FROM sha256('refunds') AS d)"
  key2_sql = "(SELECT get_byte(d, 4) | (get_byte(d, 5) << 8) | (get_byte(d, 6) << 16) | (get_byte(d, 7) << 24) FROM sha256('refunds') AS d)"
)toml"}),
    [](const ::testing::TestParamInfo<KeyRecipe>& info) {
      std::string name = info.param.form;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// The byte order matters: the big-endian recipe does not name a lock taken little-endian (the
// lock stays under its raw key).
TEST(AppKeys, BigEndianRecipeDoesNotNameALittleEndianLock) {
  const TargetConfig t = ParseTarget(R"(
  [[targets.locks]]
  name = "refunds"
  key1_sql = "('x' || substr(encode(sha256('refunds'), 'hex'), 1, 8))::bit(32)::int4"
  key2_sql = "('x' || substr(encode(sha256('refunds'), 'hex'), 9, 8))::bit(32)::int4"
)");
  TestSession app(Pg().Dsn());
  std::string keys = LibraryKeys("int4-le", "refunds");
  app.Query("SELECT pg_advisory_lock(" + keys + ")");
  Poller poller(t, TestPoll());
  const auto held = Select(PollAndScrape(poller), "pglock_advisory_lock_held_seconds");
  ASSERT_EQ(held.size(), 1u);
  keys.replace(keys.find(", "), 2, ":");
  EXPECT_EQ(held[0].labels.at("lock"), keys);
}

// README recipe: code that locks pg_advisory_lock(hashtext(name)) (one bigint key from an int4
// hash), and the two-key form pg_advisory_lock(7742, hashtext(name)).
TEST(AppKeys, HashtextKeys) {
  const TargetConfig t = ParseTarget(R"toml(
  [[targets.locks]]
  name = "nightly-report"
  key_sql = "hashtext('nightly-report')"
  [[targets.locks]]
  name = "report-daily"
  key1 = 7742
  key2_text = "report-daily"
)toml");
  TestSession app(Pg().Dsn());
  app.Query("SELECT pg_advisory_lock(hashtext('nightly-report'))");
  app.Query("SELECT pg_advisory_lock(7742, hashtext('report-daily'))");
  Poller poller(t, TestPoll());
  const auto samples = PollAndScrape(poller);
  for (const char* name : {"nightly-report", "report-daily"}) {
    EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", name}}).size(), 1u)
        << name;
  }
}

// README recipe: Prisma Migrate holds pg_advisory_lock(72707369) while it migrates.
TEST(AppKeys, MigrationToolConstantKey) {
  const TargetConfig t = ParseTarget(R"(
  [[targets.locks]]
  name = "migrations"
  key = 72707369
)");
  TestSession migrate(Pg().Dsn() + " application_name=prisma-migrate");
  migrate.Query("SELECT pg_advisory_lock(72707369)");
  Poller poller(t, TestPoll());
  const auto samples = PollAndScrape(poller);
  const auto held = Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "migrations"}});
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].labels.at("application_name"), "prisma-migrate");
}

// A key expression that fails is logged once with its key; the lock stays unnamed and the target
// up; the other names still resolve.
TEST(AppKeys, FailingKeyExpressionIsReportedWithItsKey) {
  LogCapture log;
  const TargetConfig t = ParseTarget(R"(
  [[targets.locks]]
  name = "broken"
  key_sql = "1 / 0"
  [[targets.locks]]
  name = "sweep"
  key = 4242
)");
  TestSession app(Pg().Dsn());
  app.Query("SELECT pg_advisory_lock(4242)");
  Poller poller(t, TestPoll());
  auto samples = PollAndScrape(poller);
  samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "sweep"}}).size(), 1u);
  EXPECT_EQ(log.Count("config.toml:7: targets.locks.key_sql: lock \"broken\": "), 1) << log.Text();
  EXPECT_EQ(log.Count("division by zero"), 1) << log.Text();
}

// --- Lock tables --------------------------------------------------------------------------------

// knex's lock table, with its one row free, configured by `toml`.
TargetConfig KnexLockTable(const std::string& toml = testing::kKnexRecipe) {
  Pg().Exec("DROP TABLE IF EXISTS knex_migrations_lock");
  Pg().Exec(testing::kKnexLockTableSql);
  return ParseTarget(toml);
}

// README recipe: a migration tool's lock row (knex's knex_migrations_lock): two integer columns,
// no holder, no time. The mode in which it is visible: knex without a transaction
// (disableTransactions, or a migration with `config.transaction = false`) commits the flag before
// migrating. Held rows have an age from when the exporter first saw them held and no expiry; a
// flag cleared is a release.
TEST(AppKeys, FlagOnlyLockTable) {
  const TargetConfig t = KnexLockTable();
  Poller poller(t, TestPoll());
  auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "held"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_lease_max_hold_seconds", {{"table", "knex_migrations_lock"}}),
            1800);
  EXPECT_TRUE(Select(samples, "pglock_lease_held").empty());

  Pg().Exec("UPDATE knex_migrations_lock SET is_locked = 1");  // a migration starts, then dies
  samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lease_held", {{"lease", "migrations-1"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "held"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "expired"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_lease_age_seconds", {{"lease", "migrations-1"}}), 0);
  EXPECT_TRUE(Select(samples, "pglock_lease_expires_in_seconds").empty());
  EXPECT_EQ(Value(samples, "pglock_lease_transitions_total",
                  {{"lease", "migrations-1"}, {"kind", "acquired"}}),
            1);

  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  samples = PollAndScrape(poller);
  const auto age = Value(samples, "pglock_lease_age_seconds", {{"lease", "migrations-1"}});
  ASSERT_TRUE(age.has_value());
  EXPECT_GE(*age, 1.4);
  EXPECT_LT(*age, 10);

  Pg().Exec("UPDATE knex_migrations_lock SET is_locked = 0");
  samples = PollAndScrape(poller);
  EXPECT_TRUE(Select(samples, "pglock_lease_held").empty());
  EXPECT_EQ(Value(samples, "pglock_lease_transitions_total",
                  {{"lease", "migrations-1"}, {"kind", "released"}}),
            1);
  Pg().Exec("DROP TABLE knex_migrations_lock");
}

// knex's default mode: it sets the flag inside the migration's own transaction, which no other
// session sees until it commits (and a killed migration rolls back). Without row_lock the table
// shows the lock free while the migration runs...
TEST(AppKeys, FlagSetInsideTheMigrationsTransactionIsNotSeenWithoutRowLock) {
  std::string toml = testing::kKnexRecipe;
  toml.erase(toml.find("  row_lock = true\n"), std::string("  row_lock = true\n").size());
  const TargetConfig t = KnexLockTable(toml);
  TestSession migrate(Pg().Dsn() + " application_name=knex-migrate");
  migrate.Query("BEGIN");
  migrate.Query("UPDATE knex_migrations_lock SET is_locked = 1 WHERE is_locked = 0");
  Poller poller(t, TestPoll());
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "held"}}), 0);
  EXPECT_TRUE(Select(samples, "pglock_lease_held").empty());
  migrate.Query("ROLLBACK");
  Pg().Exec("DROP TABLE knex_migrations_lock");
}

// ...and with the README recipe (row_lock = true) the row the migration's UPDATE locked is held,
// by the migration's session, until its transaction ends.
TEST(AppKeys, FlagSetInsideTheMigrationsTransactionIsHeldByItsSessionWithRowLock) {
  const TargetConfig t = KnexLockTable();
  TestSession migrate(Pg().Dsn() + " application_name=knex-migrate");
  const std::string pid = migrate.Query("SELECT pg_backend_pid()");
  migrate.Query("BEGIN");
  migrate.Query("UPDATE knex_migrations_lock SET is_locked = 1 WHERE is_locked = 0");
  Poller poller(t, TestPoll());
  auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lease_held", {{"lease", "migrations-1"}}), 1);
  EXPECT_EQ(Select(samples, "pglock_row_lock_held_seconds",
                   {{"lease", "migrations-1"}, {"pid", pid}, {"application_name", "knex-migrate"}})
                .size(),
            1u);
  migrate.Query("ROLLBACK");  // a killed migration: its flag was never committed
  samples = PollAndScrape(poller);
  EXPECT_TRUE(Select(samples, "pglock_lease_held").empty());
  EXPECT_TRUE(Select(samples, "pglock_row_lock_held_seconds").empty());
  Pg().Exec("DROP TABLE knex_migrations_lock");
}

// README recipe: a job queue marks rows with locked_at/locked_by; the application gives up a lock
// after a fixed 10 minutes. Rows not locked are no locks at all (where_sql).
TEST(AppKeys, JobTableWithTtl) {
  Pg().Exec("DROP TABLE IF EXISTS jobs");
  Pg().Exec(
      "CREATE TABLE jobs (id bigint PRIMARY KEY, locked_at timestamp, locked_by text); "
      "INSERT INTO jobs VALUES (1, NULL, NULL), "
      "(2, localtimestamp - interval '4 minutes', 'worker-a'), "
      "(3, localtimestamp - interval '25 minutes', 'worker-b')");
  const TargetConfig t = ParseTarget(R"(
  [[targets.leases]]
  table = "jobs"
  name_column = "id"
  holder_column = "locked_by"
  taken_at_column = "locked_at"
  ttl = "10m"
  where_sql = "locked_at IS NOT NULL"
)");
  Poller poller(t, TestPoll());
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "held"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_leases", {{"state", "expired"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_held", {{"lease", "2"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_held", {{"lease", "3"}}), 0);
  EXPECT_TRUE(Select(samples, "pglock_lease_held", {{"lease", "1"}}).empty());
  EXPECT_NEAR(*Value(samples, "pglock_lease_age_seconds", {{"lease", "2"}}), 240, 5);
  EXPECT_NEAR(*Value(samples, "pglock_lease_expires_in_seconds", {{"lease", "2"}}), 360, 5);
  EXPECT_NEAR(*Value(samples, "pglock_lease_expires_in_seconds", {{"lease", "3"}}), -900, 5);
  EXPECT_EQ(
      Select(samples, "pglock_lease_holder_info", {{"lease", "3"}, {"holder", "worker-b"}}).size(),
      1u);
  EXPECT_TRUE(Select(samples, "pglock_lease_max_hold_seconds").empty());
  Pg().Exec("DROP TABLE jobs");
}

// --- Wrong types and failing expressions --------------------------------------------------------

struct WrongType {
  const char* column_type;  // of the jobs table's locked_at
  const char* problem;      // what the log and nothing else must say
};

class AppKeysWrongType : public ::testing::TestWithParam<WrongType> {};

// A wrong column is the table's error, with the file, line and key, logged once; the table is down,
// the target and the other table are not.
TEST_P(AppKeysWrongType, IsNamedByFileLineAndKey) {
  LogCapture log;
  Pg().Exec("DROP TABLE IF EXISTS bad_jobs");
  Pg().Exec(std::string("CREATE TABLE bad_jobs (id bigint, locked_by text") +
            (*GetParam().column_type != '\0' ? ", locked_at " : "") + GetParam().column_type + ")");
  Pg().Exec("DROP TABLE IF EXISTS good_leases");
  Pg().Exec(
      "CREATE TABLE good_leases (name text, holder text, taken_at timestamptz, expires_at "
      "timestamptz); INSERT INTO good_leases VALUES ('sweep', 'h', now(), now() + interval '1m')");
  const TargetConfig t = ParseTarget(R"(
  [[targets.leases]]
  table = "bad_jobs"
  name_column = "id"
  holder_column = "locked_by"
  taken_at_column = "locked_at"
  ttl = "10m"
  [[targets.leases]]
  table = "good_leases"
)");
  TestSession app(Pg().Dsn());
  app.Query("SELECT pg_advisory_lock(9090)");
  Poller poller(t, TestPoll());
  std::vector<Sample> samples;
  for (int i = 0; i < 3; ++i) samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "bad_jobs"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "good_leases"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_held", {{"table", "good_leases"}, {"lease", "sweep"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_collector_errors_total", {{"collector", "lease:bad_jobs"}}), 3);
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds", {{"lock", "9090"}}).size(), 1u);
  EXPECT_EQ(log.Count(GetParam().problem), 1) << log.Text();
  Pg().Exec("DROP TABLE bad_jobs; DROP TABLE good_leases");
}

INSTANTIATE_TEST_SUITE_P(
    Types, AppKeysWrongType,
    ::testing::Values(
        WrongType{"integer",
                  "config.toml:9: targets.leases.taken_at_column: \"locked_at\" is integer, want "
                  "timestamptz or timestamp"},
        WrongType{"text",
                  "config.toml:9: targets.leases.taken_at_column: \"locked_at\" is text, want "
                  "timestamptz or timestamp"},
        WrongType{"",
                  "config.toml:9: targets.leases.taken_at_column: \"locked_at\" does not exist "
                  "in bad_jobs"}));

// Expressions: a wrong type and a failing one are named by their key; a table that is fixed is
// read again once the backoff of its failed read has passed.
TEST(AppKeys, FailingLeaseExpressionsAreNamedByTheirKey) {
  LogCapture log;
  Pg().Exec("DROP TABLE IF EXISTS flags");
  Pg().Exec("CREATE TABLE flags (id int, is_locked int); INSERT INTO flags VALUES (1, 1)");
  const TargetConfig t = ParseTarget(R"(
  [[targets.leases]]
  table = "flags"
  name_sql = "'flag-' || id"
  held_sql = "is_locked"
  [[targets.leases]]
  table = "public.flags"
  name_sql = "'flag-' || id"
  held_sql = "is_locked = 1"
  where_sql = "1 / (id - 1) = 1"
)");
  Poller poller(t, TestPoll());
  auto samples = PollAndScrape(poller);
  samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_up"), 1);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "flags"}}), 0);
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "public.flags"}}), 0);
  EXPECT_EQ(log.Count("config.toml:8: targets.leases.held_sql: \"is_locked\" is integer, want "
                      "boolean"),
            1)
      << log.Text();
  // The types are right; the expression fails on a row, at read time: still named by its key.
  EXPECT_EQ(log.Count("config.toml:13: targets.leases.where_sql: \"1 / (id - 1) = 1\": "), 1)
      << log.Text();
  EXPECT_EQ(log.Count("division by zero"), 1) << log.Text();

  Pg().Exec("DELETE FROM flags");  // no row left to fail on
  // Read again once the backoff of its failed read has passed (one poll interval).
  EXPECT_TRUE(testing::WaitFor(3, [&] {
    samples = PollAndScrape(poller);
    return Value(samples, "pglock_lease_table_up", {{"table", "public.flags"}}) == 1;
  }));
  EXPECT_EQ(Value(samples, "pglock_lease_table_up", {{"table", "flags"}}), 0);
  Pg().Exec("DROP TABLE flags");
}

}  // namespace
}  // namespace pglock
