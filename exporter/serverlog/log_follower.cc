#include "exporter/serverlog/log_follower.h"

#include <algorithm>
#include <tuple>

#include "exporter/serverlog/csvlog.h"

namespace pglock {
namespace {

// Polls the newest file may end inside a record (being written) before the first Poll()
// positions at the start of that record.
constexpr int kStartAttempts = 3;
// How far back from the end of the newest file that record's start is looked for.
constexpr uint64_t kStartScanBytes = 64 << 10;
// Polls a partial record at the end of the current file holds back a switch to the next file.
constexpr int kStalledPollsBeforeSwitch = 3;

bool Older(const LogFileInfo& a, const LogFileInfo& b) {
  return std::tie(a.modified, a.name) < std::tie(b.modified, b.name);
}

}  // namespace

LogFollower::LogFollower(std::unique_ptr<LogSource> source, LogFormat format,
                         LogFollowerOptions options)
    : source_(std::move(source)),
      format_(format),
      options_(options),
      splitter_(format, options.max_record_bytes) {}

LogFollower::FileKey LogFollower::KeyOf(const LogFileInfo& file) {
  return file.identity != 0 ? FileKey{file.identity, ""} : FileKey{0, file.name};
}

LogFollowerStats LogFollower::stats() const {
  LogFollowerStats s = stats_;
  s.unparsed += splitter_.oversized();
  return s;
}

Status LogFollower::Poll(const std::function<void(const LogRecord&)>& on_record) {
  caught_up_ = false;
  std::vector<LogFileInfo>& files = listed_;  // its entries' storage kept from poll to poll
  if (Status s = source_->List(&files); !s.ok()) return s;
  if (!started_) {
    if (!Resume(files)) {
      const Status s = Start(files);
      caught_up_ = s.ok() && started_;
      return s;
    }
  }
  uint64_t budget = options_.poll_budget_bytes;
  bool at_end = true;
  // Each hop finishes one file and may switch to the next: a few rotations since the last Poll()
  // are read in order.
  for (size_t hop = 0; hop <= files.size(); ++hop) {
    const uint64_t before = stats_.bytes_read;
    at_end = true;
    if (has_current_) {
      if (Status s = FollowCurrent(files, &budget, on_record, &at_end); !s.ok()) return s;
    }
    if (!at_end) break;  // the budget is spent
    LogFileInfo next;
    uint64_t offset = 0;
    if (!NextFile(files, &next, &offset)) {
      stalled_polls_ = 0;
      break;
    }
    if (!MaySwitch(stats_.bytes_read > before)) break;
    SwitchTo(next, offset);
    at_end = false;  // until the next hop reads it
  }
  ForgetUnlisted(files);
  caught_up_ = at_end;
  return Status::Ok();
}

bool LogFollower::Resume(const std::vector<LogFileInfo>& files) {
  if (!resume_) return false;
  const LogPosition at = std::move(*resume_);
  resume_.reset();
  const LogFileInfo* file = nullptr;
  for (const LogFileInfo& f : files) {
    if (at.identity != 0 ? f.identity == at.identity : f.name == at.file) file = &f;
  }
  if (file != nullptr && file->size < at.offset) {
    resume_outcome_ = "not resumed: " + at.file + " shrank below the saved position";
    return false;
  }
  uint64_t missed = file != nullptr ? file->size - at.offset : 0;
  for (const LogFileInfo& f : files) {
    if (&f != file && f.modified > at.modified) missed += f.size;
  }
  if (missed > kMaxResumeBytes) {
    resume_outcome_ = "not resumed: " + std::to_string(missed) +
                      " bytes written since, more than " + std::to_string(kMaxResumeBytes);
    return false;
  }
  // Files last written before the saved one are done; those written after it are new.
  for (const LogFileInfo& f : files) {
    if (&f != file && f.modified <= at.modified) seen_[KeyOf(f)] = Seen{f.size, f.size};
  }
  if (file != nullptr) {
    current_ = *file;
    offset_ = at.offset;
    has_current_ = true;
  }
  started_ = true;
  resume_outcome_ = "resumed at " + at.file + ":" + std::to_string(at.offset) + ", " +
                    std::to_string(missed) + " bytes written since" +
                    (file == nullptr ? " (that file is gone: reading those written after it)" : "");
  return true;
}

std::optional<LogPosition> LogFollower::position() const {
  if (!started_ || !has_current_) return std::nullopt;
  const uint64_t held = splitter_.buffered_bytes();
  return LogPosition{current_.name, current_.identity, offset_ >= held ? offset_ - held : 0,
                     current_.modified};
}

Status LogFollower::Start(const std::vector<LogFileInfo>& files) {
  const LogFileInfo* newest = nullptr;
  for (const LogFileInfo& f : files) {
    if (newest == nullptr || Older(*newest, f)) newest = &f;
  }
  uint64_t offset = 0;
  if (newest != nullptr) {
    bool wait = false;
    if (Status s = StartOffset(*newest, &offset, &wait); !s.ok() || wait) return s;
  }
  for (const LogFileInfo& f : files) seen_[KeyOf(f)] = Seen{f.size, f.size};
  if (newest != nullptr) {
    seen_.erase(KeyOf(*newest));
    current_ = *newest;
    offset_ = offset;
    has_current_ = true;
  }
  started_ = true;
  return Status::Ok();
}

Status LogFollower::StartOffset(const LogFileInfo& file, uint64_t* offset, bool* wait) {
  *offset = file.size;
  if (file.size == 0) return Status::Ok();
  const uint64_t from = file.size - std::min<uint64_t>(file.size, kStartScanBytes);
  std::string tail;
  if (Status s = source_->Read(file, from, file.size - from, &tail); !s.ok()) return s;
  *offset = from + tail.size();
  if (tail.empty() || tail.back() == '\n') return Status::Ok();
  if (++start_attempts_ < kStartAttempts) {
    *wait = true;
    return Status::Ok();
  }
  const size_t start = LastRecordStart(tail, format_);
  if (start != std::string_view::npos) *offset = from + start;
  return Status::Ok();
}

Status LogFollower::FollowCurrent(const std::vector<LogFileInfo>& files, uint64_t* budget,
                                  const std::function<void(const LogRecord&)>& on_record,
                                  bool* at_end) {
  const FileKey key = KeyOf(current_);
  const auto listed = std::find_if(files.begin(), files.end(),
                                   [&](const LogFileInfo& f) { return KeyOf(f) == key; });
  if (listed != files.end()) {
    if (listed->size < offset_) {
      ++stats_.truncations;
      DropPartial();
      offset_ = 0;
    }
    current_ = *listed;  // its name may have changed
  }
  const Status s = ReadToEnd(budget, on_record, at_end);
  if (s.ok() || listed != files.end()) return s;
  // Gone from the listing and no longer readable: nothing more will come from it.
  DropPartial();
  has_current_ = false;
  current_ = LogFileInfo{};
  *at_end = true;
  return Status::Ok();
}

Status LogFollower::ReadToEnd(uint64_t* budget,
                              const std::function<void(const LogRecord&)>& on_record,
                              bool* at_end) {
  const auto handle = [&](std::string_view bytes) { HandleRecord(bytes, on_record); };
  while (*budget > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(options_.chunk_bytes, *budget));
    if (Status s = source_->Read(current_, offset_, want, &chunk_); !s.ok()) return s;
    offset_ += chunk_.size();
    stats_.bytes_read += chunk_.size();
    *budget -= chunk_.size();
    splitter_.Feed(chunk_, handle);
    if (chunk_.size() < want) {
      *at_end = true;
      return Status::Ok();
    }
  }
  *at_end = false;
  return Status::Ok();
}

void LogFollower::HandleRecord(std::string_view bytes,
                               const std::function<void(const LogRecord&)>& on_record) {
  const bool parsed =
      format_ == LogFormat::kJsonlog ? json_.Parse(bytes, &record_) : ParseCsvlog(bytes, &record_);
  if (!parsed) {
    ++stats_.unparsed;
    return;
  }
  ++stats_.records;
  on_record(record_);
}

bool LogFollower::NextFile(const std::vector<LogFileInfo>& files, LogFileInfo* next,
                           uint64_t* offset) const {
  bool found = false;
  for (const LogFileInfo& f : files) {
    const FileKey key = KeyOf(f);
    if (has_current_ && key == KeyOf(current_)) continue;
    uint64_t start = 0;  // a new file
    if (const auto it = seen_.find(key); it != seen_.end()) {
      const Seen& seen = it->second;
      if (f.size > seen.offset) {
        start = seen.offset;  // grew: the rest
      } else if (f.size == seen.offset || f.size == seen.listed_size) {
        continue;  // unchanged
      }            // else it shrank: all of it
    }
    if (!found || Older(f, *next)) {
      *next = f;
      *offset = start;
      found = true;
    }
  }
  return found;
}

bool LogFollower::MaySwitch(bool grew) {
  if (!splitter_.has_partial()) {
    stalled_polls_ = 0;
    return true;
  }
  stalled_polls_ = grew ? 0 : stalled_polls_ + 1;
  return stalled_polls_ >= kStalledPollsBeforeSwitch;
}

void LogFollower::SwitchTo(const LogFileInfo& next, uint64_t offset) {
  if (has_current_) seen_[KeyOf(current_)] = Seen{offset_, current_.size};
  DropPartial();
  seen_.erase(KeyOf(next));
  current_ = next;
  offset_ = offset;
  has_current_ = true;
  stalled_polls_ = 0;
  ++stats_.files_switched;
}

void LogFollower::ForgetUnlisted(const std::vector<LogFileInfo>& files) {
  std::vector<FileKey> listed;
  listed.reserve(files.size());
  for (const LogFileInfo& f : files) listed.push_back(KeyOf(f));
  std::sort(listed.begin(), listed.end());
  std::erase_if(seen_, [&](const auto& entry) {
    return !std::binary_search(listed.begin(), listed.end(), entry.first);
  });
}

void LogFollower::DropPartial() {
  if (splitter_.Reset()) ++stats_.unparsed;
}

}  // namespace pglock
