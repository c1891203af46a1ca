// One record of PostgreSQL's structured server log (jsonlog, 15+; csvlog, 12+), as both parsers
// produce it, and the helpers they share: the log's timestamps and its session id. Text fields
// hold the server's bytes (any encoding, any length). Plain data and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pglock {

enum class LogFormat { kJsonlog, kCsvlog };

// "jsonlog" or "csvlog": the names of log_destination and of the config's server_log.format.
const char* LogFormatName(LogFormat format);
std::optional<LogFormat> ParseLogFormat(std::string_view name);

// A field the record lacks is empty (text) or 0 (numbers).
struct LogRecord {
  double log_time = 0;  // epoch seconds, milliseconds kept
  std::string user;
  std::string dbname;
  int pid = 0;
  std::string remote_host;  // an address, a host name or "[local]"; empty for background processes
  int remote_port = 0;
  // "%lx.%x": the backend's start (time_t) and its pid, in hex; parsed into the next two fields.
  std::string session_id;
  int64_t session_start = 0;  // epoch seconds, truncated: pg_stat_activity.backend_start floored
  int session_pid = 0;
  int64_t session_line_num = 0;
  std::string command_tag;  // csvlog command_tag, jsonlog "ps" ("idle in transaction", "SELECT")
  std::string virtual_xid;
  uint64_t txid = 0;
  std::string error_severity;  // LOG, FATAL, ERROR, WARNING, PANIC ... (never translated)
  std::string state_code;      // SQLSTATE; "00000" for LOG lines
  std::string message;
  std::string detail;
  std::string hint;
  std::string internal_query;
  std::string context;
  std::string statement;  // csvlog query, jsonlog "statement"
  std::string application_name;
  std::string backend_type;  // 13+: "client backend", "postmaster", "autovacuum worker" ...
  int leader_pid = 0;        // 14+: the leader of a parallel worker
  int64_t query_id = 0;      // 14+ (compute_query_id)

  // Empties every field, keeping the strings' capacity (the parsers reuse one record).
  void Clear();
};

// The log's timestamp text, "2024-05-01 12:00:00.123 UTC" (log_time, session start), as epoch
// seconds. The zone is the server's log_timezone abbreviation: UTC, GMT, Z and numeric offsets
// ("+02", "-0530", "+05:30") are exact. Any other name (CEST, EST ...) cannot be resolved without
// the server's zone database and is read as the exporter's own local time: exact when the
// exporter runs with the server's time zone, else off by the difference. No zone at all: UTC.
std::optional<double> ParseLogTime(std::string_view text);

// Splits a session id "%lx.%x" into the backend's start and pid; false when malformed.
bool ParseSessionId(std::string_view text, int64_t* start, int* pid);

}  // namespace pglock
