// Parses one complete record of PostgreSQL's csvlog (log_destination = csvlog, 12+) into a
// LogRecord. A record may span lines (newlines inside quoted fields), `""` inside quotes is a
// quote, unquoted fields may be empty. Columns, in the order of PostgreSQL's "Using CSV-Format Log
// Output": log_time ... application_name (23, PostgreSQL 12), backend_type (13), leader_pid and
// query_id (14+). Pure; thread-safe.
#pragma once

#include <string_view>

#include "exporter/serverlog/log_record.h"

namespace pglock {

// Fills *out from `record` (one record; a final '\n' is allowed). False when it is not well-formed
// CSV, has fewer than 23 or more than 26 columns, or its log_time cannot be read; *out is then
// unspecified.
bool ParseCsvlog(std::string_view record, LogRecord* out);

}  // namespace pglock
