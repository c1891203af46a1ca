// Parses one line of PostgreSQL's jsonlog (log_destination = jsonlog, 15+) into a LogRecord with
// simdjson. PostgreSQL writes the server's bytes into its JSON strings unchanged, so a line is not
// always valid UTF-8 (a SQL_ASCII database, a client's bytes): such a line is still read, its
// invalid sequences replaced with U+FFFD before parsing. Thread-compatible: one parser per
// thread (it owns simdjson's parser and a padded copy of the line).
#pragma once

#include <memory>
#include <string_view>

#include "exporter/serverlog/log_record.h"

namespace pglock {

class JsonlogParser {
 public:
  JsonlogParser();
  ~JsonlogParser();
  JsonlogParser(const JsonlogParser&) = delete;
  JsonlogParser& operator=(const JsonlogParser&) = delete;

  // Fills *out from `line` (one JSON object, with or without its '\n'). Unknown keys are ignored,
  // missing keys leave their field empty. False when the line is not a JSON object or has no
  // readable "timestamp"; *out is then unspecified.
  bool Parse(std::string_view line, LogRecord* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pglock
