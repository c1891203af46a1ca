#include "exporter/check_targets.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "exporter/collectors/lease_read.h"
#include "exporter/collectors/lease_sql.h"
#include "exporter/pg/batch.h"
#include "exporter/pg/columns.h"
#include "exporter/pg/conninfo.h"
#include "exporter/pg/session.h"
#include "exporter/poll/lock_names.h"
#include "exporter/queries.h"
#include "exporter/serverlog/log_source.h"
#include "exporter/serverlog/server_log.h"

namespace pglock {
namespace {

// The report: a heading per target, indented facts, and problems (counted), each on one line.
class Report {
 public:
  explicit Report(std::ostream& out) : out_(out) {}

  void Section(const std::string& text) { out_ << text << "\n"; }
  void Fact(const std::string& text) { out_ << "  " << text << "\n"; }
  // `where_and_what` is "file:line: key: message"; `fix` says what to do.
  void Problem(const std::string& where_and_what, const std::string& fix) {
    ++problems_;
    Line("PROBLEM", where_and_what, fix);
  }
  // A server setting that makes the exporter see less, without anything failing (the server's
  // log without log_lock_waits): said like a problem, not counted in the exit status.
  void Advice(const std::string& where_and_what, const std::string& fix) {
    ++advice_;
    Line("ADVICE", where_and_what, fix);
  }
  int problems() const { return problems_; }
  int advice() const { return advice_; }

 private:
  void Line(const char* kind, std::string where_and_what, const std::string& fix) {
    // One line each, whatever the server's message holds.
    std::replace(where_and_what.begin(), where_and_what.end(), '\n', ' ');
    out_ << "  " << kind << " " << where_and_what << " -> " << fix << "\n";
  }

  std::ostream& out_;
  int problems_ = 0;
  int advice_ = 0;
};

// One target's check: its config, the exporter's role on its server, the report.
struct TargetCheck {
  const TargetConfig* target = nullptr;
  const PollConfig* poll = nullptr;
  QueryTimeouts timeouts;
  std::string role;  // quoted as an identifier where needed, for the GRANTs to suggest
  Report* report = nullptr;

  // Each step (a connect, a statement) gets the poll's timeout, at least 5 s.
  SteadyClock::time_point Deadline() const {
    return SteadyClock::now() + std::max(poll->timeout, Duration(5000));
  }
};

// The key of the DSN as configured (dsn or dsn_file).
std::string DsnKey(const std::map<std::string, int>& lines, const std::string& base) {
  return lines.count(base + "_file") != 0 ? base + "_file" : base;
}

// --- Named locks ---------------------------------------------------------------------------

const char* Derivation(const LockNameConfig& lock) {
  switch (lock.kind) {
    case LockNameConfig::Kind::kBigint:
      return "key";
    case LockNameConfig::Kind::kPair:
      return "key1, key2";
    case LockNameConfig::Kind::kBigintText:
      return "hashtextextended(key_text, 0)";
    case LockNameConfig::Kind::kPairText:
      return "key1, hashtext(key2_text)";
    case LockNameConfig::Kind::kBigintSql:
      return "key_sql";
    case LockNameConfig::Kind::kPairSql:
      return "key1_sql, key2_sql";
  }
  return "";
}

constexpr char kNotHeld[] = "not held now";

// "not held now", or "held now by pid 12 (database "app", application_name "x")", ...
Status Holders(PgConnection& conn, const AdvisoryKey& key, SteadyClock::time_point deadline,
               std::string* out) {
  std::optional<PgResult> r;
  if (Status s = conn.ExecOne(
          queries::kCheckLockHolders,
          {std::to_string(key.classid), std::to_string(key.objid), std::to_string(key.objsubid)},
          deadline, &r);
      !s.ok()) {
    return s;
  }
  Columns c(*r, "check_lock_holders");
  const int pid = c["pid"], datname = c["datname"], app = c["application_name"];
  if (Status s = c.status(); !s.ok()) return s;
  *out = r->Rows() == 0 ? kNotHeld : "held now by ";
  for (int i = 0; i < r->Rows(); ++i) {
    *out +=
        (i > 0 ? ", " : "") +
        (r->IsNull(i, pid) ? std::string("a prepared transaction") : "pid " + r->String(i, pid)) +
        " (database \"" + r->String(i, datname) + "\", application_name \"" + r->String(i, app) +
        "\")";
  }
  return Status::Ok();
}

// For a lock not held now: the advisory keys of its form (one bigint, two int4) held right now,
// the most held first, with their holders' applications; "" when none.
Status SameFormKeys(PgConnection& conn, const AdvisoryKey& key, SteadyClock::time_point deadline,
                    std::string* out) {
  std::optional<PgResult> r;
  if (Status s =
          conn.ExecOne(queries::kCheckSameFormKeys, {std::to_string(key.objsubid)}, deadline, &r);
      !s.ok()) {
    return s;
  }
  Columns c(*r, "check_same_form_keys");
  const int classid = c["classid"], objid = c["objid"], holders = c["holders"],
            apps = c["applications"], total = c["total"];
  if (Status s = c.status(); !s.ok()) return s;
  out->clear();
  for (int i = 0; i < r->Rows(); ++i) {
    AdvisoryKey k = key;
    k.classid = static_cast<uint32_t>(r->Int(i, classid).value_or(0));
    k.objid = static_cast<uint32_t>(r->Int(i, objid).value_or(0));
    *out += (i > 0 ? ", " : "") + RenderAdvisoryKey(k) + " (" + r->String(i, holders) +
            " holder(s), application_name \"" + r->String(i, apps) + "\")";
  }
  if (r->Rows() > 0) *out = r->String(0, total) + " key(s) of its form held now: " + *out;
  return Status::Ok();
}

// One named lock: its key as the server computes it and who holds it now.
Status CheckLock(PgConnection& conn, const LockNameConfig& lock, const TargetCheck& tc) {
  LockNames names;
  std::vector<std::string> problems;
  if (Status s = ResolveLockNames(conn, {lock}, tc.timeouts, tc.Deadline(), &names, &problems);
      !s.ok()) {
    return s;
  }
  for (const std::string& p : problems) {
    tc.report->Problem(p,
                       "correct the expression: the server must evaluate it to one integer "
                       "without error (try it with SELECT in psql)");
  }
  if (names.empty()) {
    tc.report->Fact("lock \"" + lock.name + "\": no key (" + Derivation(lock) + " failed)");
    return Status::Ok();
  }
  const auto& [k, name] = *names.begin();
  AdvisoryKey key;
  std::tie(key.classid, key.objid, key.objsubid) = k;
  std::string holders;
  if (Status s = Holders(conn, key, tc.Deadline(), &holders); !s.ok()) return s;
  tc.report->Fact("lock \"" + lock.name + "\": key " + RenderAdvisoryKey(key) + " (" +
                  Derivation(lock) + "), " + holders);
  if (holders != kNotHeld) return Status::Ok();
  // Not held is normal for a job that is not running: advice, not a problem.
  std::string others;
  if (Status s = SameFormKeys(conn, key, tc.Deadline(), &others); !s.ok()) return s;
  if (!others.empty()) {
    tc.report->Advice(
        lock.Problem("name", "lock \"" + lock.name + "\" (key " + RenderAdvisoryKey(key) +
                                 ") is not held now; " + others),
        "if one of them is this lock, the recipe derives another key than the "
        "application: compare " +
            std::string(Derivation(lock)) + " with the application's call");
  }
  return Status::Ok();
}

// --- Lock tables ---------------------------------------------------------------------------

struct TableInfo {
  bool found = false;
  bool may_select = false;
  std::string schema;  // quoted where needed
  std::string owner;   // likewise
  std::string columns;
};

Status ReadTableInfo(PgConnection& conn, const std::string& relation,
                     SteadyClock::time_point deadline, TableInfo* info) {
  std::optional<PgResult> r;
  if (Status s = conn.ExecOne(queries::kCheckLeaseTable, {relation}, deadline, &r); !s.ok()) {
    return s;
  }
  Columns c(*r, "check_lease_table");
  const int found = c["found"], may_select = c["may_select"], schema = c["schema"],
            owner = c["owner"], columns = c["columns"];
  if (Status s = c.status(); !s.ok()) return s;
  if (r->Rows() != 1) return Status::UnexpectedShape("check_lease_table: not one row");
  *info = {r->Bool(0, found), r->Bool(0, may_select), r->String(0, schema), r->String(0, owner),
           r->String(0, columns)};
  return Status::Ok();
}

// How the table's rows are judged held.
std::string Judgement(const LeaseTableConfig& t) {
  constexpr char kRowLocked[] = "while a live transaction has locked or changed the row";
  std::string out;
  if (t.ttl > Duration(0)) {
    out = "held while taken_at + " + FormatDuration(t.ttl) + " > now()";
  } else if (t.has_expiry()) {
    out = "held while expires_at > now()";
  } else if (!t.held_sql.empty()) {
    out = "held where held_sql (" + t.held_sql + ")" + (t.row_lock ? " or " : "");
  } else {
    out = "held ";
  }
  if (t.row_lock) out += (t.has_expiry() ? " or " : "") + std::string(kRowLocked);
  if (!t.has_expiry()) out += ", no expiry";
  if (!t.where_sql.empty()) out += "; only rows where where_sql (" + t.where_sql + ") are locks";
  return out;
}

// Every row of the table, judged or not; nullopt when the count failed (*error).
Status CountRows(const PollContext& ctx, const std::string& relation, std::optional<int64_t>* total,
                 std::string* error) {
  StatementBatch batch;
  batch.Add("check_lease_table_rows",
            FillTemplate(queries::kCheckLeaseTableRows, {{"table", relation}}));
  BatchResults results;
  if (Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &results); !s.ok()) {
    *error = s.message();
    return ctx.conn->Broken() ? s : Status::Ok();
  }
  *total = results.Find("check_lease_table_rows")->Int(0, 0);
  return Status::Ok();
}

// The problem as "file:line: key: message": the collector's own problems already are.
std::string Located(const LeaseTableConfig& t, const std::string& error) {
  return error.rfind(t.origin.file + ":", 0) == 0 ? error : t.Problem("table", error);
}

// Reads the table as the exporter's first poll would, then counts its rows by judgement.
Status JudgeRows(const PollContext& ctx, const LeaseTableConfig& t, const std::string& relation,
                 const TargetCheck& tc) {
  LeaseTableData data;
  if (Status s = ReadLeaseTableOnce(ctx, t, &data); !s.ok()) return s;
  if (!data.ok) {
    const bool type = data.error.find(", want ") != std::string::npos;
    tc.report->Problem(Located(t, data.error),
                       type ? "name a column of that type, or convert it with the field's _sql "
                              "key (e.g. taken_at_sql = \"to_timestamp(locked_at)\" for epoch "
                              "seconds, held_sql = \"is_locked = 1\" for an integer flag)"
                            : "make the config's columns and expressions match the table (its "
                              "columns are listed above)");
    return Status::Ok();
  }
  std::optional<int64_t> total;
  std::string error;
  if (Status s = CountRows(ctx, relation, &total, &error); !s.ok()) return s;
  if (!total) {
    tc.report->Problem(t.Problem("table", error), "check the table");
    return Status::Ok();
  }
  const int64_t free = *total - data.held - data.expired;
  tc.report->Fact("  " + std::to_string(*total) + " row(s): " + std::to_string(data.held) +
                  " held, " + std::to_string(data.expired) + " expired, " + std::to_string(free) +
                  " free; " + Judgement(t));
  return Status::Ok();
}

std::string GrantFix(const LeaseTableConfig& t, const TableInfo& info, const std::string& role) {
  return "GRANT SELECT ON " + t.table + " TO " + role +
         "; and, since a tool that drops and re-creates the table loses that grant: ALTER DEFAULT "
         "PRIVILEGES FOR ROLE " +
         info.owner + " IN SCHEMA " + info.schema + " GRANT SELECT ON TABLES TO " + role +
         (t.database.empty() ? "" : " (in database " + t.database + ")");
}

// One lock table on `ctx.conn` (the target's session or its database's).
Status CheckLeaseTable(const PollContext& ctx, const LeaseTableConfig& t, const TargetCheck& tc) {
  const std::string relation = LeaseTableRelation(*ctx.conn, t);
  if (relation.empty()) return Status::ConnectionLost("cannot quote identifiers");
  TableInfo info;
  if (Status s = ReadTableInfo(*ctx.conn, relation, ctx.deadline, &info); !s.ok()) return s;
  const std::string in = t.database.empty() ? "" : " in database \"" + t.database + "\"";
  if (!info.found) {
    tc.report->Problem(
        t.Problem("table", "lock table \"" + t.table + "\" does not exist" + in),
        "create it, or set table to its \"schema.table\" (and database to where it lives)");
    return Status::Ok();
  }
  tc.report->Fact("lock table " + t.label() + ": columns " + info.columns + "; SELECT " +
                  (info.may_select ? "granted" : "NOT granted") + " to " + tc.role);
  if (!info.may_select) {
    tc.report->Problem(t.Problem("table", "role " + tc.role + " may not SELECT " + t.table + in),
                       GrantFix(t, info, tc.role));
    return Status::Ok();
  }
  return JudgeRows(ctx, t, relation, tc);
}

void CheckLeaseTables(PgConnection& target_conn, const TargetCheck& tc) {
  std::map<std::string, std::unique_ptr<PgConnection>> sessions;  // by other database
  for (const LeaseTableConfig& t : tc.target->leases) {
    PgConnection* conn = &target_conn;
    if (!t.database.empty()) {
      std::unique_ptr<PgConnection>& session = sessions[t.database];
      if (!session) {
        if (Status s = OpenSession(tc.target->dsn, t.database, tc.Deadline(), nullptr, &session);
            !s.ok()) {
          tc.report->Problem(
              t.Problem("database",
                        "cannot connect to database \"" + t.database + "\": " + s.message()),
              "check that the database exists and that " + tc.role + " may CONNECT to it");
          continue;
        }
      }
      conn = session.get();
    }
    const PollContext ctx{conn, tc.target, tc.poll, tc.timeouts, tc.Deadline(), nullptr};
    if (Status s = CheckLeaseTable(ctx, t, tc); !s.ok()) {
      tc.report->Problem(t.Problem("table", s.message()), "check the server and run again");
    }
  }
}

// --- The server's log ----------------------------------------------------------------------

// The settings that decide what the server writes to its log (check_server_log.sql); nullopt for
// one the role may not see.
struct LogSettings {
  int version_num = 0;
  std::map<std::string, std::optional<std::string>> values;  // by setting name

  std::string Get(const std::string& name) const {
    const auto it = values.find(name);
    return it == values.end() || !it->second ? "" : *it->second;
  }
  bool Known(const std::string& name) const {
    const auto it = values.find(name);
    return it != values.end() && it->second.has_value();
  }
};

constexpr const char* kLogSettingNames[] = {
    "logging_collector",  "log_destination", "log_directory",    "data_directory",
    "log_disconnections", "log_lock_waits",  "deadlock_timeout", "lc_messages"};

Status ReadLogSettings(PgConnection& conn, SteadyClock::time_point deadline, LogSettings* out) {
  std::optional<PgResult> r;
  if (Status s = conn.ExecOne(queries::kCheckServerLog, {}, deadline, &r); !s.ok()) return s;
  Columns c(*r, "check_server_log");
  const int version = c["version_num"];
  std::map<std::string, int> columns;
  for (const char* name : kLogSettingNames) columns[name] = c[name];
  if (Status s = c.status(); !s.ok()) return s;
  if (r->Rows() != 1) return Status::UnexpectedShape("check_server_log: not one row");
  out->version_num = static_cast<int>(r->Int(0, version).value_or(0));
  for (const auto& [name, col] : columns) {
    out->values[name] =
        r->IsNull(0, col) ? std::nullopt : std::optional<std::string>(r->String(0, col));
  }
  return Status::Ok();
}

// Where the server writes its log files: log_directory, under data_directory when relative.
std::string ServerLogDirectory(const LogSettings& settings) {
  const std::string dir = settings.Get("log_directory");
  if (dir.empty() || dir[0] == '/' || !settings.Known("data_directory")) return dir;
  return settings.Get("data_directory") + "/" + dir;
}

bool HasDestination(const std::string& log_destination, const std::string& format) {
  std::string item;
  std::istringstream in(log_destination);
  while (std::getline(in, item, ',')) {
    item.erase(std::remove_if(item.begin(), item.end(),
                              [](unsigned char c) { return std::isspace(c) != 0; }),
               item.end());
    std::transform(item.begin(), item.end(), item.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (item == format) return true;
  }
  return false;
}

// "ALTER SYSTEM SET name = value; SELECT pg_reload_conf();" (`value` quoted by the caller where
// SQL needs it).
std::string AlterSystem(const std::string& name, const std::string& value) {
  return "ALTER SYSTEM SET " + name + " = " + value + "; SELECT pg_reload_conf();";
}

// What makes the server write the configured format at all: problems, each exit status 1.
void CheckLogDestination(const ServerLogConfig& log, const LogSettings& settings,
                         const TargetCheck& tc) {
  if (log.format == "jsonlog" && settings.version_num > 0 && settings.version_num < 150000) {
    tc.report->Problem(
        log.Problem("format", "jsonlog needs PostgreSQL 15 or later; this server is " +
                                  std::to_string(settings.version_num / 10000)),
        "set format = \"csvlog\", and include csvlog in log_destination");
    return;
  }
  if (settings.Known("logging_collector") && settings.Get("logging_collector") != "on") {
    tc.report->Problem(log.Problem("format", "logging_collector is off: the server writes no " +
                                                 log.format + " file"),
                       "ALTER SYSTEM SET logging_collector = on; then restart the server "
                       "(logging_collector needs a restart, a reload does not change it)");
  }
  const std::string destination = settings.Get("log_destination");
  if (settings.Known("log_destination") && !HasDestination(destination, log.format)) {
    tc.report->Problem(log.Problem("format", "log_destination is '" + destination +
                                                 "': it does not include " + log.format),
                       AlterSystem("log_destination", "'" + destination + "," + log.format + "'"));
  }
}

// What the log shows when these are on: advice, not counted in the exit status.
void AdviseLogSettings(const ServerLogConfig& log, const LogSettings& settings,
                       const TargetCheck& tc) {
  // Not a key's fault: the line of the [targets.server_log] table.
  const auto table = log.origin.lines.find("");
  const int line = table == log.origin.lines.end() ? 0 : table->second;
  const auto at = [&](const std::string& message) {
    return ConfigError{log.origin.file, line, "targets.server_log", message}.ToString();
  };
  if (settings.Known("log_disconnections") && settings.Get("log_disconnections") != "on") {
    tc.report->Advice(at("log_disconnections is off: a clean close is not in the log, so the end "
                         "of every gone session waits up to 10 s for the log, then is judged on "
                         "the session end counters"),
                      AlterSystem("log_disconnections", "on") +
                          " (it applies to sessions that start afterwards)");
  }
  if (settings.Known("log_lock_waits") && settings.Get("log_lock_waits") != "on") {
    tc.report->Advice(at("log_lock_waits is off: waits that end between two polls are not seen"),
                      AlterSystem("log_lock_waits", "on"));
  }
  const std::string lc_messages = settings.Get("lc_messages");
  if (settings.Known("lc_messages") && !EnglishMessages(lc_messages)) {
    tc.report->Advice(at("lc_messages is '" + lc_messages +
                         "': the disconnection and lock-wait lines are translated and cannot "
                         "be read (the other session ends still are, by SQLSTATE)"),
                      AlterSystem("lc_messages", "'C'"));
  }
}

// "logging_collector on, log_destination 'csvlog,jsonlog', ..." ("hidden" where the role may not
// see a setting).
std::string DescribeLogSettings(const LogSettings& settings) {
  std::string out;
  for (const char* name : kLogSettingNames) {
    const std::string n = name;
    if (n == "log_directory" || n == "data_directory") continue;
    const bool quoted = n == "log_destination" || n == "lc_messages";
    out += (out.empty() ? "" : ", ") + n + " " +
           (!settings.Known(n) ? "hidden"
            : quoted           ? "'" + settings.Get(n) + "'"
                               : settings.Get(n));
    if (n == "deadlock_timeout") out += " (shorter waits are never logged)";
  }
  return out;
}

// How to let the exporter's user read the log files (via = "file").
constexpr char kFileReadFix[] =
    "let the exporter's user read the log directory and its files: a log_directory outside the "
    "data directory whose group is the exporter's, and ALTER SYSTEM SET log_file_mode = '0640'; "
    "SELECT pg_reload_conf(); SELECT pg_rotate_logfile(); (README, \"The server's log\"), or "
    "read it with via = \"sql\"";

std::string ListFix(const ServerLogConfig& log, const TargetCheck& tc) {
  if (log.via == ServerLogConfig::Via::kFile) return kFileReadFix;
  return "GRANT pg_monitor TO " + tc.role + "; (pg_ls_logdir() needs it)";
}

std::string ReadFix(const ServerLogConfig& log, const TargetCheck& tc) {
  if (log.via == ServerLogConfig::Via::kFile) return kFileReadFix;
  return "GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint, boolean) TO " +
         tc.role + "; it lets " + tc.role +
         " read every file of the data directory (all table data included) and of the log "
         "directory: prefer via = \"file\" where the exporter runs on the database host";
}

// A reader's error as a message that says it is about the server log (the file source's already
// does).
std::string LogError(const Status& s) {
  return s.message().rfind("server log: ", 0) == 0 ? s.message() : "server log: " + s.message();
}

// Where the log is read from: the path (via = "file") or the server (via = "sql", a session of
// its own with the target's DSN, as the exporter's reader opens).
std::unique_ptr<LogSource> MakeCheckSource(const ServerLogConfig& log, LogFormat format,
                                           const TargetCheck& tc) {
  if (log.via == ServerLogConfig::Via::kFile) return MakeFileLogSource(log.path, format);
  return MakeSqlLogSource(tc.target->dsn, format, std::max(tc.poll->timeout, Duration(5000)));
}

// via = "file": the path is there and is a file or a directory; false (and a problem) if not.
bool CheckLogPath(const ServerLogConfig& log, const LogSettings* settings, const TargetCheck& tc) {
  struct stat st;
  std::string what;
  if (::stat(log.path.c_str(), &st) != 0) {
    const int err = errno;
    what = std::strerror(err);
    if (err == EACCES) {
      tc.report->Problem(log.Problem("path", "server log \"" + log.path + "\": " + what),
                         kFileReadFix);
      return false;
    }
  } else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    what = "neither a file nor a directory";
  } else {
    return true;
  }
  const std::string dir = settings != nullptr ? ServerLogDirectory(*settings) : "";
  tc.report->Problem(log.Problem("path", "server log \"" + log.path + "\": " + what),
                     "set path to the server's log directory or one of its files" +
                         (dir.empty() ? std::string() : " (the server writes to " + dir + ")"));
  return false;
}

// No file of the format where the log is read: is the other format there?
void NoFileOfFormat(const ServerLogConfig& log, LogFormat format, const std::string& where,
                    const LogSettings* settings, const TargetCheck& tc) {
  const LogFormat other = format == LogFormat::kJsonlog ? LogFormat::kCsvlog : LogFormat::kJsonlog;
  std::vector<LogFileInfo> others;
  if (!MakeCheckSource(log, other, tc)->List(&others).ok()) others.clear();
  const std::string dir = settings != nullptr ? ServerLogDirectory(*settings) : "";
  tc.report->Problem(log.Problem("format", "no " + log.format + " file in " + where),
                     !others.empty()
                         ? std::to_string(others.size()) + " " + LogFormatName(other) +
                               " file(s) there: set format = \"" + LogFormatName(other) +
                               "\", or add " + log.format + " to log_destination"
                         : "turn the server's " + log.format +
                               " on (the settings below), and check that the " +
                               "log is read where the server writes it" +
                               (dir.empty() ? std::string() : " (" + dir + ")"));
}

// The newest file of the format, and one byte of it read as the exporter's reader would.
void CheckLogFiles(const ServerLogConfig& log, const LogSettings* settings, const TargetCheck& tc) {
  const LogFormat format = ParseLogFormat(log.format).value_or(LogFormat::kJsonlog);
  const std::string key = log.via == ServerLogConfig::Via::kSql ? "via" : "path";
  const std::unique_ptr<LogSource> source = MakeCheckSource(log, format, tc);
  std::vector<LogFileInfo> files;
  if (Status s = source->List(&files); !s.ok()) {
    tc.report->Problem(log.Problem(key, LogError(s)), ListFix(log, tc));
    return;
  }
  if (files.empty()) {
    NoFileOfFormat(log, format, source->Describe(), settings, tc);
    return;
  }
  const LogFileInfo& newest =
      *std::max_element(files.begin(), files.end(), [](const auto& a, const auto& b) {
        return std::tie(a.modified, a.name) < std::tie(b.modified, b.name);
      });
  std::string byte;
  if (Status s = source->Read(newest, 0, 1, &byte); !s.ok()) {
    tc.report->Problem(log.Problem(key, LogError(s)), ReadFix(log, tc));
    return;
  }
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto age = Duration(static_cast<int64_t>(std::max(0.0, now - newest.modified) * 1000));
  tc.report->Fact("server log: " + source->Describe() + " readable" +
                  (log.via == ServerLogConfig::Via::kSql ? " by role " + tc.role : "") +
                  ", format " + log.format + ": " + std::to_string(files.size()) +
                  " file(s), the newest " + newest.name + " (" + std::to_string(newest.size) +
                  " bytes, modified " + FormatDuration(age) + " ago)");
}

// The log of a target with [targets.server_log]: readable or not, the format found, and the
// server settings that make it useful. `conn` is null when the target is unreachable: the files
// of via = "file" are still checked.
void CheckServerLog(PgConnection* conn, const TargetCheck& tc) {
  const ServerLogConfig& log = tc.target->server_log;
  if (!log.configured()) return;
  std::optional<LogSettings> settings;
  if (conn != nullptr) {
    settings.emplace();
    if (Status s = ReadLogSettings(*conn, tc.Deadline(), &*settings); !s.ok()) {
      settings.reset();
      tc.report->Problem(
          log.Problem("format", "cannot read the server's log settings: " + s.message()),
          "check the server and run again");
    }
  }
  const LogSettings* known = settings ? &*settings : nullptr;
  if (log.via == ServerLogConfig::Via::kFile) {
    if (CheckLogPath(log, known, tc)) CheckLogFiles(log, known, tc);
  } else if (conn != nullptr) {
    CheckLogFiles(log, known, tc);
  }
  if (!settings) return;
  const std::string dir = ServerLogDirectory(*settings);
  tc.report->Fact("server log settings: " + DescribeLogSettings(*settings) +
                  (dir.empty() ? "" : "; the server writes its log files to " + dir));
  CheckLogDestination(log, *settings, tc);
  AdviseLogSettings(log, *settings, tc);
}

// --- Targets and poolers -------------------------------------------------------------------

void CheckPooler(const PoolerConfig& p, const TargetCheck& tc) {
  std::unique_ptr<PgConnection> conn;
  std::optional<PgResult> pools;
  Status s = PgConnection::Connect(p.admin_dsn, {{"application_name", "pglock_exporter"}},
                                   tc.Deadline(), &conn);
  // The admin console speaks only the simple protocol.
  if (s.ok()) s = conn->ExecOne(queries::kPgbouncerPools, {}, tc.Deadline(), &pools);
  if (!s.ok()) {
    tc.report->Problem(
        p.Problem(DsnKey(p.origin.lines, "admin_dsn"),
                  "pooler \"" + p.name + "\": admin console did not answer: " + s.message()),
        "check admin_dsn: PgBouncer's listen address and port, dbname=pgbouncer, and a user "
        "listed in its stats_users or admin_users");
    return;
  }
  const int mode = pools->Column("pool_mode");
  int pooled = 0;
  for (int i = 0; mode >= 0 && i < pools->Rows(); ++i) {
    if (pools->Text(i, mode) != "session") ++pooled;
  }
  tc.report->Fact("pooler \"" + p.name + "\": admin console answered (" +
                  MaskConninfo(p.admin_dsn) + "), " + std::to_string(pools->Rows()) + " pool(s), " +
                  std::to_string(pooled) + " in transaction or statement mode");
}

// Who the exporter is on the server; fills tc->role.
Status Identify(PgConnection& conn, TargetCheck* tc) {
  std::optional<PgResult> r;
  if (Status s = conn.ExecOne(queries::kCheckTarget, {}, tc->Deadline(), &r); !s.ok()) return s;
  Columns c(*r, "check_target");
  const int role = c["role"], database = c["database"], version = c["version"];
  if (Status s = c.status(); !s.ok()) return s;
  tc->role = r->String(0, role);
  tc->report->Fact("connected: PostgreSQL " + r->String(0, version) + ", database \"" +
                   r->String(0, database) + "\", role " + tc->role +
                   ", read-only session, no lock taken");
  return Status::Ok();
}

void CheckOnServer(PgConnection& conn, TargetCheck* tc) {
  Status s = Identify(conn, tc);
  for (size_t i = 0; s.ok() && i < tc->target->locks.size(); ++i) {
    s = CheckLock(conn, tc->target->locks[i], *tc);
  }
  if (!s.ok()) {
    tc->report->Problem(tc->target->Problem(DsnKey(tc->target->origin.lines, "dsn"), s.message()),
                        "check the server and run again");
    return;
  }
  CheckLeaseTables(conn, *tc);
}

void CheckTarget(const TargetConfig& t, const PollConfig& poll, Report* report) {
  report->Section("target \"" + t.name + "\" (" + MaskConninfo(t.dsn) + ")");
  // The role is known once connected; the GRANTs suggested before that name it so.
  TargetCheck tc{&t, &poll, QueryTimeouts::ForPoll(poll.timeout), "<the exporter's role>", report};
  std::unique_ptr<PgConnection> conn;
  if (Status s = OpenSession(t.dsn, "", tc.Deadline(), nullptr, &conn); !s.ok()) {
    conn.reset();
    report->Problem(t.Problem(DsnKey(t.origin.lines, "dsn"),
                              "target \"" + t.name + "\": cannot connect: " + s.message()),
                    "check the DSN, that the server runs, and that pg_hba.conf and the password "
                    "let this user in");
  } else {
    CheckOnServer(*conn, &tc);
  }
  CheckServerLog(conn != nullptr && !conn->Broken() ? conn.get() : nullptr, tc);
  for (const PoolerConfig& p : t.poolers) CheckPooler(p, tc);
}

}  // namespace

int CheckTargets(const Config& config, std::ostream& out) {
  Report report(out);
  for (const TargetConfig& t : config.targets) CheckTarget(t, config.poll, &report);
  if (report.problems() == 0) {
    report.Section("every target resolves" +
                   (report.advice() == 0
                        ? std::string()
                        : " (" + std::to_string(report.advice()) + " ADVICE line(s) above)"));
    return 0;
  }
  report.Section(std::to_string(report.problems()) + " problem(s)");
  return 1;
}

}  // namespace pglock
