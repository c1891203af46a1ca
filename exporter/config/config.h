// The validated configuration of pglock_exporter: TOML file (toml11) merged with command-line
// flags. Loading never throws and never exits: every problem becomes a ConfigError naming the file,
// line and key, so --check-config can print them all. Plain data; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exporter/util/duration.h"

namespace pglock {

// One problem with the configuration. line is 0 when not tied to a line (flags, environment).
struct ConfigError {
  std::string file;
  int line = 0;
  std::string key;
  std::string message;

  // "file:line: key: message", or without the parts that are empty.
  std::string ToString() const;
};

// Where a config entry was written: the file and the line of each key, for messages that name
// them. Not part of the entry's identity (operator== ignores it), so a reload that only moved
// lines (a comment added above) keeps the running poller and its judgement state.
struct ConfigOrigin {
  std::string file;
  std::map<std::string, int> lines;  // key -> line in `file`

  bool operator==(const ConfigOrigin&) const { return true; }
};

// A human name for an advisory lock key, resolved by the server's own hash functions or by the
// operator's SQL expressions.
struct LockNameConfig {
  enum class Kind { kBigint, kBigintText, kPair, kPairText, kBigintSql, kPairSql };
  std::string name;
  Kind kind = Kind::kBigint;
  int64_t key = 0;        // kBigint
  std::string key_text;   // kBigintText: key = hashtextextended(key_text, 0)
  int32_t key1 = 0;       // kPair, kPairText
  int32_t key2 = 0;       // kPair
  std::string key2_text;  // kPairText: key2 = hashtext(key2_text)
  std::string key_sql;    // kBigintSql: key = (key_sql)::bigint, evaluated by the server
  std::string key1_sql;   // kPairSql: key1 = (key1_sql)::int4, key2 = (key2_sql)::int4
  std::string key2_sql;
  // Where the lock was configured, so a run-time failure of an expression names its key.
  ConfigOrigin origin = {};

  // "file:line: targets.locks.<key>: message".
  std::string Problem(const std::string& key, const std::string& message) const;

  bool operator==(const LockNameConfig&) const = default;
};

// One field of a lock table: a column, or an SQL expression over the row (`t`), or neither (the
// table has no such field).
struct LeaseField {
  std::string column;
  std::string sql;

  bool present() const { return !column.empty() || !sql.empty(); }
  bool operator==(const LeaseField&) const = default;
};

// A lock table ([[targets.leases]]): a classic lease table (the four columns name, holder,
// taken_at, expires_at by default) or, once it sets `held_sql`, `ttl` or `row_lock`, a table with
// only the fields it names. Every table has an expiry (expires_at, or taken_at + ttl), `held_sql`
// or `row_lock` (or both of the last two: a row is held when either says so).
struct LeaseTableConfig {
  std::string table;  // as configured, "schema.table" or "table"
  // Another database of the target's server, read through a connection of its own; empty: the
  // database of the target's DSN.
  std::string database;
  std::string schema;  // empty: resolved through search_path
  std::string relation;
  LeaseField name{"name", ""};
  LeaseField holder{"holder", ""};
  LeaseField taken_at{"taken_at", ""};
  LeaseField expires_at{"expires_at", ""};
  Duration ttl = Duration(0);       // > 0: the expiry is taken_at + ttl
  std::string held_sql;             // tables without an expiry: which rows are held
  std::string where_sql;            // which rows are locks at all; empty: every row
  Duration max_hold = Duration(0);  // > 0: exported as pglock_lease_max_hold_seconds
  std::string holder_pattern;       // POSIX extended regex; empty keeps the holder text whole
  std::vector<std::string> holder_labels;
  // Read on a standby too: its replicated rows would page once per node, so off by default.
  bool read_on_standby = false;
  // A row is also held while a transaction that is still open has locked or changed it (its
  // xmax is the transaction id of a live session): a row used as a mutex, a job claimed FOR
  // UPDATE, a flag set inside a migration's own transaction.
  bool row_lock = false;
  // A table of work (a job queue): its names are ids of work, seen once. Exported per table
  // (pglock_queue_*), never per row (docs/lease-tables.md). Unset: detected from its names
  // (LeaseTransitions, kQueueDetectNames).
  std::optional<bool> queue;

  // Where the table was configured, so the run-time type check names the file, line and key.
  ConfigOrigin origin = {};

  bool has_expiry() const { return expires_at.present() || ttl > Duration(0); }
  // The `table` label: `table`, or "database/table" for a table in another database, so the
  // same table name in two databases stays two series.
  std::string label() const { return database.empty() ? table : database + "/" + table; }
  // "file:line: targets.leases.<key>: message" (the table's own line when the key is not set).
  std::string Problem(const std::string& key, const std::string& message) const;

  bool operator==(const LeaseTableConfig&) const = default;
};

struct PoolerConfig {
  std::string name;
  std::string admin_dsn;
  // Where the pooler was configured, for --check-targets' problems.
  ConfigOrigin origin = {};

  // "file:line: targets.poolers.<key>: message".
  std::string Problem(const std::string& key, const std::string& message) const;

  bool operator==(const PoolerConfig&) const = default;
};

// [targets.server_log]: the server's own log, read for exact session ends, lock waits, lock
// timeouts and deadlocks (README "The server's log"). Absent (path empty, via file): none read.
struct ServerLogConfig {
  enum class Via { kFile, kSql };
  std::string path;  // a file, or a directory whose newest file of `format` is followed
  std::string format = "jsonlog";  // "jsonlog" (PostgreSQL 15+) or "csvlog"
  Via via = Via::kFile;            // kSql: pg_ls_logdir() + pg_read_binary_file() on the target
  Duration read_interval = Duration(1'000);  // how often the log is read
  int64_t max_record_bytes = 1 << 20;        // a longer record is skipped and counted
  ConfigOrigin origin = {};

  bool configured() const { return via == Via::kSql || !path.empty(); }
  std::string Problem(const std::string& key, const std::string& message) const;
  bool operator==(const ServerLogConfig&) const = default;
};

inline constexpr size_t kMaxPreflightTables = 50;

struct TargetConfig {
  std::string name;
  std::string dsn;  // libpq conninfo or URI; empty means libpq defaults (PGHOST, ...)
  std::vector<LockNameConfig> locks;
  std::vector<LeaseTableConfig> leases;
  std::vector<PoolerConfig> poolers;
  ServerLogConfig server_log = {};
  // Tables whose DDL lock is watched at each inventory poll (docs/preflight.md): as written,
  // "schema.table" or "table"; each a valid table name, at most kMaxPreflightTables.
  std::vector<std::string> preflight_tables = {};
  // Where the target was configured (empty without a config file), for --check-targets.
  ConfigOrigin origin = {};

  // "file:line: targets.<key>: message" (without a file: "targets.<key>: message").
  std::string Problem(const std::string& key, const std::string& message) const;

  bool operator==(const TargetConfig&) const = default;
};

struct WebConfig {
  std::string listen_address = ":9716";
  std::string telemetry_path = "/metrics";
  std::string tls_cert_file;
  std::string tls_key_file;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash
  int max_connections = 16;                             // CivetWeb worker threads
  Duration request_timeout = Duration(10'000);

  bool operator==(const WebConfig&) const = default;
};

struct PollConfig {
  Duration interval = Duration(5'000);
  Duration timeout = Duration(3'000);
  // How often the full pg_locks inventory (holders, losses, takeovers) is read; 0 = every poll.
  Duration inventory_interval = Duration(0);
  int top_n = 20;
  int max_leases = 1000;
  // [events] takeover_window: how long a lost advisory key is remembered; another session taking
  // it within that time is a takeover.
  Duration takeover_window = Duration(3'600'000);
  // From [web] (the pollers gather what the on-call view shows): event_log_size, the events kept
  // per target for /locks and /api/v1/events; show_query_text, whether sessions' query texts are
  // read at all.
  int event_log_size = 1000;
  bool query_text = false;
  // [storage] path (--storage.path): the directory where each target's state is kept across
  // restarts (exporter/storage/); "" keeps nothing.
  std::string storage_path;

  bool operator==(const PollConfig&) const = default;
};

struct LogConfig {
  std::string level = "info";
  std::string format = "text";

  bool operator==(const LogConfig&) const = default;
};

// [shard] (--shard.ordinal, --shard.total): this exporter polls and serves only the targets
// whose ShardOf(name, total) is its ordinal (exporter/config/shard.h); the default, 0 of 1, polls
// every target.
struct ShardConfig {
  int ordinal = 0;
  int total = 1;
  bool ordinal_auto = false;  // "auto": the ordinal came from the host name
  std::string host_name;      // the host name "auto" read ("" otherwise)

  bool operator==(const ShardConfig&) const = default;
};

struct Config {
  std::string file;  // empty when running without a config file
  WebConfig web;
  PollConfig poll;
  LogConfig log;
  ShardConfig shard;
  std::vector<TargetConfig> targets;
  // True when a secret (a password in a DSN) sits in a file others can read.
  bool world_readable_secret = false;
};

// Command-line flags; unset optionals leave the file's (or the default) value.
struct Flags {
  std::optional<std::string> config_file;
  std::optional<std::string> listen_address;
  std::optional<std::string> telemetry_path;
  std::optional<std::string> dsn;
  std::optional<Duration> poll_interval;
  std::optional<std::string> log_level;
  std::optional<std::string> log_format;
  std::optional<std::string> storage_path;
  std::optional<std::string> shard_ordinal;  // a number or "auto"
  std::optional<int> shard_total;
  bool check_config = false;
  bool check_targets = false;
  bool version = false;
  bool help = false;
};

// Parses argv (both "--flag=value" and "--flag value"). Errors name the flag.
bool ParseFlags(const std::vector<std::string>& args, Flags* flags,
                std::vector<ConfigError>* errors);

std::string FlagsUsage();

// Loads flags.config_file if set, applies the flags on top, validates. env_dsn is the value of
// PGLOCK_EXPORTER_DSN (nullopt when unset). Returns false and fills *errors (all of them) on any
// problem; *config is then unspecified.
bool LoadConfig(const Flags& flags, const std::optional<std::string>& env_dsn, Config* config,
                std::vector<ConfigError>* errors);

// Parses TOML text as if read from `file` (for tests and fuzzing). Flags are not applied.
bool ParseConfigText(const std::string& text, const std::string& file, Config* config,
                     std::vector<ConfigError>* errors);

}  // namespace pglock
