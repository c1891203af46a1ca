#include "exporter/config/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <toml.hpp>

#include "exporter/config/holder_matcher.h"
#include "exporter/pg/conninfo.h"
#include "exporter/util/utf8.h"

namespace pglock {
namespace {

constexpr int kMaxTopN = 10'000;

// Walks one TOML table, remembering which keys were read so the rest can be reported as unknown.
// All errors go to the shared list with the file, line and dotted key.
class TableReader {
 public:
  TableReader(const toml::value& table, std::string prefix, const std::string& file,
              std::vector<ConfigError>* errors)
      : table_(table), prefix_(std::move(prefix)), file_(file), errors_(errors) {}

  ~TableReader() = default;
  TableReader(const TableReader&) = delete;
  TableReader& operator=(const TableReader&) = delete;

  bool Has(const std::string& key) const { return table_.as_table().count(key) != 0; }

  const toml::value* Get(const std::string& key) {
    seen_.insert(key);
    const auto& t = table_.as_table();
    const auto it = t.find(key);
    return it == t.end() ? nullptr : &it->second;
  }

  void String(const std::string& key, std::string* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) {
      Error(*v, key, "must be a string");
      return;
    }
    *out = v->as_string().str;
  }

  void Integer(const std::string& key, int64_t min, int64_t max, int64_t* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_integer()) {
      Error(*v, key, "must be an integer");
      return;
    }
    const int64_t n = v->as_integer();
    if (n < min || n > max) {
      Error(*v, key,
            "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                std::to_string(n));
      return;
    }
    *out = n;
  }

  void Bool(const std::string& key, bool* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) {
      Error(*v, key, "must be true or false");
      return;
    }
    *out = v->as_boolean();
  }

  void Int(const std::string& key, int min, int max, int* out) {
    int64_t n = *out;
    Integer(key, min, max, &n);
    *out = static_cast<int>(n);
  }

  // Returns true when the key was present (valid or not: an invalid one is recorded as an error).
  bool DurationValue(const std::string& key, Duration* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return false;
    if (!v->is_string()) {
      Error(*v, key, "must be a duration string such as \"5s\"");
      return true;
    }
    std::string why;
    const auto d = ParseDuration(v->as_string().str, &why);
    if (!d) {
      Error(*v, key, why);
      return true;
    }
    *out = *d;
    return true;
  }

  void StringArray(const std::string& key, std::vector<std::string>* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_array()) {
      Error(*v, key, "must be an array of strings");
      return;
    }
    for (const auto& item : v->as_array()) {
      if (!item.is_string()) {
        Error(item, key, "must be an array of strings");
        return;
      }
      out->push_back(item.as_string().str);
    }
  }

  // Array of tables ([[x]]); returns the element values, or empty after an error.
  std::vector<const toml::value*> Tables(const std::string& key) {
    std::vector<const toml::value*> out;
    const toml::value* v = Get(key);
    if (v == nullptr) return out;
    if (!v->is_array()) {
      Error(*v, key, "must be an array of tables ([[" + Dotted(key) + "]])");
      return out;
    }
    for (const auto& item : v->as_array()) {
      if (!item.is_table()) {
        Error(item, key, "must be an array of tables ([[" + Dotted(key) + "]])");
        return {};
      }
      out.push_back(&item);
    }
    return out;
  }

  // A sub-table ([x]); nullptr when absent or after an error.
  const toml::value* Table(const std::string& key) {
    const toml::value* v = Get(key);
    if (v == nullptr) return nullptr;
    if (!v->is_table()) {
      Error(*v, key, "must be a table ([" + Dotted(key) + "])");
      return nullptr;
    }
    return v;
  }

  // Reports every key of this table that no accessor asked for.
  void RejectUnknown() {
    for (const auto& [key, value] : table_.as_table()) {
      if (seen_.count(key) == 0) Error(value, key, "unknown key");
    }
  }

  void Error(const toml::value& at, const std::string& key, const std::string& message) {
    errors_->push_back({file_, static_cast<int>(at.location().line()), Dotted(key), message});
  }

  // An error about `key` found by a check on the table (a conflict between keys, a duplicate):
  // at the key's line, or at the table's line when the key is absent (a missing key).
  void TableError(const std::string& key, const std::string& message) {
    const int line = LineOf(key);
    errors_->push_back({file_, line > 0 ? line : Line(), Dotted(key), message});
  }

  std::string Dotted(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }

  int Line() const { return static_cast<int>(table_.location().line()); }

  // The line of `key`'s value, 0 when absent.
  int LineOf(const std::string& key) const {
    const auto& t = table_.as_table();
    const auto it = t.find(key);
    return it == t.end() ? 0 : static_cast<int>(it->second.location().line());
  }

 private:
  const toml::value& table_;
  const std::string prefix_;
  const std::string& file_;
  std::vector<ConfigError>* errors_;
  std::set<std::string> seen_;
};

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

bool IsBcryptHash(const std::string& h) {
  return h.size() == 60 &&
         (h.rfind("$2a$", 0) == 0 || h.rfind("$2b$", 0) == 0 || h.rfind("$2y$", 0) == 0);
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

bool WorldReadable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0;
}

// A non-empty SQL expression at `key`, or an error.
void SqlExpression(TableReader& r, const std::string& key, std::string* out) {
  r.String(key, out);
  if (r.Has(key) && out->empty()) r.TableError(key, "must be a non-empty SQL expression");
}

// Records the line of every key of the table, and the table's own line under "".
std::map<std::string, int> KeyLinesOf(const toml::value& table) {
  std::map<std::string, int> lines{{"", static_cast<int>(table.location().line())}};
  for (const auto& [key, value] : table.as_table()) {
    lines[key] = static_cast<int>(value.location().line());
  }
  return lines;
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
  if (const toml::value* t = r.Table("server_log")) {
    TableReader lr(*t, r.Dotted("server_log"), file, errors);
    target->server_log.origin.file = file;
    target->server_log.origin.lines = KeyLinesOf(*t);
    ParseServerLog(lr, &target->server_log);
  }
  r.RejectUnknown();
}

bool ValidListenAddress(const std::string& addr) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 >= addr.size()) return false;
  const std::string port = addr.substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  return port.size() <= 5 && std::stoi(port) <= 65535;
}

// Dotted key -> line in the file, for the checks that run after flags are applied.
using KeyLines = std::map<std::string, int>;

// Parses the document into *config; errors accumulate. Defaults stay for absent keys.
// The [web] table (two of its keys feed PollConfig: the on-call view's data is the pollers').
void ParseWeb(const toml::value& web, const std::string& file, Config* config,
              std::vector<ConfigError>* errors, KeyLines* lines) {
  TableReader r(web, "web", file, errors);
  r.String("listen_address", &config->web.listen_address);
  r.String("telemetry_path", &config->web.telemetry_path);
  for (const char* k : {"listen_address", "telemetry_path"}) (*lines)[r.Dotted(k)] = r.LineOf(k);
  r.String("tls_cert_file", &config->web.tls_cert_file);
  r.String("tls_key_file", &config->web.tls_key_file);
  r.Int("max_connections", 1, 1024, &config->web.max_connections);
  r.DurationValue("request_timeout", &config->web.request_timeout);
  // The on-call view's data is gathered by the pollers, so these two live in PollConfig.
  r.Int("event_log_size", 0, 1'000'000, &config->poll.event_log_size);
  r.Bool("show_query_text", &config->poll.query_text);
  if (const toml::value* users = r.Table("basic_auth_users")) {
    TableReader ur(*users, "web.basic_auth_users", file, errors);
    for (const auto& [user, hash] : users->as_table()) {
      ur.Get(user);
      if (!hash.is_string() || !IsBcryptHash(hash.as_string().str)) {
        ur.Error(hash, user, "must be a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters)");
        continue;
      }
      config->web.basic_auth_users[user] = hash.as_string().str;
    }
  }
  if (config->web.tls_cert_file.empty() != config->web.tls_key_file.empty()) {
    r.TableError("tls_cert_file", "set both tls_cert_file and tls_key_file, or neither");
  }
  for (const std::string* f : {&config->web.tls_cert_file, &config->web.tls_key_file}) {
    if (!f->empty() && access(f->c_str(), R_OK) != 0) {
      r.TableError(f == &config->web.tls_cert_file ? "tls_cert_file" : "tls_key_file",
                   "cannot read " + *f);
    }
  }
  r.RejectUnknown();
}

void ParseDocument(const toml::value& doc, const std::string& file, Config* config,
                   std::vector<ConfigError>* errors, bool* timeout_set, KeyLines* lines) {
  TableReader root(doc, "", file, errors);
  if (const toml::value* web = root.Table("web")) ParseWeb(*web, file, config, errors, lines);
  if (const toml::value* poll = root.Table("poll")) {
    TableReader r(*poll, "poll", file, errors);
    r.DurationValue("interval", &config->poll.interval);
    *timeout_set = r.DurationValue("timeout", &config->poll.timeout);
    r.DurationValue("inventory_interval", &config->poll.inventory_interval);
    r.Int("top_n", 1, kMaxTopN, &config->poll.top_n);
    r.Int("max_leases", 1, 1'000'000, &config->poll.max_leases);
    for (const char* k : {"interval", "timeout", "inventory_interval"}) {
      (*lines)[r.Dotted(k)] = r.LineOf(k);
    }
    r.RejectUnknown();
  }
  if (const toml::value* events = root.Table("events")) {
    TableReader r(*events, "events", file, errors);
    r.DurationValue("takeover_window", &config->poll.takeover_window);
    (*lines)[r.Dotted("takeover_window")] = r.LineOf("takeover_window");
    r.RejectUnknown();
  }
  if (const toml::value* log = root.Table("log")) {
    TableReader r(*log, "log", file, errors);
    r.String("level", &config->log.level);
    r.String("format", &config->log.format);
    for (const char* k : {"level", "format"}) (*lines)[r.Dotted(k)] = r.LineOf(k);
    r.RejectUnknown();
  }
  std::set<std::string> names;
  for (const toml::value* t : root.Tables("targets")) {
    TableReader r(*t, "targets", file, errors);
    TargetConfig target;
    target.origin.file = file;
    target.origin.lines = KeyLinesOf(*t);
    ParseTarget(r, file, errors, &target, &config->world_readable_secret);
    if (!target.name.empty() && !names.insert(target.name).second) {
      r.TableError("name", "duplicate target name \"" + target.name + "\"");
    }
    config->targets.push_back(std::move(target));
  }
  root.RejectUnknown();
}

// `lines` holds the file's line of each key whose value still comes from the file (0 or absent
// when a flag or the default set it).
void ValidateMerged(Config* config, bool timeout_set, const KeyLines& lines,
                    std::vector<ConfigError>* errors) {
  const std::string& f = config->file;
  auto err = [&](const std::string& key, const std::string& msg) {
    const auto it = lines.find(key);
    errors->push_back({f, it == lines.end() ? 0 : it->second, key, msg});
  };
  if (!ValidListenAddress(config->web.listen_address)) {
    err("web.listen_address", "\"" + config->web.listen_address + "\" is not HOST:PORT or :PORT");
  }
  if (config->web.telemetry_path.empty() || config->web.telemetry_path[0] != '/' ||
      config->web.telemetry_path == "/" || config->web.telemetry_path.rfind("/-/", 0) == 0) {
    err("web.telemetry_path",
        "\"" + config->web.telemetry_path + "\" must start with / and must not be / or under /-/");
  }
  if (config->poll.interval < Duration(100)) err("poll.interval", "must be at least 100ms");
  if (!timeout_set) config->poll.timeout = std::min(config->poll.timeout, config->poll.interval);
  if (config->poll.timeout < Duration(50)) err("poll.timeout", "must be at least 50ms");
  if (config->poll.timeout > config->poll.interval) {
    err("poll.timeout", "(" + FormatDuration(config->poll.timeout) +
                            ") must not exceed poll.interval (" +
                            FormatDuration(config->poll.interval) + ")");
  }
  if (config->poll.takeover_window <= Duration(0)) {
    err("events.takeover_window", "must be greater than 0s");
  }
  if (config->poll.inventory_interval != Duration(0) &&
      config->poll.inventory_interval < config->poll.interval) {
    err("poll.inventory_interval", "must be 0s (every poll) or at least poll.interval");
  }
  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error", "off"};
  if (kLevels.count(config->log.level) == 0) {
    err("log.level",
        "\"" + config->log.level + "\" is not one of trace, debug, info, warn, error, off");
  }
  if (config->log.format != "text" && config->log.format != "json") {
    err("log.format", "\"" + config->log.format + "\" is not text or json");
  }
}

void ParseText(const std::string& text, const std::string& file, Config* config,
               std::vector<ConfigError>* errors, bool* timeout_set, KeyLines* lines) {
  // TOML is UTF-8 by definition, and toml11 3.7 reads past its buffer on some invalid sequences
  // (found by tests/fuzz/config_fuzz): refuse them before parsing.
  if (const size_t bad = FirstInvalidUtf8(text); bad != std::string::npos) {
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + bad, '\n'));
    errors->push_back({file, line, "", "not valid UTF-8 (byte " + std::to_string(bad) + ")"});
    return;
  }
  try {
    std::istringstream in(text);
    const toml::value doc = toml::parse(in, file);
    ParseDocument(doc, file, config, errors, timeout_set, lines);
  } catch (const toml::exception& e) {
    std::string msg = e.what();
    // toml11 formats a multi-line message with the source excerpt; keep its first line.
    const auto nl = msg.find('\n');
    if (nl != std::string::npos) msg.resize(nl);
    const std::string prefix = "[error] ";
    if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    errors->push_back({file, static_cast<int>(e.location().line()), "", "TOML syntax: " + msg});
  } catch (const std::exception& e) {
    errors->push_back({file, 0, "", std::string("cannot parse: ") + e.what()});
  }
}

// The flags that override the config file. A value set by a flag has no line in the file.
void ApplyFlags(const Flags& flags, Config* config, KeyLines* lines) {
  if (flags.listen_address) {
    config->web.listen_address = *flags.listen_address;
    lines->erase("web.listen_address");
  }
  if (flags.telemetry_path) {
    config->web.telemetry_path = *flags.telemetry_path;
    lines->erase("web.telemetry_path");
  }
  if (flags.poll_interval) {
    config->poll.interval = *flags.poll_interval;
    lines->erase("poll.interval");
  }
  if (flags.log_level) {
    config->log.level = *flags.log_level;
    lines->erase("log.level");
  }
  if (flags.log_format) {
    config->log.format = *flags.log_format;
    lines->erase("log.format");
  }
}

// Without [[targets]], one target "default" with --postgres.dsn, else $PGLOCK_EXPORTER_DSN, else
// libpq's defaults; --postgres.dsn overrides the DSN of a single configured target.
void ApplyDsn(const Flags& flags, const std::optional<std::string>& env_dsn, Config* config,
              std::vector<ConfigError>* errors) {
  if (config->targets.empty()) {
    TargetConfig target;
    target.name = "default";
    if (flags.dsn) {
      target.dsn = *flags.dsn;
    } else if (env_dsn) {
      target.dsn = *env_dsn;
    }
    std::string why;
    if (!target.dsn.empty() && !ValidateConninfo(target.dsn, &why)) {
      errors->push_back({"", 0, flags.dsn ? "--postgres.dsn" : "PGLOCK_EXPORTER_DSN", why});
    }
    config->targets.push_back(std::move(target));
  } else if (flags.dsn) {
    if (config->targets.size() > 1) {
      errors->push_back({config->file, 0, "--postgres.dsn",
                         "cannot override the DSN of a config with several targets"});
    } else {
      config->targets[0].dsn = *flags.dsn;
    }
  }
}

}  // namespace

bool ParseConfigText(const std::string& text, const std::string& file, Config* config,
                     std::vector<ConfigError>* errors) {
  const size_t before = errors->size();
  bool timeout_set = false;
  KeyLines lines;
  config->file = file;
  ParseText(text, file, config, errors, &timeout_set, &lines);
  ValidateMerged(config, timeout_set, lines, errors);
  return errors->size() == before;
}

bool LoadConfig(const Flags& flags, const std::optional<std::string>& env_dsn, Config* config,
                std::vector<ConfigError>* errors) {
  *config = Config{};
  const size_t before = errors->size();
  bool timeout_set = false;
  KeyLines lines;
  if (flags.config_file) {
    config->file = *flags.config_file;
    std::ifstream in(*flags.config_file, std::ios::binary);
    if (!in) {
      errors->push_back({*flags.config_file, 0, "", "cannot open the config file"});
      return false;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    ParseText(ss.str(), *flags.config_file, config, errors, &timeout_set, &lines);
    if (config->world_readable_secret && !WorldReadable(*flags.config_file)) {
      config->world_readable_secret = false;
    }
  }
  ApplyFlags(flags, config, &lines);
  ApplyDsn(flags, env_dsn, config, errors);
  ValidateMerged(config, timeout_set, lines, errors);
  return errors->size() == before;
}

namespace {

std::string ProblemAt(const std::string& file, const std::map<std::string, int>& lines,
                      const std::string& prefix, const std::string& key,
                      const std::string& message) {
  auto it = lines.find(key);
  if (it == lines.end()) it = lines.find("");
  return ConfigError{file, it == lines.end() ? 0 : it->second, prefix + key, message}.ToString();
}

}  // namespace

std::string LockNameConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.locks.", key, message);
}

std::string TargetConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.", key, message);
}

std::string ServerLogConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.server_log.", key, message);
}

std::string PoolerConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.poolers.", key, message);
}

std::string LeaseTableConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.leases.", key, message);
}

std::string ConfigError::ToString() const {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (line > 0) out += ":" + std::to_string(line);
    out += ": ";
  }
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

}  // namespace pglock
