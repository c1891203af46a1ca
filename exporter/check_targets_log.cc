// --check-targets for [targets.server_log]: whether the server's log can be read as the exporter
// reads it (via = "file": the path, its newest file of the format and one byte of it; via =
// "sql": the same through the server), and the server settings that make it useful: problems
// with the exact ALTER SYSTEM, and ADVICE for what only makes the log show less.
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

#include "exporter/check_targets_internal.h"
#include "exporter/pg/columns.h"
#include "exporter/queries.h"
#include "exporter/serverlog/log_source.h"
#include "exporter/serverlog/server_log.h"

namespace pglock {
namespace {

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

}  // namespace

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

}  // namespace pglock
