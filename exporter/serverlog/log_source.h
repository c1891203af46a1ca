// Where the server log's bytes come from: the files themselves (the exporter runs where it can read
// the log) or the target's server over SQL (pg_ls_logdir and pg_read_binary_file). A source lists
// the candidate files of its format and reads byte ranges of one; it knows nothing of records.
// Sources are thread-compatible: one thread uses a source (the SQL source owns its connection).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/serverlog/log_record.h"
#include "exporter/util/status.h"

namespace pglock {

struct LogFileInfo {
  std::string name;  // what Read() takes: a file name in the source's directory, or the path
  uint64_t size = 0;
  double modified = 0;    // epoch seconds
  uint64_t identity = 0;  // the file itself (device and inode mixed), 0 if unknown
};

class LogSource {
 public:
  virtual ~LogSource() = default;

  // The candidate files of the source's format, in no particular order, into *out (replaced).
  virtual Status List(std::vector<LogFileInfo>* out) = 0;

  // Up to max_bytes of `file` from `offset` into *out (replaced): fewer at its end, none at or
  // past it. A file with a known identity is the file of that identity: a source that can still
  // reach it after a rename reads it there, and fails rather than read another file by the name.
  virtual Status Read(const LogFileInfo& file, uint64_t offset, size_t max_bytes,
                      std::string* out) = 0;

  // For messages: "directory /var/log/postgresql (*.json)".
  virtual std::string Describe() const = 0;
};

// The candidate file names of a format in a log directory: "*.json" (jsonlog) or "*.csv"
// (csvlog), as PostgreSQL's logging collector names them.
bool IsLogFileName(std::string_view name, LogFormat format);

// `path`: one log file (read whatever its name), or a directory whose candidate files are
// followed. Nothing is opened before the first List(); errors name the path and the reason.
std::unique_ptr<LogSource> MakeFileLogSource(std::string path, LogFormat format);

// The files of the server's log_directory, read over a session of its own opened with `dsn`
// (read-only, statement_timeout = `timeout`), at first use and again after a connection loss.
// Each call is bounded by `timeout`. After a failure, calls fail with the same status without a
// try until a backoff has passed (1 s, doubling, at most 5 min; 10 s when the session was lost),
// so that a missing privilege does not write an ERROR line into the server's log at every read.
// Needs pg_ls_logdir() (superuser or pg_monitor) and pg_read_binary_file() (superuser,
// pg_read_server_files, or EXECUTE granted on it). `abort`, when given, must outlive the source (as
// in OpenSession).
std::unique_ptr<LogSource> MakeSqlLogSource(std::string dsn, LogFormat format,
                                            std::chrono::milliseconds timeout,
                                            const std::atomic<bool>* abort = nullptr);

}  // namespace pglock
