// Cuts a stream of log bytes, fed in chunks of any size, into complete records: for jsonlog one
// record per '\n'-terminated line; for csvlog a record ends at a '\n' outside double quotes (the
// quote state is kept across chunks; `""` inside quotes toggles it twice, so it needs no special
// case). A partial last record is held back until the bytes that end it arrive. A record longer
// than max_record_bytes is dropped while it streams, skipped to its end and counted: the splitter
// never holds more than max_record_bytes. Empty records are ignored. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "exporter/serverlog/log_record.h"

namespace pglock {

class RecordSplitter {
 public:
  // REQUIRES: max_record_bytes > 0.
  RecordSplitter(LogFormat format, size_t max_record_bytes);
  RecordSplitter(const RecordSplitter&) = delete;
  RecordSplitter& operator=(const RecordSplitter&) = delete;

  // Calls on_record for every record that `chunk` completes, in order, without its '\n'. The view
  // is valid only during the call.
  void Feed(std::string_view chunk, const std::function<void(std::string_view)>& on_record);

  // Forgets the partial record and the quote state (the file changed). Returns true when a
  // partial record was dropped (the caller counts it as unparsed).
  bool Reset();

  // A record has started and not ended (its bytes are held back, or being skipped).
  bool has_partial() const { return !pending_.empty() || skipping_; }
  size_t buffered_bytes() const { return pending_.size(); }
  // Records dropped for their size since construction.
  uint64_t oversized() const { return oversized_; }

 private:
  // The offset of the '\n' that ends the record starting at data[0] (or continuing the current
  // one), updating the quote state; npos when `data` does not end it.
  size_t FindRecordEnd(std::string_view data);
  // Adds the start of a record that `data` does not end to what is held back, or starts
  // skipping the record when it is too long.
  void Hold(std::string_view data);

  const LogFormat format_;
  const size_t max_record_bytes_;
  std::string pending_;     // the start of the current record; at most max_record_bytes_
  bool in_quotes_ = false;  // csvlog: inside a quoted field
  bool skipping_ = false;   // the current record is oversized: drop its bytes until its end
  uint64_t oversized_ = 0;
};

// The offset just after the last '\n' of `bytes` that a record starts at ('{' for jsonlog, a
// log_time such as "2024-05-01 12:00:00" for csvlog), or npos: where to start reading when the
// bytes before are unknown. A csvlog line inside quotes that starts with a timestamp misleads it.
size_t LastRecordStart(std::string_view bytes, LogFormat format);

}  // namespace pglock
