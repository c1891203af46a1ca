// Follows a server log through a LogSource: each Poll() reads what was appended since the last
// one, cuts it into records, parses them and hands them on. Thread-compatible (the poller's log
// thread owns one).
//
// Which file, and from where:
//  - The first Poll() positions at the end of the newest file (greatest modification time, ties
//    by name): what the log held before is never replayed. While that file ends inside a record
//    being written, up to 3 Polls wait for its end, then start at that record's start (found in
//    the last 64 KiB: a line that starts like a record). A directory that is empty then is
//    followed from the start of the first file that appears.
//  - The current file is read to its end before any switch, found by identity when it was renamed
//    (and, for files, through the descriptor still open when it is gone from the listing).
//  - Then the next file is the oldest (by modification time, then name) of the files that are new
//    or changed size since they were last seen: a rotation's new file from its start; a file
//    seen before that grew is read from where it was left (a record written to the old file after
//    the rotation), one that shrank from its start. A file recreated under the current file's
//    name has a new identity: it is a new file.
//  - A current file that shrank below the position was truncated: read again from its start.
//  - A switch waits while the current file ends in a partial record, for a few polls.
// Reads go in chunks, at most poll_budget_bytes per Poll(); the rest waits for the next Poll().
// An error leaves the position where it was: the next Poll() retries. Memory stays bounded by
// max_record_bytes (a held-back record, and the parser's copy of one) plus chunk_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exporter/serverlog/jsonlog.h"
#include "exporter/serverlog/log_record.h"
#include "exporter/serverlog/log_source.h"
#include "exporter/serverlog/record_splitter.h"
#include "exporter/util/status.h"

namespace pglock {

struct LogFollowerOptions {
  size_t max_record_bytes = 1 << 20;  // a longer record is skipped and counted
  size_t chunk_bytes = 256 << 10;
  uint64_t poll_budget_bytes = 64 << 20;
};

struct LogFollowerStats {
  uint64_t records = 0;   // parsed and handed on
  uint64_t unparsed = 0;  // malformed, oversized, or cut off by a truncation or a switch
  uint64_t bytes_read = 0;
  uint64_t files_switched = 0;
  uint64_t truncations = 0;
};

// Where a follower is: the record boundary it has read up to in a file (a record held back
// unfinished is not yet read).
struct LogPosition {
  std::string file;
  uint64_t identity = 0;
  uint64_t offset = 0;
  double modified = 0;  // the file's modification time as last listed
};

// What a follower resumed from a saved position reads at most (the rest of the saved file and
// the files written after it); beyond that it starts at the newest file's end, as without one.
inline constexpr uint64_t kMaxResumeBytes = 256ull << 20;

class LogFollower {
 public:
  LogFollower(std::unique_ptr<LogSource> source, LogFormat format, LogFollowerOptions options = {});
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  // Reads what is new and calls on_record for each record, in the log's order. The record is valid
  // only during the call.
  Status Poll(const std::function<void(const LogRecord&)>& on_record);

  // Before the first Poll(): start where an earlier follower of the same log stopped (a restart
  // of the exporter), so the records written meanwhile are read: from `at` in its file (found by
  // identity, else by name), then the files modified after it, oldest first. When that file is
  // gone the files modified after it are read from their start; when more than kMaxResumeBytes
  // were written, or it shrank, the first Poll() starts at the end as without it.
  void ResumeAt(LogPosition at) { resume_ = std::move(at); }
  // What the first Poll() did of ResumeAt(): "" before, or without one.
  const std::string& resume_outcome() const { return resume_outcome_; }
  // The position to resume from later; nullopt before the first Poll() positioned it.
  std::optional<LogPosition> position() const;

  LogFollowerStats stats() const;
  // The last Poll() read everything there was (its budget did not stop it, no error).
  bool caught_up() const { return caught_up_; }
  // The file being read; empty before the first Poll() or while there is none.
  const std::string& current_file() const { return current_.name; }
  const LogSource& source() const { return *source_; }

 private:
  // A file by identity, or by name where the source gives no identity.
  using FileKey = std::pair<uint64_t, std::string>;
  // A file other than the current one: how far it was read (or skipped), and its size as listed
  // then (a listing older than the read shows less than was read, which is no truncation).
  struct Seen {
    uint64_t offset;
    uint64_t listed_size;
  };
  static FileKey KeyOf(const LogFileInfo& file);

  // Positions in the newest file (see StartOffset), or not yet.
  Status Start(const std::vector<LogFileInfo>& files);
  // Positions at resume_ when it can (see ResumeAt); true when it did.
  bool Resume(const std::vector<LogFileInfo>& files);
  // Where to start in `file`: its end; while it ends inside a record being written, nowhere yet
  // (*wait) for a few Polls, then at the start of that record.
  Status StartOffset(const LogFileInfo& file, uint64_t* offset, bool* wait);
  Status FollowCurrent(const std::vector<LogFileInfo>& files, uint64_t* budget,
                       const std::function<void(const LogRecord&)>& on_record, bool* at_end);
  Status ReadToEnd(uint64_t* budget, const std::function<void(const LogRecord&)>& on_record,
                   bool* at_end);
  void HandleRecord(std::string_view bytes, const std::function<void(const LogRecord&)>& on_record);
  // The file to read after the current one, and where to start in it; false when there is none.
  bool NextFile(const std::vector<LogFileInfo>& files, LogFileInfo* next, uint64_t* offset) const;
  // Whether a switch may drop the partial record the current file ends with.
  bool MaySwitch(bool grew);
  void SwitchTo(const LogFileInfo& next, uint64_t offset);
  void ForgetUnlisted(const std::vector<LogFileInfo>& files);
  void DropPartial();

  const std::unique_ptr<LogSource> source_;
  const LogFormat format_;
  const LogFollowerOptions options_;
  RecordSplitter splitter_;
  JsonlogParser json_;
  LogRecord record_;  // reused
  std::string chunk_;
  std::vector<LogFileInfo> listed_;  // the last List()'s, its storage reused by the next

  std::optional<LogPosition> resume_;
  std::string resume_outcome_;
  bool started_ = false;
  int start_attempts_ = 0;
  bool has_current_ = false;
  LogFileInfo current_;
  uint64_t offset_ = 0;
  std::map<FileKey, Seen> seen_;
  bool caught_up_ = false;
  int stalled_polls_ = 0;   // polls the current file ended in a partial record, not growing
  LogFollowerStats stats_;  // unparsed without the splitter's oversized records
};

}  // namespace pglock
