#include "exporter/serverlog/record_splitter.h"

#include <cstring>

namespace pglock {

RecordSplitter::RecordSplitter(LogFormat format, size_t max_record_bytes)
    : format_(format), max_record_bytes_(max_record_bytes) {}

void RecordSplitter::Feed(std::string_view chunk,
                          const std::function<void(std::string_view)>& on_record) {
  while (!chunk.empty()) {
    const size_t end = FindRecordEnd(chunk);
    if (end == std::string_view::npos) {
      Hold(chunk);
      return;
    }
    const std::string_view piece = chunk.substr(0, end);
    chunk.remove_prefix(end + 1);
    if (skipping_) {  // the end of an oversized record
      skipping_ = false;
      continue;
    }
    if (pending_.size() + piece.size() > max_record_bytes_) {
      ++oversized_;
      pending_.clear();
      continue;
    }
    if (pending_.empty()) {
      if (!piece.empty()) on_record(piece);  // the common case: no copy
      continue;
    }
    pending_.append(piece);
    on_record(pending_);
    pending_.clear();
  }
}

bool RecordSplitter::Reset() {
  const bool dropped = has_partial();
  pending_.clear();
  in_quotes_ = false;
  skipping_ = false;
  return dropped;
}

size_t RecordSplitter::FindRecordEnd(std::string_view data) {
  const char* const begin = data.data();
  const size_t size = data.size();
  if (format_ == LogFormat::kJsonlog) {
    const void* nl = std::memchr(begin, '\n', size);
    return nl == nullptr ? std::string_view::npos : static_cast<const char*>(nl) - begin;
  }
  // csvlog: the first '\n' outside quotes. `nl` is the next '\n' at or after `pos`, found once
  // and searched again only when it turned out to be inside quotes.
  size_t pos = 0;
  size_t nl = 0;
  bool nl_known = false;
  while (pos < size) {
    if (in_quotes_) {
      const void* q = std::memchr(begin + pos, '"', size - pos);
      if (q == nullptr) return std::string_view::npos;
      pos = static_cast<const char*>(q) - begin + 1;
      in_quotes_ = false;
      continue;
    }
    if (!nl_known || nl < pos) {
      const void* p = std::memchr(begin + pos, '\n', size - pos);
      nl = p == nullptr ? size : static_cast<const char*>(p) - begin;
      nl_known = true;
    }
    const void* q = std::memchr(begin + pos, '"', nl - pos);
    if (q == nullptr) return nl == size ? std::string_view::npos : nl;
    pos = static_cast<const char*>(q) - begin + 1;
    in_quotes_ = true;
  }
  return std::string_view::npos;
}

void RecordSplitter::Hold(std::string_view data) {
  if (skipping_) return;
  if (pending_.size() + data.size() > max_record_bytes_) {
    ++oversized_;
    pending_.clear();
    skipping_ = true;
    return;
  }
  pending_.append(data);
}

size_t LastRecordStart(std::string_view bytes, LogFormat format) {
  for (size_t nl = bytes.rfind('\n'); nl != std::string_view::npos;
       nl = nl == 0 ? std::string_view::npos : bytes.rfind('\n', nl - 1)) {
    const std::string_view line = bytes.substr(nl + 1);
    const bool starts = format == LogFormat::kJsonlog
                            ? !line.empty() && line.front() == '{'
                            : line.size() >= 19 && ParseLogTime(line.substr(0, 19)).has_value();
    if (starts) return nl + 1;
  }
  return std::string_view::npos;
}

}  // namespace pglock
