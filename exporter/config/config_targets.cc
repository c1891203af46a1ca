// The [[targets]] tables of a config file: a target's dsn or dsn_file, its [[targets.locks]],
// [[targets.leases]], [[targets.poolers]] and [targets.server_log], each checked on its own and
// against its siblings (duplicate names, conflicting keys), every problem with its file and line.
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>

#include "exporter/config/config_internal.h"
#include "exporter/config/holder_matcher.h"
#include "exporter/pg/conninfo.h"
#include "exporter/util/table_name.h"

namespace pglock {
namespace {

bool IsValidLabelName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  if (name.rfind("__", 0) == 0) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool ReadSecretFile(const std::string& path, std::string* out, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = "cannot read " + path;
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  *out = std::move(s);
  return true;
}

// A non-empty SQL expression at `key`, or an error.
void SqlExpression(TableReader& r, const std::string& key, std::string* out) {
  r.String(key, out);
  if (r.Has(key) && out->empty()) r.TableError(key, "must be a non-empty SQL expression");
}

// The key1_sql/key2_sql form of a lock (`has_key1_sql`); without it, key2_sql is an error.
void ParseLockSqlPair(TableReader& r, bool has_key1_sql, LockNameConfig* lock) {
  if (has_key1_sql) {
    lock->kind = LockNameConfig::Kind::kPairSql;
    SqlExpression(r, "key1_sql", &lock->key1_sql);
    if (!r.Has("key2_sql")) {
      r.TableError("key2_sql", "lock \"" + lock->name + "\" with key1_sql needs key2_sql");
    }
    SqlExpression(r, "key2_sql", &lock->key2_sql);
  } else if (r.Has("key2_sql")) {
    r.Get("key2_sql");
    r.TableError("key2_sql", "key2_sql needs key1_sql");
  }
}

// The key1 with key2/key2_text form of a lock (`has_key1`); without it, key2 and key2_text are
// errors.
void ParseLockPair(TableReader& r, bool has_key1, LockNameConfig* lock) {
  if (!has_key1) {
    for (const char* k : {"key2", "key2_text"}) {
      if (r.Has(k)) {
        r.Get(k);
        r.TableError(k, std::string(k) + " needs key1");
      }
    }
    return;
  }
  int64_t k1 = 0;
  r.Integer("key1", INT32_MIN, INT32_MAX, &k1);
  lock->key1 = static_cast<int32_t>(k1);
  const bool has_key2 = r.Has("key2"), has_key2_text = r.Has("key2_text");
  if (int{has_key2} + int{has_key2_text} != 1) {
    r.TableError("key2",
                 "lock \"" + lock->name + "\" with key1 needs exactly one of key2 or key2_text");
  }
  if (has_key2) {
    int64_t k2 = 0;
    r.Integer("key2", INT32_MIN, INT32_MAX, &k2);
    lock->key2 = static_cast<int32_t>(k2);
    lock->kind = LockNameConfig::Kind::kPair;
  } else {
    r.String("key2_text", &lock->key2_text);
    lock->kind = LockNameConfig::Kind::kPairText;
  }
}

void ParseLock(TableReader& r, LockNameConfig* lock) {
  r.String("name", &lock->name);
  if (lock->name.empty()) r.TableError("name", "every [[targets.locks]] needs a non-empty name");
  const bool has_key = r.Has("key"), has_text = r.Has("key_text"), has_key1 = r.Has("key1"),
             has_sql = r.Has("key_sql"), has_key1_sql = r.Has("key1_sql");
  const int forms = int{has_key} + int{has_text} + int{has_key1} + int{has_sql} + int{has_key1_sql};
  if (forms != 1) {
    r.TableError("key", "lock \"" + lock->name +
                            "\" needs exactly one of key, key_text, key_sql, key1 with "
                            "key2/key2_text, or key1_sql with key2_sql");
  }
  if (has_key) {
    lock->kind = LockNameConfig::Kind::kBigint;
    r.Integer("key", INT64_MIN, INT64_MAX, &lock->key);
  }
  if (has_text) {
    lock->kind = LockNameConfig::Kind::kBigintText;
    r.String("key_text", &lock->key_text);
  }
  if (has_sql) {
    lock->kind = LockNameConfig::Kind::kBigintSql;
    SqlExpression(r, "key_sql", &lock->key_sql);
  }
  ParseLockSqlPair(r, has_key1_sql, lock);
  ParseLockPair(r, has_key1, lock);
  r.RejectUnknown();
}

// One field of a lock table: `<field>_column` or `<field>_sql`. A general table (`general`) has
// only the fields it names; a classic one keeps the default column of the others.
void ParseLeaseField(TableReader& r, const std::string& field, bool general, LeaseField* out) {
  const std::string column_key = field + "_column", sql_key = field + "_sql";
  const bool has_column = r.Has(column_key), has_sql = r.Has(sql_key);
  if (has_column && has_sql) {
    r.TableError(sql_key, "set either " + column_key + " or " + sql_key + ", not both");
  }
  if (has_column || has_sql || (general && field != "name")) *out = LeaseField{};
  r.String(column_key, &out->column);
  if (has_column && out->column.empty()) r.TableError(column_key, "must not be empty");
  SqlExpression(r, sql_key, &out->sql);
}

// ttl, held_sql, where_sql and max_hold, and how they combine with the fields.
void ParseLeaseRules(TableReader& r, LeaseTableConfig* lease) {
  SqlExpression(r, "held_sql", &lease->held_sql);
  SqlExpression(r, "where_sql", &lease->where_sql);
  if (r.DurationValue("ttl", &lease->ttl) && lease->ttl <= Duration(0)) {
    r.TableError("ttl", "must be greater than 0s");
  }
  if (r.DurationValue("max_hold", &lease->max_hold) && lease->max_hold <= Duration(0)) {
    r.TableError("max_hold", "must be greater than 0s");
  }
  const bool ttl = r.Has("ttl");
  const bool expires = r.Has("expires_at_column") || r.Has("expires_at_sql");
  if (ttl && expires) {
    r.TableError("ttl", "set either ttl or expires_at_column/expires_at_sql, not both");
  }
  if (ttl && !lease->taken_at.present()) {
    r.TableError("ttl", "ttl needs taken_at_column or taken_at_sql (the expiry is taken_at + ttl)");
  }
  if (r.Has("held_sql") && (ttl || expires)) {
    r.TableError("held_sql",
                 "held_sql is for tables without an expiry; with expires_at or ttl a row is held "
                 "while its expiry is in the future");
  }
  r.Bool("row_lock", &lease->row_lock);
  if (lease->row_lock && (ttl || expires)) {
    r.TableError("row_lock",
                 "row_lock is for tables without an expiry: a row is held while an open "
                 "transaction has locked or changed it (add held_sql for a flag column)");
  }
}

// table = "schema.table" or "table" -> schema and relation.
void SplitLeaseTable(TableReader& r, LeaseTableConfig* lease) {
  if (lease->table.empty()) {
    r.TableError("table", "every [[targets.leases]] needs a table (\"schema.table\" or \"table\")");
  } else {
    const auto dot = lease->table.find('.');
    if (dot == std::string::npos) {
      lease->relation = lease->table;
    } else {
      lease->schema = lease->table.substr(0, dot);
      lease->relation = lease->table.substr(dot + 1);
      if (lease->schema.empty() || lease->relation.empty() ||
          lease->relation.find('.') != std::string::npos) {
        r.TableError("table", "\"" + lease->table + "\" must be \"schema.table\" or \"table\"");
      }
    }
  }
}

// holder_pattern's capture groups match holder_labels, and each label is a usable, distinct name.
void CheckHolderLabels(TableReader& r, const LeaseTableConfig& lease) {
  if (!lease.holder_pattern.empty()) {
    size_t groups = 0;
    std::string why;
    if (!ValidateHolderPattern(lease.holder_pattern, &groups, &why)) {
      r.TableError("holder_pattern", "\"" + lease.holder_pattern + "\": " + why);
    } else if (lease.holder_labels.size() != groups) {
      r.TableError("holder_labels", "holder_pattern has " + std::to_string(groups) +
                                        " capture group(s) but holder_labels names " +
                                        std::to_string(lease.holder_labels.size()));
    }
  } else if (!lease.holder_labels.empty()) {
    r.TableError("holder_labels", "holder_labels needs holder_pattern");
  }
  std::set<std::string> names;
  for (const auto& label : lease.holder_labels) {
    if (!IsValidLabelName(label) || label == "target" || label == "table" || label == "lease") {
      r.TableError("holder_labels", "\"" + label +
                                        "\" is not a usable label name (letters, digits, _; not "
                                        "target, table or lease)");
    } else if (!names.insert(label).second) {
      r.TableError("holder_labels", "duplicate label \"" + label + "\"");
    }
  }
}

void ParseLease(TableReader& r, LeaseTableConfig* lease) {
  r.String("table", &lease->table);
  r.String("database", &lease->database);
  if (const toml::value* v = r.Get("database");
      v != nullptr && v->is_string() && lease->database.empty()) {
    r.TableError("database", "must be a database name (leave it out for the target's own)");
  }
  const toml::value* row_lock = r.Get("row_lock");
  const bool general = r.Has("held_sql") || r.Has("ttl") ||
                       (row_lock != nullptr && row_lock->is_boolean() && row_lock->as_boolean());
  ParseLeaseField(r, "name", general, &lease->name);
  ParseLeaseField(r, "holder", general, &lease->holder);
  ParseLeaseField(r, "taken_at", general, &lease->taken_at);
  ParseLeaseField(r, "expires_at", general, &lease->expires_at);
  ParseLeaseRules(r, lease);
  r.String("holder_pattern", &lease->holder_pattern);
  r.StringArray("holder_labels", &lease->holder_labels);
  r.Bool("read_on_standby", &lease->read_on_standby);
  if (r.Has("queue")) {
    bool queue = false;
    r.Bool("queue", &queue);
    lease->queue = queue;
  }
  SplitLeaseTable(r, lease);
  CheckHolderLabels(r, *lease);
  r.RejectUnknown();
}

void ParsePooler(TableReader& pr, PoolerConfig* pooler, bool* secret) {
  std::string admin_dsn_file;
  pr.String("name", &pooler->name);
  pr.String("admin_dsn", &pooler->admin_dsn);
  pr.String("admin_dsn_file", &admin_dsn_file);
  if (pooler->name.empty()) pr.TableError("name", "every [[targets.poolers]] needs a name");
  if (!admin_dsn_file.empty()) {
    std::string why;
    if (pr.Has("admin_dsn")) {
      pr.TableError("admin_dsn_file", "set either admin_dsn or admin_dsn_file, not both");
    } else if (!ReadSecretFile(admin_dsn_file, &pooler->admin_dsn, &why)) {
      pr.TableError("admin_dsn_file", why);
    }
  } else if (pooler->admin_dsn.empty()) {
    pr.TableError("admin_dsn", "pooler \"" + pooler->name + "\" needs admin_dsn");
  } else if (ConninfoHasPassword(pooler->admin_dsn)) {
    *secret = true;
  }
  if (!pooler->admin_dsn.empty()) {
    std::string why;
    if (!ValidateConninfo(pooler->admin_dsn, &why)) pr.TableError("admin_dsn", why);
  }
  pr.RejectUnknown();
}

void ParseServerLog(TableReader& r, ServerLogConfig* log) {
  r.String("path", &log->path);
  r.String("format", &log->format);
  std::string via = "file";
  r.String("via", &via);
  r.DurationValue("read_interval", &log->read_interval);
  r.Integer("max_record_bytes", 4096, int64_t{1} << 30, &log->max_record_bytes);
  if (log->format != "jsonlog" && log->format != "csvlog") {
    r.TableError("format",
                 "must be \"jsonlog\" or \"csvlog\" (the server's structured logs; "
                 "the plain stderr format is not read), got \"" +
                     log->format + "\"");
  }
  if (via == "sql") {
    log->via = ServerLogConfig::Via::kSql;
    if (r.Has("path")) {
      r.TableError("path",
                   "with via = \"sql\" the server's own log_directory is read: leave "
                   "path out");
    }
  } else if (via != "file") {
    r.TableError("via", "must be \"file\" or \"sql\", got \"" + via + "\"");
  } else if (log->path.empty()) {
    r.TableError("path",
                 "[targets.server_log] needs path (a log file or the log directory), "
                 "or via = \"sql\"");
  }
  if (log->read_interval < Duration(100) || log->read_interval > Duration(60'000)) {
    r.TableError("read_interval", "must be between 100ms and 1m");
  }
  r.RejectUnknown();
}

// dsn or dsn_file (read here), validated; *secret when its password may be readable by others.
void ParseTargetDsn(TableReader& r, TargetConfig* target, bool* secret) {
  std::string dsn_file;
  r.String("dsn", &target->dsn);
  r.String("dsn_file", &dsn_file);
  if (r.Has("dsn") && !dsn_file.empty()) {
    r.TableError("dsn_file", "set either dsn or dsn_file, not both");
  } else if (!dsn_file.empty()) {
    std::string why;
    if (!ReadSecretFile(dsn_file, &target->dsn, &why)) r.TableError("dsn_file", why);
    if (WorldReadable(dsn_file) && ConninfoHasPassword(target->dsn)) *secret = true;
  } else if (ConninfoHasPassword(target->dsn)) {
    *secret = true;
  }
  if (!target->dsn.empty()) {
    std::string why;
    if (!ValidateConninfo(target->dsn, &why)) {
      r.TableError(dsn_file.empty() ? "dsn" : "dsn_file", why);
    }
  }
}

}  // namespace

void ParseTarget(TableReader& r, const std::string& file, std::vector<ConfigError>* errors,
                 TargetConfig* target, bool* secret) {
  r.String("name", &target->name);
  if (target->name.empty()) r.TableError("name", "every [[targets]] needs a non-empty name");
  ParseTargetDsn(r, target, secret);
  std::set<std::string> lock_names;
  for (const toml::value* t : r.Tables("locks")) {
    TableReader lr(*t, r.Dotted("locks"), file, errors);
    LockNameConfig lock;
    lock.origin.file = file;
    lock.origin.lines = KeyLinesOf(*t);
    ParseLock(lr, &lock);
    if (!lock.name.empty() && !lock_names.insert(lock.name).second) {
      lr.TableError("name",
                    "duplicate lock name \"" + lock.name + "\" in target \"" + target->name + "\"");
    }
    target->locks.push_back(std::move(lock));
  }
  std::set<std::string> tables;
  for (const toml::value* t : r.Tables("leases")) {
    TableReader lr(*t, r.Dotted("leases"), file, errors);
    LeaseTableConfig lease;
    lease.origin.file = file;
    lease.origin.lines = KeyLinesOf(*t);
    ParseLease(lr, &lease);
    if (!lease.table.empty() && !tables.insert(lease.label()).second) {
      lr.TableError("table", "lease table \"" + lease.label() + "\" listed twice");
    }
    target->leases.push_back(std::move(lease));
  }
  std::set<std::string> poolers;
  for (const toml::value* t : r.Tables("poolers")) {
    TableReader pr(*t, r.Dotted("poolers"), file, errors);
    PoolerConfig pooler;
    pooler.origin.file = file;
    pooler.origin.lines = KeyLinesOf(*t);
    ParsePooler(pr, &pooler, secret);
    if (!pooler.name.empty() && !poolers.insert(pooler.name).second) {
      pr.TableError("name", "duplicate pooler name \"" + pooler.name + "\"");
    }
    target->poolers.push_back(std::move(pooler));
  }
  r.StringArray("preflight_tables", &target->preflight_tables);
  std::set<std::string> watched;
  for (const std::string& table : target->preflight_tables) {
    TableName parsed;
    std::string why;
    if (!ParseTableName(table, &parsed, &why)) {
      r.TableError("preflight_tables", "\"" + table + "\": " + why);
    } else if (!watched.insert(table).second) {
      r.TableError("preflight_tables", "\"" + table + "\" listed twice");
    }
  }
  if (target->preflight_tables.size() > kMaxPreflightTables) {
    r.TableError("preflight_tables",
                 "at most " + std::to_string(kMaxPreflightTables) + " tables per target");
  }
  if (const toml::value* t = r.Table("server_log")) {
    TableReader lr(*t, r.Dotted("server_log"), file, errors);
    target->server_log.origin.file = file;
    target->server_log.origin.lines = KeyLinesOf(*t);
    ParseServerLog(lr, &target->server_log);
  }
  r.RejectUnknown();
}

}  // namespace pglock
