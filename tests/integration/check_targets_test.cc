// --check-targets against a real PostgreSQL and a real PgBouncer, as an unprivileged role with
// pg_monitor: the all-good case resolves every key, lock table and pooler (exit 0); each kind of
// problem (a missing table, a missing SELECT privilege, a wrong column type, a key expression that
// fails, an unreachable pooler, a server log that cannot be read) is one line naming the file,
// line and key and what to do (exit 1). A server setting that only makes the log show less is
// ADVICE, with its ALTER SYSTEM, and leaves the exit status at 0.
#include "exporter/check_targets.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/support/pg_environment.h"
#include "tests/support/pgbouncer.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::TestSession;

constexpr char kRole[] = "pglock_check";

// The role the exporter runs as: pg_monitor, nothing else.
class CheckTargetsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Pg().Exec(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pglock_check') THEN "
        "CREATE ROLE pglock_check LOGIN; END IF; END $$");
    Pg().Exec("GRANT pg_monitor TO pglock_check");
  }

  // The config text: one target "main" as kRole, then `body`.
  static std::string Text(const std::string& body) {
    return "[[targets]]\nname = \"main\"\ndsn = \"" + Pg().Dsn("postgres", kRole) + "\"\n" + body;
  }

  // Runs the check on `body`; returns the exit code, the report in *out.
  static int Check(const std::string& body, std::string* out) {
    Config config;
    std::vector<ConfigError> errors;
    EXPECT_TRUE(ParseConfigText(Text(body), "config.toml", &config, &errors));
    for (const ConfigError& e : errors) ADD_FAILURE() << e.ToString();
    std::ostringstream report;
    const int code = CheckTargets(config, report);
    *out = report.str();
    std::printf("%s", out->c_str());
    return code;
  }

  // "config.toml:<line of `needle` in the config text>: "
  static std::string At(const std::string& body, const std::string& needle) {
    const std::string text = Text(body);
    const size_t pos = text.find(needle);
    EXPECT_NE(pos, std::string::npos) << needle;
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n');
    return "config.toml:" + std::to_string(line) + ": ";
  }

  // Checks `body` expecting one problem, the line starting "PROBLEM <problem>"; returns the report.
  static std::string ExpectOneProblem(const std::string& body, const std::string& problem) {
    std::string out;
    EXPECT_EQ(Check(body, &out), 1);
    EXPECT_EQ(Problems(out), 1) << out;
    EXPECT_NE(out.find("PROBLEM " + problem), std::string::npos) << out;
    return out;
  }

  static int Problems(const std::string& out) {
    int n = 0;
    for (size_t p = out.find("PROBLEM "); p != std::string::npos; p = out.find("PROBLEM ", p + 1)) {
      ++n;
    }
    return n;
  }
};

TEST_F(CheckTargetsTest, EverythingResolves) {
  Pg().Exec(
      "DROP TABLE IF EXISTS ct_leases, ct_flags; "
      "CREATE TABLE ct_leases (name text, holder text, taken_at timestamptz, "
      "expires_at timestamptz); "
      "INSERT INTO ct_leases VALUES ('sweep', 'host-a:1', now(), now() + interval '1 hour'), "
      "('old', 'host-b:2', now() - interval '2 hours', now() - interval '1 hour'); "
      "CREATE TABLE ct_flags (id int, is_locked int); INSERT INTO ct_flags VALUES (1, 1), (2, 0); "
      "GRANT SELECT ON ct_leases, ct_flags TO pglock_check");
  Pg().Exec("DROP DATABASE IF EXISTS ct_other");
  Pg().Exec("CREATE DATABASE ct_other");
  Pg().Exec(
      "CREATE TABLE jobs (id int, locked_at timestamptz, locked_by text); "
      "INSERT INTO jobs VALUES (1, now(), 'w1'), (2, NULL, NULL); "
      "GRANT SELECT ON jobs TO pglock_check",
      "ct_other");
  testing::Pgbouncer bouncer;
  ASSERT_TRUE(bouncer.started()) << "pgbouncer did not start";
  TestSession app(Pg().Dsn() + " application_name=rebuild-job");
  app.Query("SELECT pg_advisory_lock(hashtextextended('rebuild:run', 0))");
  const std::string key = app.Query("SELECT hashtextextended('rebuild:run', 0)");
  const std::string body = R"(
  [[targets.locks]]
  name = "rebuild:run"
  key_text = "rebuild:run"
  [[targets.locks]]
  name = "report-daily"
  key1 = 7742
  key2_text = "report-daily"
  [[targets.leases]]
  table = "ct_leases"
  [[targets.leases]]
  table = "public.ct_flags"
  name_sql = "'flag-' || id"
  held_sql = "is_locked = 1"
  [[targets.leases]]
  table = "jobs"
  database = "ct_other"
  name_column = "id"
  taken_at_column = "locked_at"
  ttl = "10m"
  where_sql = "locked_at IS NOT NULL"
  [[targets.poolers]]
  name = "pgb"
  admin_dsn = ")" + bouncer.Dsn("pgbouncer") +
                           "\"\n";
  std::string out;
  EXPECT_EQ(Check(body, &out), 0);
  EXPECT_EQ(Problems(out), 0);
  EXPECT_NE(out.find("role pglock_check"), std::string::npos) << out;
  EXPECT_NE(
      out.find("lock \"rebuild:run\": key " + key +
               " (hashtextextended(key_text, 0)), held now by pid " + std::to_string(app.Pid()) +
               " (database \"postgres\", application_name \"rebuild-job\")"),
      std::string::npos)
      << out;
  const std::string key2 = app.Query("SELECT hashtext('report-daily')");
  EXPECT_NE(out.find("lock \"report-daily\": key 7742:" + key2 +
                     " (key1, hashtext(key2_text)), "
                     "not held now"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("lease table ct_leases: columns name text, holder text, taken_at timestamp "
                     "with time zone, expires_at timestamp with time zone; SELECT granted"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2 row(s): 1 held, 1 expired, 0 free; held while expires_at > now()"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2 row(s): 1 held, 0 expired, 1 free; held where held_sql (is_locked = 1)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("lease table ct_other/jobs:"), std::string::npos) << out;
  EXPECT_NE(out.find("2 row(s): 1 held, 0 expired, 1 free; held while taken_at + 10m > now()"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("pooler \"pgb\": admin console answered"), std::string::npos) << out;
  Pg().Exec("DROP TABLE ct_leases, ct_flags");
  Pg().Exec("DROP DATABASE ct_other");
}

// A row_lock table without held_sql is judged by its rows' transactions, and says so.
TEST_F(CheckTargetsTest, RowLockTableSaysWhatItJudges) {
  Pg().Exec(
      "DROP TABLE IF EXISTS ct_mutex; CREATE TABLE ct_mutex (name text); "
      "INSERT INTO ct_mutex VALUES ('a'), ('b'); GRANT SELECT ON ct_mutex TO pglock_check");
  const std::string body = R"(
  [[targets.leases]]
  table = "ct_mutex"
  name_column = "name"
  row_lock = true
)";
  std::string out;
  EXPECT_EQ(Check(body, &out), 0);
  EXPECT_NE(out.find("held while a live transaction has locked or changed the row, no expiry"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("held_sql ()"), std::string::npos) << out;
  Pg().Exec("DROP TABLE ct_mutex");
}

// A recipe that matches no held lock while a key of its form is held: the held keys and their
// applications are listed as advice (exit 0: not held is normal for a job that is not running).
TEST_F(CheckTargetsTest, UnheldLockListsTheHeldKeysOfItsForm) {
  TestSession app(Pg().Dsn() + " application_name=report-job");
  app.Query("SELECT pg_advisory_lock(7742, 99)");
  const std::string body = R"(
  [[targets.locks]]
  name = "report-daily"
  key1 = 7742
  key2_text = "report-daily"
)";
  std::string out;
  EXPECT_EQ(Check(body, &out), 0);
  EXPECT_EQ(Problems(out), 0) << out;
  const size_t advice = out.find("ADVICE " + At(body, "name = \"report-daily\""));
  ASSERT_NE(advice, std::string::npos) << out;
  EXPECT_NE(out.find("7742:99 (1 holder(s), application_name \"report-job\")", advice),
            std::string::npos)
      << out;
}

TEST_F(CheckTargetsTest, MissingTableIsNamedByItsKey) {
  const std::string body = R"(
  [[targets.leases]]
  table = "no_such_table"
)";
  ExpectOneProblem(body,
                   At(body, "table = ") +
                       "targets.leases.table: lease table \"no_such_table\" does not exist -> "
                       "create it, or set table");
}

// A missing SELECT is reported with the GRANT and the ALTER DEFAULT PRIVILEGES that keeps it for
// a table re-created by a tool; once applied, a re-created table stays readable.
TEST_F(CheckTargetsTest, MissingPrivilegeGivesTheGrantAndTheDefaultPrivilegesFix) {
  Pg().Exec(
      "DROP TABLE IF EXISTS ct_migrations_lock; "
      "CREATE TABLE ct_migrations_lock (index serial, is_locked int)");
  const std::string body = R"(
  [[targets.leases]]
  table = "ct_migrations_lock"
  name_sql = "'migrations-' || index"
  held_sql = "is_locked = 1"
)";
  const std::string out = ExpectOneProblem(
      body, At(body, "table = ") +
                "targets.leases.table: role pglock_check may not SELECT ct_migrations_lock "
                "-> GRANT SELECT ON ct_migrations_lock TO pglock_check; and, since a tool "
                "that drops and re-creates the table loses that grant: ALTER DEFAULT "
                "PRIVILEGES FOR ROLE postgres IN SCHEMA public GRANT SELECT ON TABLES TO "
                "pglock_check");
  EXPECT_NE(out.find("columns index integer, is_locked integer; SELECT NOT granted"),
            std::string::npos)
      << out;
  // The fix, then the tool re-creates its table.
  Pg().Exec(
      "ALTER DEFAULT PRIVILEGES FOR ROLE postgres IN SCHEMA public GRANT SELECT ON TABLES TO "
      "pglock_check");
  Pg().Exec(
      "DROP TABLE ct_migrations_lock; "
      "CREATE TABLE ct_migrations_lock (index serial, is_locked int)");
  std::string fixed;
  EXPECT_EQ(Check(body, &fixed), 0) << fixed;
  Pg().Exec(
      "ALTER DEFAULT PRIVILEGES FOR ROLE postgres IN SCHEMA public REVOKE SELECT ON TABLES FROM "
      "pglock_check");
  Pg().Exec("DROP TABLE ct_migrations_lock");
}

TEST_F(CheckTargetsTest, WrongColumnTypeIsNamedByItsKey) {
  Pg().Exec(
      "DROP TABLE IF EXISTS ct_jobs; CREATE TABLE ct_jobs (id int, locked_at int, locked_by "
      "text); GRANT SELECT ON ct_jobs TO pglock_check");
  const std::string body = R"(
  [[targets.leases]]
  table = "ct_jobs"
  name_column = "id"
  taken_at_column = "locked_at"
  ttl = "10m"
)";
  ExpectOneProblem(body,
                   At(body, "taken_at_column") +
                       "targets.leases.taken_at_column: \"locked_at\" is integer, want timestamptz "
                       "or timestamp -> name a column of that type, or convert it");
  Pg().Exec("DROP TABLE ct_jobs");
}

TEST_F(CheckTargetsTest, FailingKeyExpressionIsNamedByItsKey) {
  const std::string body = R"(
  [[targets.locks]]
  name = "sweep"
  key = 42
  [[targets.locks]]
  name = "broken"
  key1_sql = "7"
  key2_sql = "1 / 0"
)";
  const std::string out =
      ExpectOneProblem(body, At(body, "key2_sql") + "targets.locks.key2_sql: lock \"broken\": ");
  EXPECT_NE(out.find("division by zero"), std::string::npos) << out;
  EXPECT_NE(out.find("lock \"sweep\": key 42 (key), not held now"), std::string::npos) << out;
}

TEST_F(CheckTargetsTest, UnreachablePoolerIsNamedByItsKey) {
  const std::string body =
      "\n  [[targets.poolers]]\n  name = \"pgb\"\n  admin_dsn = \"host=127.0.0.1 port=" +
      std::to_string(testing::FreePort()) + " dbname=pgbouncer user=postgres\"\n";
  const std::string out = ExpectOneProblem(
      body, At(body, "admin_dsn") +
                "targets.poolers.admin_dsn: pooler \"pgb\": admin console did not answer: ");
  EXPECT_NE(out.find("stats_users"), std::string::npos) << out;
}

// Every kind at once: each problem is its own line, and the rest of the target is still shown.
TEST_F(CheckTargetsTest, SeveralProblemsEachOnItsOwnLine) {
  Pg().Exec(
      "DROP TABLE IF EXISTS ct_locked, ct_typed; "
      "CREATE TABLE ct_locked (index serial, is_locked int); "
      "CREATE TABLE ct_typed (id int, locked_at int, locked_by text); "
      "GRANT SELECT ON ct_typed TO pglock_check");
  const std::string body =
      "\n  [[targets.locks]]\n  name = \"sweep\"\n  key = 42\n"
      "  [[targets.locks]]\n  name = \"broken\"\n  key_sql = \"1 / 0\"\n"
      "  [[targets.leases]]\n  table = \"no_such_table\"\n"
      "  [[targets.leases]]\n  table = \"ct_locked\"\n  name_sql = \"'m-' || index\"\n"
      "  held_sql = \"is_locked = 1\"\n"
      "  [[targets.leases]]\n  table = \"ct_typed\"\n  name_column = \"id\"\n"
      "  taken_at_column = \"locked_at\"\n  ttl = \"10m\"\n"
      "  [[targets.poolers]]\n  name = \"pgb\"\n  admin_dsn = \"host=127.0.0.1 port=" +
      std::to_string(testing::FreePort()) + " dbname=pgbouncer user=postgres\"\n";
  std::string out;
  EXPECT_EQ(Check(body, &out), 1);
  EXPECT_EQ(Problems(out), 5) << out;
  EXPECT_NE(out.find("5 problem(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("lock \"sweep\": key 42 (key), not held now"), std::string::npos) << out;
  for (const char* key :
       {"targets.locks.key_sql", "targets.leases.table: lease table", "targets.leases.table: role",
        "targets.leases.taken_at_column", "targets.poolers.admin_dsn"}) {
    EXPECT_NE(out.find(std::string(": ") + key), std::string::npos) << key << "\n" << out;
  }
  Pg().Exec("DROP TABLE ct_locked, ct_typed");
}

// The test server writes csvlog (and jsonlog from 15 on) into Pg().LogDir() with every setting
// the exporter wants: the log is readable, its newest file named, its settings shown. With
// log_lock_waits turned off the check advises turning it on, and still exits 0.
TEST_F(CheckTargetsTest, ReadableServerLogAndItsSettings) {
  const std::string body =
      "\n  [targets.server_log]\n  path = \"" + Pg().LogDir() + "\"\n  format = \"csvlog\"\n";
  std::string out;
  EXPECT_EQ(Check(body, &out), 0);
  EXPECT_EQ(Problems(out), 0) << out;
  EXPECT_NE(
      out.find("server log: directory " + Pg().LogDir() + " (*.csv) readable, format csvlog: "),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(" file(s), the newest "), std::string::npos) << out;
  EXPECT_NE(out.find("server log settings: logging_collector on, log_destination 'csvlog"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("log_disconnections on, log_lock_waits on, deadlock_timeout 1s (shorter "
                     "waits are never logged)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("the server writes its log files to " + Pg().LogDir()), std::string::npos)
      << out;
  EXPECT_EQ(out.find("ADVICE"), std::string::npos) << out;

  Pg().Exec("ALTER SYSTEM SET log_lock_waits = off");
  Pg().Exec("SELECT pg_reload_conf()");
  EXPECT_TRUE(testing::WaitFor(5, [] { return Pg().Scalar("SHOW log_lock_waits") == "off"; }));
  std::string advised;
  EXPECT_EQ(Check(body, &advised), 0);
  EXPECT_EQ(Problems(advised), 0) << advised;
  EXPECT_NE(advised.find("ADVICE " + At(body, "[targets.server_log]") +
                         "targets.server_log: log_lock_waits is off: waits that end between two "
                         "polls are not seen -> ALTER SYSTEM SET log_lock_waits = on; SELECT "
                         "pg_reload_conf();"),
            std::string::npos)
      << advised;
  EXPECT_NE(advised.find("every target resolves (1 ADVICE line(s) above)"), std::string::npos)
      << advised;
  Pg().Exec("ALTER SYSTEM RESET log_lock_waits");
  Pg().Exec("SELECT pg_reload_conf()");
  EXPECT_TRUE(testing::WaitFor(5, [] { return Pg().Scalar("SHOW log_lock_waits") == "on"; }));
}

// A path that is not there: one problem at the path's line, naming where the server writes its
// log, and exit status 1.
TEST_F(CheckTargetsTest, MissingServerLogPathIsNamedByItsKey) {
  const std::string body =
      "\n  [targets.server_log]\n  path = \"/nonexistent/pglock-log\"\n  format = \"csvlog\"\n";
  ExpectOneProblem(body, At(body, "path = ") +
                             "targets.server_log.path: server log \"/nonexistent/pglock-log\": "
                             "No such file or directory -> set path to the server's log "
                             "directory or one of its files (the server writes to " +
                             Pg().LogDir() + ")");
}

// via = "sql": pg_monitor lets the role list the log directory, but reading a file needs EXECUTE
// on pg_read_binary_file, which the check names together with what it exposes; once granted, the
// log reads.
TEST_F(CheckTargetsTest, ServerLogOverSqlNeedsTheReadGrant) {
  const std::string format = Pg().VersionNum() >= 150000 ? "jsonlog" : "csvlog";
  const std::string body =
      "\n  [targets.server_log]\n  via = \"sql\"\n  format = \"" + format + "\"\n";
  const std::string out = ExpectOneProblem(
      body, At(body, "via = ") + "targets.server_log.via: server log: pg_read_binary_file(");
  EXPECT_NE(out.find("-> GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint, "
                     "boolean) TO pglock_check; it lets pglock_check read every file of the data "
                     "directory"),
            std::string::npos)
      << out;
  Pg().Exec(
      "GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint, boolean) TO "
      "pglock_check");
  std::string granted;
  EXPECT_EQ(Check(body, &granted), 0);
  EXPECT_NE(granted.find("server log: log_directory over SQL (*." +
                         std::string(format == "jsonlog" ? "json" : "csv") +
                         ") readable by role pglock_check, format " + format + ": "),
            std::string::npos)
      << granted;
  Pg().Exec(
      "REVOKE EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint, boolean) FROM "
      "pglock_check");
}

TEST_F(CheckTargetsTest, UnreachableTargetIsNamedByItsDsn) {
  Config config;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText("[[targets]]\nname = \"gone\"\ndsn = \"host=127.0.0.1 port=" +
                                  std::to_string(testing::FreePort()) + " connect_timeout=2\"\n",
                              "config.toml", &config, &errors));
  std::ostringstream report;
  EXPECT_EQ(CheckTargets(config, report), 1);
  EXPECT_NE(report.str().find("PROBLEM config.toml:3: targets.dsn: target \"gone\": cannot "
                              "connect: "),
            std::string::npos)
      << report.str();
}

}  // namespace
}  // namespace pglock
