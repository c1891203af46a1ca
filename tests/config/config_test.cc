#include "exporter/config/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace pglock {
namespace {

constexpr char kFile[] = "/etc/pglock_exporter/test.toml";
// Only the shape is checked by the config: prefix and 60 characters.
constexpr char kHash[] = "$2b$12$abcdefghijklmnopqrstuuNBI0r9Yr5zSlqSoy6f1iyMvCyr8l/pm";

// A file under $TMPDIR (or /tmp) with the given contents, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& contents, mode_t mode = 0600) {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/pglock_config_test_XXXXXX";
    const int fd = mkstemp(tmpl.data());
    EXPECT_GE(fd, 0);
    if (fd >= 0) {
      EXPECT_EQ(write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
      fchmod(fd, mode);
      close(fd);
    }
    path_ = tmpl;
  }
  ~TempFile() { unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The 1-based line of `text` holding the first occurrence of `needle`.
int LineOf(const std::string& text, const std::string& needle) {
  const auto pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  if (pos == std::string::npos) return -1;
  int line = 1;
  for (size_t i = 0; i < pos; ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

// The errors about `key`.
std::vector<ConfigError> ErrorsFor(const std::vector<ConfigError>& errors, const std::string& key) {
  std::vector<ConfigError> out;
  for (const ConfigError& e : errors) {
    if (e.key == key) out.push_back(e);
  }
  return out;
}

std::string Dump(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += e.ToString() + "\n";
  return out;
}

// Parses `text`, expects exactly one error about `key`, and that it is at the line holding
// `at_line_of` in `text` and its message contains `message_part`.
void ExpectOneError(const std::string& text, const std::string& key, const std::string& at_line_of,
                    const std::string& message_part) {
  Config config;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseConfigText(text, kFile, &config, &errors));
  const auto matching = ErrorsFor(errors, key);
  ASSERT_EQ(matching.size(), 1u) << "key " << key << " in:\n" << Dump(errors);
  EXPECT_EQ(matching[0].file, kFile);
  EXPECT_EQ(matching[0].line, LineOf(text, at_line_of)) << matching[0].ToString();
  EXPECT_NE(matching[0].message.find(message_part), std::string::npos) << matching[0].ToString();
}

const std::string kFullConfig = std::string(R"([web]
listen_address = "127.0.0.1:9999"
telemetry_path = "/pglock/metrics"
max_connections = 8
request_timeout = "30s"

[web.basic_auth_users]
prometheus = ")") + kHash + R"("

[poll]
interval = "10s"
timeout = "4s"
inventory_interval = "1m"
top_n = 50
max_leases = 200

[log]
level = "debug"
format = "json"

[[targets]]
name = "main"
dsn = "host=/var/run/postgresql dbname=app user=pglock_exporter"

  [[targets.locks]]
  name = "report-daily"
  key1 = 7742
  key2_text = "report-daily"
  [[targets.locks]]
  name = "rebuild:run"
  key_text = "rebuild:run"
  [[targets.locks]]
  name = "sweep"
  key = -42
  [[targets.locks]]
  name = "pair"
  key1 = -5
  key2 = 2147483647

  [[targets.leases]]
  table = "public.leases"
  holder_pattern = '^([^:]+):([0-9]+):'
  holder_labels = ["holder_host", "holder_pid"]
  [[targets.leases]]
  table = "jobs"
  name_column = "job"
  holder_column = "owner"
  taken_at_column = "since"
  expires_at_column = "until"
  read_on_standby = true

  [[targets.poolers]]
  name = "bouncer"
  admin_dsn = "host=127.0.0.1 port=6432 dbname=pgbouncer user=admin"

[[targets]]
name = "replica"
dsn = "postgresql://pglock@replica.example/app"
)";

TEST(ParseConfigTextTest, FullValidConfig) {
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText(kFullConfig, kFile, &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.file, kFile);
  EXPECT_EQ(c.web.listen_address, "127.0.0.1:9999");
  EXPECT_EQ(c.web.telemetry_path, "/pglock/metrics");
  EXPECT_EQ(c.web.max_connections, 8);
  EXPECT_EQ(c.web.request_timeout, Duration(30'000));
  ASSERT_EQ(c.web.basic_auth_users.size(), 1u);
  EXPECT_EQ(c.web.basic_auth_users.at("prometheus"), kHash);
  EXPECT_EQ(c.poll.interval, Duration(10'000));
  EXPECT_EQ(c.poll.timeout, Duration(4'000));
  EXPECT_EQ(c.poll.inventory_interval, Duration(60'000));
  EXPECT_EQ(c.poll.top_n, 50);
  EXPECT_EQ(c.poll.max_leases, 200);
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.log.format, "json");
  EXPECT_FALSE(c.world_readable_secret);

  ASSERT_EQ(c.targets.size(), 2u);
  const TargetConfig& main = c.targets[0];
  EXPECT_EQ(main.name, "main");
  EXPECT_EQ(main.dsn, "host=/var/run/postgresql dbname=app user=pglock_exporter");

  ASSERT_EQ(main.locks.size(), 4u);
  EXPECT_EQ(main.locks[0].name, "report-daily");
  EXPECT_EQ(main.locks[0].kind, LockNameConfig::Kind::kPairText);
  EXPECT_EQ(main.locks[0].key1, 7742);
  EXPECT_EQ(main.locks[0].key2_text, "report-daily");
  EXPECT_EQ(main.locks[1].kind, LockNameConfig::Kind::kBigintText);
  EXPECT_EQ(main.locks[1].key_text, "rebuild:run");
  EXPECT_EQ(main.locks[2].kind, LockNameConfig::Kind::kBigint);
  EXPECT_EQ(main.locks[2].key, -42);
  EXPECT_EQ(main.locks[3].kind, LockNameConfig::Kind::kPair);
  EXPECT_EQ(main.locks[3].key1, -5);
  EXPECT_EQ(main.locks[3].key2, 2147483647);

  ASSERT_EQ(main.leases.size(), 2u);
  const LeaseTableConfig& leases = main.leases[0];
  EXPECT_EQ(leases.table, "public.leases");
  EXPECT_EQ(leases.schema, "public");
  EXPECT_EQ(leases.relation, "leases");
  EXPECT_EQ(leases.name.column, "name");
  EXPECT_EQ(leases.holder.column, "holder");
  EXPECT_EQ(leases.taken_at.column, "taken_at");
  EXPECT_EQ(leases.expires_at.column, "expires_at");
  EXPECT_EQ(leases.holder_pattern, "^([^:]+):([0-9]+):");
  EXPECT_EQ(leases.holder_labels, (std::vector<std::string>{"holder_host", "holder_pid"}));
  EXPECT_FALSE(leases.read_on_standby);
  const LeaseTableConfig& jobs = main.leases[1];
  EXPECT_TRUE(jobs.read_on_standby);
  EXPECT_EQ(jobs.schema, "");
  EXPECT_EQ(jobs.relation, "jobs");
  EXPECT_EQ(jobs.name.column, "job");
  EXPECT_EQ(jobs.holder.column, "owner");
  EXPECT_EQ(jobs.taken_at.column, "since");
  EXPECT_EQ(jobs.expires_at.column, "until");

  ASSERT_EQ(main.poolers.size(), 1u);
  EXPECT_EQ(main.poolers[0].name, "bouncer");
  EXPECT_EQ(main.poolers[0].admin_dsn, "host=127.0.0.1 port=6432 dbname=pgbouncer user=admin");

  EXPECT_EQ(c.targets[1].name, "replica");
  EXPECT_EQ(c.targets[1].dsn, "postgresql://pglock@replica.example/app");
  EXPECT_TRUE(c.targets[1].locks.empty());
}

TEST(ParseConfigTextTest, EmptyFileGivesDefaults) {
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText("", kFile, &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.web.listen_address, ":9716");
  EXPECT_EQ(c.web.telemetry_path, "/metrics");
  EXPECT_TRUE(c.web.basic_auth_users.empty());
  EXPECT_TRUE(c.web.tls_cert_file.empty());
  EXPECT_EQ(c.poll.interval, Duration(5'000));
  EXPECT_EQ(c.poll.timeout, Duration(3'000));
  EXPECT_EQ(c.poll.top_n, 20);
  EXPECT_EQ(c.log.level, "info");
  EXPECT_EQ(c.log.format, "text");
  // Without flags nothing adds a default target: that is LoadConfig's job.
  EXPECT_TRUE(c.targets.empty());
}

TEST(ParseConfigTextTest, TimeoutDefaultsToMinOfThreeSecondsAndInterval) {
  {
    Config c;
    std::vector<ConfigError> errors;
    ASSERT_TRUE(ParseConfigText("[poll]\ninterval = \"1s\"\n", kFile, &c, &errors)) << Dump(errors);
    EXPECT_EQ(c.poll.timeout, Duration(1'000));
  }
  {
    Config c;
    std::vector<ConfigError> errors;
    ASSERT_TRUE(ParseConfigText("[poll]\ninterval = \"30s\"\n", kFile, &c, &errors))
        << Dump(errors);
    EXPECT_EQ(c.poll.timeout, Duration(3'000));
  }
}

TEST(ParseConfigTextTest, DsnWithPasswordInConfigIsASecret) {
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText("[[targets]]\nname = \"a\"\ndsn = \"host=x password=hunter2\"\n",
                              kFile, &c, &errors))
      << Dump(errors);
  EXPECT_TRUE(c.world_readable_secret);
}

TEST(ParseConfigTextErrorTest, UnknownTopLevelKey) {
  ExpectOneError("[web]\nlisten_address = \":1\"\n\ncolour = 1\n", "web.colour", "colour",
                 "unknown key");
  ExpectOneError("# top\ncolour = \"red\"\n[web]\n", "colour", "colour", "unknown key");
}

TEST(ParseConfigTextErrorTest, UnknownNestedKeys) {
  const std::string text = R"([[targets]]
name = "a"
  [[targets.leases]]
  table = "t"
  colour = "red"
  [[targets.locks]]
  name = "x"
  key = 1
  hue = 2
  [[targets.poolers]]
  name = "p"
  admin_dsn = "host=x"
  shade = 3
)";
  ExpectOneError(text, "targets.leases.colour", "colour", "unknown key");
  ExpectOneError(text, "targets.locks.hue", "hue", "unknown key");
  ExpectOneError(text, "targets.poolers.shade", "shade", "unknown key");
}

TEST(ParseConfigTextErrorTest, WrongTypes) {
  ExpectOneError("[web]\nlisten_address = 9716\n", "web.listen_address", "9716",
                 "must be a string");
  ExpectOneError("[poll]\n\ntop_n = \"20\"\n", "poll.top_n", "top_n", "must be an integer");
  ExpectOneError("[poll]\ninterval = 5\n", "poll.interval", "interval", "duration string");
  ExpectOneError("web = 1\n", "web", "web", "must be a table");
  ExpectOneError("targets = \"x\"\n", "targets", "targets", "array of tables");
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n[[targets.leases]]\ntable = \"t\"\n"
      "holder_pattern = \"(a)\"\nholder_labels = [\"x\", 2]\n",
      "targets.leases.holder_labels", "holder_labels", "array of strings");
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n[[targets.leases]]\ntable = \"t\"\n"
      "read_on_standby = \"yes\"\n",
      "targets.leases.read_on_standby", "read_on_standby", "must be true or false");
}

TEST(ParseConfigTextErrorTest, IntegerOutOfRange) {
  ExpectOneError("[poll]\ntop_n = 0\n", "poll.top_n", "top_n", "between 1 and");
}

TEST(ParseConfigTextErrorTest, BadDuration) {
  ExpectOneError("[poll]\ninterval = \"5s\"\ntimeout = \"2x\"\n", "poll.timeout", "timeout",
                 "unknown unit");
  ExpectOneError("[web]\n\nrequest_timeout = \"10\"\n", "web.request_timeout", "request_timeout",
                 "missing unit");
}

TEST(ParseConfigTextErrorTest, BadRegex) {
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n"
      "  holder_pattern = '^([a-z'\n  holder_labels = [\"h\"]\n",
      "targets.leases.holder_pattern", "holder_pattern", "invalid POSIX extended");
}

TEST(ParseConfigTextErrorTest, BadPreflightTables) {
  ExpectOneError("[[targets]]\nname = \"a\"\npreflight_tables = [\"public.orders\", \"a.b.c\"]\n",
                 "targets.preflight_tables", "preflight_tables",
                 "\"a.b.c\": more than schema.table");
  ExpectOneError("[[targets]]\nname = \"a\"\npreflight_tables = [\"t\", \"t\"]\n",
                 "targets.preflight_tables", "preflight_tables", "listed twice");
}

TEST(ParseConfigTextErrorTest, PatternAndLabelCountMismatch) {
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n"
      "  holder_pattern = '^([^:]+):([0-9]+)'\n  holder_labels = [\"host\"]\n",
      "targets.leases.holder_labels", "holder_labels", "2 capture group(s)");
}

TEST(ParseConfigTextErrorTest, LabelsWithoutPattern) {
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n"
      "  holder_labels = [\"host\"]\n",
      "targets.leases.holder_labels", "holder_labels", "needs holder_pattern");
}

TEST(ParseConfigTextErrorTest, InvalidLabelNames) {
  for (const char* bad : {"1host", "__host", "ho-st", "target", "lease", "table", ""}) {
    SCOPED_TRACE(bad);
    ExpectOneError(std::string("[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n"
                               "  holder_pattern = '^(.*)$'\n  holder_labels = [\"") +
                       bad + "\"]\n",
                   "targets.leases.holder_labels", "holder_labels", "not a usable label name");
  }
}

TEST(ParseConfigTextErrorTest, DuplicateLabelName) {
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n"
      "  holder_pattern = '^(.)(.)'\n  holder_labels = [\"h\", \"h\"]\n",
      "targets.leases.holder_labels", "holder_labels", "duplicate label");
}

TEST(ParseConfigTextErrorTest, LeaseTableNameShape) {
  ExpectOneError("[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"a.b.c\"\n",
                 "targets.leases.table", "table =", "must be \"schema.table\"");
  ExpectOneError("[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  holder_column = \"h\"\n",
                 "targets.leases.table", "[[targets.leases]]", "needs a table");
}

TEST(ParseConfigTextTest, LeaseTablesInOtherDatabases) {
  const std::string text = R"toml([[targets]]
name = "a"
  [[targets.leases]]
  table = "public.leases"
  [[targets.leases]]
  table = "public.leases"
  database = "billing"
  [[targets.leases]]
  table = "public.leases"
  database = "shipping"
)toml";
  Config config;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText(text, kFile, &config, &errors)) << Dump(errors);
  const auto& leases = config.targets[0].leases;
  ASSERT_EQ(leases.size(), 3u);
  EXPECT_EQ(leases[0].database, "");
  EXPECT_EQ(leases[0].label(), "public.leases");
  EXPECT_EQ(leases[1].database, "billing");
  EXPECT_EQ(leases[1].label(), "billing/public.leases");
  EXPECT_EQ(leases[2].label(), "shipping/public.leases");
}

TEST(ParseConfigTextErrorTest, LeaseTableDatabase) {
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n"
      "  database = 5\n",
      "targets.leases.database", "database =", "must be a string");
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n"
      "  database = \"\"\n",
      "targets.leases.database", "database =", "must be a database name");
  // The same table in the same database twice; the label decides, whatever the spelling.
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n"
      "  database = \"b\"\n  [[targets.leases]]\n  table  = \"t\"\n"
      "  database = \"b\"\n",
      "targets.leases.table", "table  =", "\"b/t\" listed twice");
}

TEST(ParseConfigTextTest, KeyExpressionsAndGeneralLockTables) {
  const std::string text = R"toml([[targets]]
name = "a"
  [[targets.locks]]
  name = "invoices"
  key_sql = "hashtextextended('invoices', 0)"
  [[targets.locks]]
  name = "payouts"
  key1_sql = "1"
  key2_sql = "2"
  [[targets.leases]]
  table = "knex_migrations_lock"
  name_sql = "'migrations-' || index"
  held_sql = "is_locked = 1"
  max_hold = "30m"
  [[targets.leases]]
  table = "jobs"
  name_column = "id"
  taken_at_column = "locked_at"
  ttl = "10m"
  where_sql = "locked_at IS NOT NULL"
  [[targets.leases]]
  table = "mutexes"
  row_lock = true
)toml";
  Config config;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText(text, kFile, &config, &errors)) << Dump(errors);
  const TargetConfig& t = config.targets[0];
  EXPECT_EQ(t.locks[0].kind, LockNameConfig::Kind::kBigintSql);
  EXPECT_EQ(t.locks[0].key_sql, "hashtextextended('invoices', 0)");
  EXPECT_EQ(t.locks[1].kind, LockNameConfig::Kind::kPairSql);
  EXPECT_EQ(t.locks[1].Problem("key2_sql", "x"),
            std::string(kFile) + ":9: targets.locks.key2_sql: x");
  const LeaseTableConfig& flags = t.leases[0];
  EXPECT_EQ(flags.name.sql, "'migrations-' || index");
  EXPECT_TRUE(flags.name.column.empty());
  // A general table has only the fields it names.
  EXPECT_FALSE(flags.holder.present());
  EXPECT_FALSE(flags.taken_at.present());
  EXPECT_FALSE(flags.has_expiry());
  EXPECT_EQ(flags.max_hold, Duration(1'800'000));
  const LeaseTableConfig& jobs = t.leases[1];
  EXPECT_EQ(jobs.taken_at.column, "locked_at");
  EXPECT_FALSE(jobs.holder.present());
  EXPECT_TRUE(jobs.has_expiry());
  EXPECT_EQ(jobs.ttl, Duration(600'000));
  EXPECT_EQ(jobs.where_sql, "locked_at IS NOT NULL");
  EXPECT_EQ(jobs.Problem("taken_at_column", "x"),
            std::string(kFile) + ":18: targets.leases.taken_at_column: x");
  EXPECT_EQ(jobs.Problem("holder_column", "x"),
            std::string(kFile) + ":15: targets.leases.holder_column: x");
  // A row-lock table is general too: the name column by default, nothing else.
  const LeaseTableConfig& mutexes = t.leases[2];
  EXPECT_TRUE(mutexes.row_lock);
  EXPECT_EQ(mutexes.name.column, "name");
  EXPECT_FALSE(mutexes.holder.present());
  EXPECT_FALSE(mutexes.taken_at.present());
  EXPECT_FALSE(mutexes.has_expiry());
  EXPECT_FALSE(jobs.row_lock);
}

TEST(ParseConfigTextErrorTest, KeyExpressionCombinations) {
  const std::string head = "[[targets]]\nname = \"a\"\n  [[targets.locks]]\n  name = \"l\"\n";
  ExpectOneError(head + "  key = 1\n  key_sql = \"2\"\n", "targets.locks.key", "key = 1",
                 "exactly one of key, key_text, key_sql");
  ExpectOneError(head + "  key1_sql = \"1\"\n", "targets.locks.key2_sql", "[[targets.locks]]",
                 "with key1_sql needs key2_sql");
  ExpectOneError(head + "  key = 1\n  key2_sql = \"2\"\n", "targets.locks.key2_sql", "key2_sql",
                 "needs key1_sql");
  ExpectOneError(head + "  key_sql = \"\"\n", "targets.locks.key_sql", "key_sql",
                 "non-empty SQL expression");
}

TEST(ParseConfigTextErrorTest, LockTableCombinations) {
  const std::string head = "[[targets]]\nname = \"a\"\n  [[targets.leases]]\n  table = \"t\"\n";
  ExpectOneError(head + "  name_column = \"n\"\n  name_sql = \"'x'\"\n", "targets.leases.name_sql",
                 "name_sql", "either name_column or name_sql");
  ExpectOneError(head + "  taken_at_column = \"a\"\n  ttl = \"10m\"\n  expires_at_column = \"b\"\n",
                 "targets.leases.ttl", "ttl", "either ttl or expires_at_column");
  ExpectOneError(head + "  ttl = \"10m\"\n", "targets.leases.ttl", "ttl", "ttl needs taken_at");
  ExpectOneError(head + "  held_sql = \"true\"\n  taken_at_column = \"a\"\n  ttl = \"1m\"\n",
                 "targets.leases.held_sql", "held_sql", "without an expiry");
  ExpectOneError(head + "  max_hold = \"0s\"\n", "targets.leases.max_hold", "max_hold",
                 "greater than 0s");
  ExpectOneError(head + "  row_lock = true\n  expires_at_column = \"e\"\n",
                 "targets.leases.row_lock", "row_lock", "without an expiry");
  ExpectOneError(head + "  row_lock = \"yes\"\n", "targets.leases.row_lock", "row_lock",
                 "true or false");
  ExpectOneError(head + "  where_sql = \"\"\n", "targets.leases.where_sql", "where_sql",
                 "non-empty SQL expression");
  ExpectOneError(head + "  holder_column = \"\"\n", "targets.leases.holder_column", "holder_column",
                 "must not be empty");
}

TEST(ParseConfigTextErrorTest, DuplicateTargetNameAtTheSecondName) {
  const std::string text =
      "[[targets]]\nname = \"main\"\n\n[[targets]]\n# again\nname = \"main\" # dup\n";
  ExpectOneError(text, "targets.name", "name = \"main\" # dup", "duplicate target name");
}

TEST(ParseConfigTextErrorTest, TargetWithoutName) {
  ExpectOneError("[[targets]]\ndsn = \"host=x\"\n", "targets.name", "[[targets]]",
                 "non-empty name");
}

TEST(ParseConfigTextErrorTest, DuplicateLockName) {
  const std::string text = R"([[targets]]
name = "main"
  [[targets.locks]]
  name = "sweep"
  key = 1
  [[targets.locks]]
  name = "sweep" # dup
  key = 2
)";
  ExpectOneError(text, "targets.locks.name", "name = \"sweep\" # dup", "duplicate lock name");
}

TEST(ParseConfigTextErrorTest, SameLockNameInTwoTargetsIsFine) {
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_TRUE(
      ParseConfigText("[[targets]]\nname = \"a\"\n[[targets.locks]]\nname = \"x\"\nkey = 1\n"
                      "[[targets]]\nname = \"b\"\n[[targets.locks]]\nname = \"x\"\nkey = 1\n",
                      kFile, &c, &errors))
      << Dump(errors);
}

TEST(ParseConfigTextErrorTest, LockWithTwoKeyForms) {
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.locks]]\n  name = \"x\"\n  key = 1\n"
      "  key_text = \"x\"\n",
      "targets.locks.key", "key = 1", "exactly one of key");
}

TEST(ParseConfigTextErrorTest, LockWithNoKeyForm) {
  ExpectOneError("[[targets]]\nname = \"a\"\n  [[targets.locks]]\n  name = \"x\"\n",
                 "targets.locks.key", "[[targets.locks]]", "exactly one of key");
}

TEST(ParseConfigTextErrorTest, Key1WithoutKey2) {
  ExpectOneError("[[targets]]\nname = \"a\"\n  [[targets.locks]]\n  name = \"x\"\n  key1 = 1\n",
                 "targets.locks.key2", "[[targets.locks]]", "exactly one of key2 or key2_text");
}

TEST(ParseConfigTextErrorTest, Key2WithoutKey1) {
  const std::string text =
      "[[targets]]\nname = \"a\"\n  [[targets.locks]]\n  name = \"x\"\n  key = 1\n  key2 = 2\n";
  ExpectOneError(text, "targets.locks.key2", "key2 = 2", "needs key1");
}

TEST(ParseConfigTextErrorTest, Key1OutOfInt32Range) {
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.locks]]\n  name = \"x\"\n  key1 = 2147483648\n"
      "  key2 = 1\n",
      "targets.locks.key1", "key1 =", "between -2147483648 and 2147483647");
  ExpectOneError(
      "[[targets]]\nname = \"a\"\n  [[targets.locks]]\n  name = \"x\"\n  key1 = 1\n"
      "  key2 = -2147483649\n",
      "targets.locks.key2", "key2 =", "between -2147483648 and 2147483647");
}

TEST(ParseConfigTextErrorTest, DsnAndDsnFileBoth) {
  TempFile dsn("host=x\n");
  ExpectOneError("[[targets]]\nname = \"a\"\ndsn = \"host=y\"\ndsn_file = \"" + dsn.path() + "\"\n",
                 "targets.dsn_file", "dsn_file", "not both");
}

TEST(ParseConfigTextErrorTest, UnreadableDsnFile) {
  ExpectOneError("[[targets]]\nname = \"a\"\n\ndsn_file = \"/nonexistent/pglock/main.dsn\"\n",
                 "targets.dsn_file", "dsn_file", "cannot read /nonexistent/pglock/main.dsn");
}

TEST(ParseConfigTextErrorTest, InvalidDsn) {
  ExpectOneError("[[targets]]\nname = \"a\"\ndsn = \"host=x no_such_option=1\"\n", "targets.dsn",
                 "dsn", "invalid connection option");
}

TEST(ParseConfigTextErrorTest, InvalidDsnErrorNeverShowsThePassword) {
  for (const char* dsn : {"postgresql://u:hunter2@[::1/app", "postgresql://u:hunter2%zz@db/app",
                          "host=x password=hunter2 hunter2"}) {
    SCOPED_TRACE(dsn);
    Config c;
    std::vector<ConfigError> errors;
    EXPECT_FALSE(ParseConfigText(std::string("[[targets]]\nname = \"a\"\ndsn = '") + dsn + "'\n",
                                 kFile, &c, &errors));
    ASSERT_EQ(ErrorsFor(errors, "targets.dsn").size(), 1u) << Dump(errors);
    EXPECT_EQ(Dump(errors).find("hunter2"), std::string::npos) << Dump(errors);
  }
}

TEST(ParseConfigTextTest, DsnFileIsReadAndTrimmed) {
  TempFile dsn("host=db.example dbname=app user=u\r\n");
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText("[[targets]]\nname = \"a\"\ndsn_file = \"" + dsn.path() + "\"\n",
                              kFile, &c, &errors))
      << Dump(errors);
  ASSERT_EQ(c.targets.size(), 1u);
  EXPECT_EQ(c.targets[0].dsn, "host=db.example dbname=app user=u");
  EXPECT_FALSE(c.world_readable_secret);
}

TEST(ParseConfigTextTest, WorldReadableDsnFileWithPasswordIsFlagged) {
  TempFile private_dsn("host=x password=secret\n", 0600);
  TempFile public_dsn("host=x password=secret\n", 0644);
  {
    Config c;
    std::vector<ConfigError> errors;
    ASSERT_TRUE(
        ParseConfigText("[[targets]]\nname = \"a\"\ndsn_file = \"" + private_dsn.path() + "\"\n",
                        kFile, &c, &errors))
        << Dump(errors);
    EXPECT_FALSE(c.world_readable_secret);
  }
  {
    Config c;
    std::vector<ConfigError> errors;
    ASSERT_TRUE(
        ParseConfigText("[[targets]]\nname = \"a\"\ndsn_file = \"" + public_dsn.path() + "\"\n",
                        kFile, &c, &errors))
        << Dump(errors);
    EXPECT_TRUE(c.world_readable_secret);
  }
}

TEST(ParseConfigTextErrorTest, BadBcryptHash) {
  ExpectOneError("[web.basic_auth_users]\nalice = \"" + std::string(kHash) +
                     "\"\nprometheus = \"plaintext\"\n",
                 "web.basic_auth_users.prometheus", "plaintext", "bcrypt hash");
  ExpectOneError("[web.basic_auth_users]\nprometheus = 12\n", "web.basic_auth_users.prometheus",
                 "prometheus", "bcrypt hash");
  // Right prefix, wrong length.
  ExpectOneError("[web.basic_auth_users]\nprometheus = \"$2b$12$short\"\n",
                 "web.basic_auth_users.prometheus", "prometheus", "bcrypt hash");
}

TEST(ParseConfigTextErrorTest, TlsCertWithoutKey) {
  TempFile cert("-----BEGIN CERTIFICATE-----\n");
  ExpectOneError("[web]\nlisten_address = \":9716\"\ntls_cert_file = \"" + cert.path() + "\"\n",
                 "web.tls_cert_file", "tls_cert_file", "set both");
}

TEST(ParseConfigTextErrorTest, UnreadableTlsKey) {
  TempFile cert("-----BEGIN CERTIFICATE-----\n");
  ExpectOneError(
      "[web]\ntls_cert_file = \"" + cert.path() + "\"\ntls_key_file = \"/nonexistent/tls.key\"\n",
      "web.tls_key_file", "tls_key_file", "cannot read");
}

TEST(ParseConfigTextErrorTest, PollTimeoutLongerThanInterval) {
  ExpectOneError("[poll]\ninterval = \"2s\"\ntimeout = \"3s\"\n", "poll.timeout", "timeout",
                 "must not exceed poll.interval (2s)");
}

TEST(ParseConfigTextErrorTest, PollIntervalTooShort) {
  ExpectOneError("[poll]\n\ninterval = \"50ms\"\ntimeout = \"50ms\"\n", "poll.interval", "interval",
                 "at least 100ms");
}

TEST(ParseConfigTextErrorTest, BadListenAddress) {
  for (const char* bad : {"localhost", "host:", ":99999", ":http", "127.0.0.1:123456"}) {
    SCOPED_TRACE(bad);
    ExpectOneError(std::string("[web]\n\nlisten_address = \"") + bad + "\"\n", "web.listen_address",
                   "listen_address", "not HOST:PORT");
  }
}

TEST(ParseConfigTextTest, GoodListenAddresses) {
  for (const char* good : {":9716", "0.0.0.0:80", "[::1]:9716", "exporter.local:65535"}) {
    Config c;
    std::vector<ConfigError> errors;
    EXPECT_TRUE(ParseConfigText(std::string("[web]\nlisten_address = \"") + good + "\"\n", kFile,
                                &c, &errors))
        << good << "\n"
        << Dump(errors);
  }
}

TEST(ParseConfigTextErrorTest, BadTelemetryPath) {
  for (const char* bad : {"metrics", "/", "/-/metrics", ""}) {
    SCOPED_TRACE(bad);
    ExpectOneError(std::string("[web]\ntelemetry_path = \"") + bad + "\"\n", "web.telemetry_path",
                   "telemetry_path", "must start with /");
  }
}

TEST(ParseConfigTextErrorTest, BadLogLevelAndFormat) {
  ExpectOneError("[log]\nlevel = \"loud\"\n", "log.level", "level", "is not one of");
  ExpectOneError("[log]\nlevel = \"warn\"\nformat = \"xml\"\n", "log.format", "format",
                 "not text or json");
}

TEST(ParseConfigTextErrorTest, TomlSyntaxErrorHasItsLine) {
  const std::string text = "[web]\nlisten_address = \":9716\"\n\n[poll\ninterval = \"5s\"\n";
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseConfigText(text, kFile, &c, &errors));
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].file, kFile);
  EXPECT_EQ(errors[0].line, LineOf(text, "[poll"));
  EXPECT_EQ(errors[0].key, "");
  EXPECT_EQ(errors[0].message.rfind("TOML syntax: ", 0), 0u) << errors[0].message;
  // One line only: the excerpt toml11 adds is dropped.
  EXPECT_EQ(errors[0].message.find('\n'), std::string::npos) << errors[0].message;
}

TEST(ParseConfigTextErrorTest, DuplicateTomlKeyIsASyntaxError) {
  const std::string text = "[web]\nlisten_address = \":1\"\nlisten_address = \":2\"\n";
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseConfigText(text, kFile, &c, &errors));
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].line, 3) << Dump(errors);
}

TEST(ParseConfigTextErrorTest, ReportsEveryErrorAtOnce) {
  const std::string text = R"(colour = 1
[web]
listen_address = "nowhere"
[poll]
interval = "5x"
top_n = -1
[[targets]]
name = "a"
  [[targets.locks]]
  name = "l"
[[targets]]
name = "a"
shade = 2
)";
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseConfigText(text, kFile, &c, &errors));
  struct Want {
    const char* key;
    const char* line_of;
  };
  const Want wants[] = {
      {"colour", "colour"},
      {"web.listen_address", "listen_address"},
      {"poll.interval", "interval"},
      {"poll.top_n", "top_n"},
      {"targets.locks.key", "[[targets.locks]]"},
      {"targets.name", "name = \"a\"\nshade"},
      {"targets.shade", "shade"},
  };
  EXPECT_EQ(errors.size(), std::size(wants)) << Dump(errors);
  for (const Want& w : wants) {
    const auto found = ErrorsFor(errors, w.key);
    ASSERT_EQ(found.size(), 1u) << w.key << "\n" << Dump(errors);
    EXPECT_EQ(found[0].line, LineOf(text, w.line_of)) << found[0].ToString();
  }
}

TEST(ConfigErrorTest, ToStringOmitsEmptyParts) {
  EXPECT_EQ((ConfigError{"a.toml", 12, "poll.interval", "bad"}).ToString(),
            "a.toml:12: poll.interval: bad");
  EXPECT_EQ((ConfigError{"a.toml", 0, "web.listen_address", "bad"}).ToString(),
            "a.toml: web.listen_address: bad");
  EXPECT_EQ((ConfigError{"", 0, "--poll.interval", "bad"}).ToString(), "--poll.interval: bad");
  EXPECT_EQ((ConfigError{"a.toml", 3, "", "TOML syntax: x"}).ToString(),
            "a.toml:3: TOML syntax: x");
  EXPECT_EQ((ConfigError{"", 0, "", "bad"}).ToString(), "bad");
}

// ---- LoadConfig -----------------------------------------------------------------------------

TEST(LoadConfigTest, FlagsOverrideTheFile) {
  TempFile file(
      "[web]\nlisten_address = \":1111\"\ntelemetry_path = \"/a\"\n"
      "[poll]\ninterval = \"10s\"\n[log]\nlevel = \"debug\"\nformat = \"json\"\n"
      "[[targets]]\nname = \"main\"\ndsn = \"host=file\"\n");
  Flags flags;
  flags.config_file = file.path();
  flags.listen_address = "127.0.0.1:2222";
  flags.telemetry_path = "/b";
  flags.poll_interval = Duration(20'000);
  flags.log_level = "warn";
  flags.log_format = "text";
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(flags, std::nullopt, &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.file, file.path());
  EXPECT_EQ(c.web.listen_address, "127.0.0.1:2222");
  EXPECT_EQ(c.web.telemetry_path, "/b");
  EXPECT_EQ(c.poll.interval, Duration(20'000));
  EXPECT_EQ(c.log.level, "warn");
  EXPECT_EQ(c.log.format, "text");
  ASSERT_EQ(c.targets.size(), 1u);
  EXPECT_EQ(c.targets[0].dsn, "host=file");
}

TEST(LoadConfigTest, FileValuesStayWithoutFlags) {
  TempFile file("[web]\nlisten_address = \":1111\"\n[poll]\ninterval = \"10s\"\n");
  Flags flags;
  flags.config_file = file.path();
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(flags, std::nullopt, &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.web.listen_address, ":1111");
  EXPECT_EQ(c.poll.interval, Duration(10'000));
}

TEST(LoadConfigTest, DsnFlagOverridesTheSingleTarget) {
  TempFile file("[[targets]]\nname = \"main\"\ndsn = \"host=file\"\n");
  Flags flags;
  flags.config_file = file.path();
  flags.dsn = "host=flag";
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(flags, std::string("host=env"), &c, &errors)) << Dump(errors);
  ASSERT_EQ(c.targets.size(), 1u);
  EXPECT_EQ(c.targets[0].name, "main");
  EXPECT_EQ(c.targets[0].dsn, "host=flag");
}

TEST(LoadConfigTest, EnvDsnDoesNotOverrideAConfiguredTarget) {
  TempFile file("[[targets]]\nname = \"main\"\ndsn = \"host=file\"\n");
  Flags flags;
  flags.config_file = file.path();
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(flags, std::string("host=env"), &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.targets[0].dsn, "host=file");
}

TEST(LoadConfigTest, DsnFlagWithSeveralTargetsIsAnError) {
  TempFile file("[[targets]]\nname = \"a\"\n[[targets]]\nname = \"b\"\n");
  Flags flags;
  flags.config_file = file.path();
  flags.dsn = "host=flag";
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(LoadConfig(flags, std::nullopt, &c, &errors));
  const auto found = ErrorsFor(errors, "--postgres.dsn");
  ASSERT_EQ(found.size(), 1u) << Dump(errors);
  EXPECT_EQ(found[0].file, file.path());
  EXPECT_NE(found[0].message.find("several targets"), std::string::npos);
}

TEST(LoadConfigTest, NoFileUsesDsnFlagFirst) {
  Flags flags;
  flags.dsn = "host=flag";
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(flags, std::string("host=env"), &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.file, "");
  ASSERT_EQ(c.targets.size(), 1u);
  EXPECT_EQ(c.targets[0].name, "default");
  EXPECT_EQ(c.targets[0].dsn, "host=flag");
  EXPECT_EQ(c.web.listen_address, ":9716");
}

TEST(LoadConfigTest, NoFileFallsBackToEnvDsn) {
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(Flags{}, std::string("host=env dbname=app"), &c, &errors)) << Dump(errors);
  ASSERT_EQ(c.targets.size(), 1u);
  EXPECT_EQ(c.targets[0].name, "default");
  EXPECT_EQ(c.targets[0].dsn, "host=env dbname=app");
}

TEST(LoadConfigTest, NoFileNoDsnLeavesLibpqDefaults) {
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(Flags{}, std::nullopt, &c, &errors)) << Dump(errors);
  ASSERT_EQ(c.targets.size(), 1u);
  EXPECT_EQ(c.targets[0].name, "default");
  EXPECT_EQ(c.targets[0].dsn, "");
}

TEST(LoadConfigTest, FileWithoutTargetsGetsTheDefaultTarget) {
  TempFile file("[poll]\ninterval = \"10s\"\n");
  Flags flags;
  flags.config_file = file.path();
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(flags, std::string("host=env"), &c, &errors)) << Dump(errors);
  ASSERT_EQ(c.targets.size(), 1u);
  EXPECT_EQ(c.targets[0].name, "default");
  EXPECT_EQ(c.targets[0].dsn, "host=env");
}

TEST(LoadConfigTest, InvalidEnvDsnNamesTheVariable) {
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(LoadConfig(Flags{}, std::string("host=x bogus_option=1"), &c, &errors));
  ASSERT_EQ(ErrorsFor(errors, "PGLOCK_EXPORTER_DSN").size(), 1u) << Dump(errors);
}

TEST(LoadConfigTest, InvalidFlagDsnNamesTheFlagWithoutEchoingIt) {
  Flags flags;
  flags.dsn = "host=x password=hunter2 bogus_option=1";
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(LoadConfig(flags, std::nullopt, &c, &errors));
  const auto found = ErrorsFor(errors, "--postgres.dsn");
  ASSERT_EQ(found.size(), 1u) << Dump(errors);
  EXPECT_EQ(found[0].message.find("hunter2"), std::string::npos) << found[0].message;
}

TEST(LoadConfigTest, PollTimeoutDefaultsToMinOfThreeSecondsAndInterval) {
  Flags flags;
  flags.poll_interval = Duration(1'000);
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(LoadConfig(flags, std::nullopt, &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.poll.timeout, Duration(1'000));

  flags.poll_interval = Duration(60'000);
  errors.clear();
  ASSERT_TRUE(LoadConfig(flags, std::nullopt, &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.poll.timeout, Duration(3'000));
}

TEST(LoadConfigTest, FlagIntervalBelowFileTimeoutPointsAtTheTimeoutLine) {
  const std::string text = "[poll]\ninterval = \"10s\"\ntimeout = \"4s\"\n";
  TempFile file(text);
  Flags flags;
  flags.config_file = file.path();
  flags.poll_interval = Duration(2'000);
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(LoadConfig(flags, std::nullopt, &c, &errors));
  const auto found = ErrorsFor(errors, "poll.timeout");
  ASSERT_EQ(found.size(), 1u) << Dump(errors);
  EXPECT_EQ(found[0].line, LineOf(text, "timeout"));
}

TEST(LoadConfigTest, BadValueFromAFlagHasNoFileLine) {
  const std::string text = "[web]\nlisten_address = \":9716\"\n";
  TempFile file(text);
  Flags flags;
  flags.config_file = file.path();
  flags.listen_address = "nowhere";
  flags.log_level = "loud";
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(LoadConfig(flags, std::nullopt, &c, &errors));
  const auto addr = ErrorsFor(errors, "web.listen_address");
  ASSERT_EQ(addr.size(), 1u) << Dump(errors);
  EXPECT_EQ(addr[0].line, 0);
  const auto level = ErrorsFor(errors, "log.level");
  ASSERT_EQ(level.size(), 1u) << Dump(errors);
  EXPECT_EQ(level[0].line, 0);
}

TEST(LoadConfigTest, FileErrorsKeepTheirLines) {
  const std::string text = "[poll]\ninterval = \"5s\"\n\ncolour = 1\n";
  TempFile file(text);
  Flags flags;
  flags.config_file = file.path();
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(LoadConfig(flags, std::nullopt, &c, &errors));
  const auto found = ErrorsFor(errors, "poll.colour");
  ASSERT_EQ(found.size(), 1u) << Dump(errors);
  EXPECT_EQ(found[0].file, file.path());
  EXPECT_EQ(found[0].line, 4);
}

TEST(LoadConfigTest, MissingConfigFile) {
  Flags flags;
  flags.config_file = "/nonexistent/pglock_exporter.toml";
  Config c;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(LoadConfig(flags, std::nullopt, &c, &errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].file, "/nonexistent/pglock_exporter.toml");
  EXPECT_NE(errors[0].message.find("cannot open"), std::string::npos);
}

TEST(LoadConfigTest, AppendsToExistingErrors) {
  std::vector<ConfigError> errors = {{"", 0, "--x", "earlier"}};
  Config c;
  // Success is judged on the errors this call added.
  EXPECT_TRUE(LoadConfig(Flags{}, std::nullopt, &c, &errors));
  EXPECT_EQ(errors.size(), 1u);
}

// ---- ParseFlags -----------------------------------------------------------------------------

TEST(ParseFlagsTest, EqualsAndSeparateValues) {
  Flags flags;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseFlags({"--config.file=/etc/p.toml", "--web.listen-address", ":1234",
                          "--web.telemetry-path=/m", "--postgres.dsn", "host=a port=5433",
                          "--poll.interval=250ms", "--log.level", "debug", "--log.format=json"},
                         &flags, &errors))
      << Dump(errors);
  EXPECT_EQ(flags.config_file, "/etc/p.toml");
  EXPECT_EQ(flags.listen_address, ":1234");
  EXPECT_EQ(flags.telemetry_path, "/m");
  EXPECT_EQ(flags.dsn, "host=a port=5433");
  EXPECT_EQ(flags.poll_interval, Duration(250));
  EXPECT_EQ(flags.log_level, "debug");
  EXPECT_EQ(flags.log_format, "json");
  EXPECT_FALSE(flags.check_config);
  EXPECT_FALSE(flags.version);
  EXPECT_FALSE(flags.help);
}

TEST(ParseFlagsTest, ValueMayContainEqualsSigns) {
  Flags flags;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseFlags({"--postgres.dsn=host=a dbname=b"}, &flags, &errors));
  EXPECT_EQ(flags.dsn, "host=a dbname=b");
}

TEST(ParseFlagsTest, UnsetFlagsStayUnset) {
  Flags flags;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseFlags({}, &flags, &errors));
  EXPECT_FALSE(flags.config_file.has_value());
  EXPECT_FALSE(flags.poll_interval.has_value());
  EXPECT_FALSE(flags.dsn.has_value());
}

TEST(ParseFlagsTest, Switches) {
  Flags flags;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseFlags({"--check-config", "--version", "-h"}, &flags, &errors));
  EXPECT_TRUE(flags.check_config);
  EXPECT_TRUE(flags.version);
  EXPECT_TRUE(flags.help);

  Flags f2;
  ASSERT_TRUE(ParseFlags({"--help=true"}, &f2, &errors));
  EXPECT_TRUE(f2.help);
}

TEST(ParseFlagsTest, SwitchWithValueIsAnError) {
  Flags flags;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseFlags({"--check-config=yes"}, &flags, &errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].key, "--check-config");
  EXPECT_FALSE(flags.check_config);
}

TEST(ParseFlagsTest, UnknownFlag) {
  Flags flags;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseFlags({"--no.such=1", "--log.level=warn"}, &flags, &errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].key, "--no.such");
  EXPECT_NE(errors[0].message.find("unknown flag"), std::string::npos);
  // The rest is still parsed.
  EXPECT_EQ(flags.log_level, "warn");
}

TEST(ParseFlagsTest, PositionalArgument) {
  Flags flags;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseFlags({"config.toml"}, &flags, &errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].key, "config.toml");
}

TEST(ParseFlagsTest, MissingValue) {
  Flags flags;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseFlags({"--log.level=info", "--config.file"}, &flags, &errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].key, "--config.file");
  EXPECT_NE(errors[0].message.find("needs a value"), std::string::npos);
  EXPECT_FALSE(flags.config_file.has_value());
}

TEST(ParseFlagsTest, BadPollInterval) {
  Flags flags;
  std::vector<ConfigError> errors;
  EXPECT_FALSE(ParseFlags({"--poll.interval=5"}, &flags, &errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].key, "--poll.interval");
  EXPECT_EQ(errors[0].line, 0);
  EXPECT_NE(errors[0].message.find("missing unit"), std::string::npos);
  EXPECT_FALSE(flags.poll_interval.has_value());
}

TEST(ParseFlagsTest, UsageListsEveryFlag) {
  const std::string usage = FlagsUsage();
  for (const char* flag : {"--config.file", "--web.listen-address", "--web.telemetry-path",
                           "--postgres.dsn", "--poll.interval", "--log.level", "--log.format",
                           "--check-config", "--check-targets", "--version", "--help"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

// A reload that only moves lines (a comment added above a target) must not look like a changed
// target: that would restart its poller and lose what it judges between polls.
TEST(ConfigTest, WhereAnEntryWasWrittenIsNotPartOfItsIdentity) {
  const std::string body =
      "[[targets]]\nname = \"main\"\ndsn = \"host=x\"\n"
      "  [[targets.locks]]\n  name = \"sweep\"\n  key = 42\n"
      "  [[targets.leases]]\n  table = \"leases\"\n"
      "  [[targets.poolers]]\n  name = \"pgb\"\n  admin_dsn = \"host=y\"\n";
  Config before, after;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText(body, kFile, &before, &errors)) << Dump(errors);
  ASSERT_TRUE(ParseConfigText("# a comment\n\n" + body, kFile, &after, &errors)) << Dump(errors);
  ASSERT_EQ(after.targets.size(), 1u);
  EXPECT_NE(after.targets[0].origin.lines, before.targets[0].origin.lines);
  EXPECT_NE(after.targets[0].locks[0].origin.lines, before.targets[0].locks[0].origin.lines);
  EXPECT_TRUE(after.targets[0] == before.targets[0]);
  // The new lines are still the ones messages name.
  EXPECT_NE(after.targets[0].locks[0].Problem("key", "x").find(":8:"), std::string::npos)
      << after.targets[0].locks[0].Problem("key", "x");
}

}  // namespace
}  // namespace pglock
