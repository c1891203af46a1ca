#include "exporter/serverlog/csvlog.h"

#include <charconv>
#include <cstdint>
#include <string>

namespace pglock {
namespace {

constexpr size_t kMinColumns = 23;  // PostgreSQL 12
constexpr size_t kMaxColumns = 26;  // PostgreSQL 14+

enum class Column {
  kText,  // into `text` below
  kLogTime,
  kPid,
  kConnectionFrom,
  kSessionId,
  kLineNum,
  kTxid,
  kLeaderPid,
  kQueryId,
  kIgnored,
};

struct ColumnSpec {
  Column kind;
  std::string LogRecord::*text = nullptr;
};

constexpr ColumnSpec kColumns[kMaxColumns] = {
    {Column::kLogTime},
    {Column::kText, &LogRecord::user},
    {Column::kText, &LogRecord::dbname},
    {Column::kPid},
    {Column::kConnectionFrom},
    {Column::kSessionId},
    {Column::kLineNum},
    {Column::kText, &LogRecord::command_tag},
    {Column::kIgnored},  // session_start_time: the session id carries it, exactly
    {Column::kText, &LogRecord::virtual_xid},
    {Column::kTxid},
    {Column::kText, &LogRecord::error_severity},
    {Column::kText, &LogRecord::state_code},
    {Column::kText, &LogRecord::message},
    {Column::kText, &LogRecord::detail},
    {Column::kText, &LogRecord::hint},
    {Column::kText, &LogRecord::internal_query},
    {Column::kIgnored},  // internal_query_pos
    {Column::kText, &LogRecord::context},
    {Column::kText, &LogRecord::statement},
    {Column::kIgnored},  // query_pos
    {Column::kIgnored},  // location
    {Column::kText, &LogRecord::application_name},
    {Column::kText, &LogRecord::backend_type},
    {Column::kLeaderPid},
    {Column::kQueryId},
};

// Walks the fields of one record. A field's text is a view into the record, or into `scratch`
// when it had doubled quotes to undo.
class FieldReader {
 public:
  explicit FieldReader(std::string_view record) : rest_(record) {}

  bool done() const { return done_; }

  // The next field into *field; false when the record is malformed.
  bool Next(std::string* scratch, std::string_view* field) {
    if (!rest_.empty() && rest_.front() == '"') return NextQuoted(scratch, field);
    // Unquoted fields are short (numbers, codes, times): a plain scan beats find_first_of, which
    // searches the set once per byte.
    size_t end = 0;
    while (end < rest_.size() && rest_[end] != ',' && rest_[end] != '"') ++end;
    if (end < rest_.size() && rest_[end] == '"') return false;
    *field = rest_.substr(0, end);
    return Advance(end);
  }

 private:
  bool NextQuoted(std::string* scratch, std::string_view* field) {
    scratch->clear();
    size_t pos = 1;
    bool escaped = false;
    for (;;) {
      const size_t quote = rest_.find('"', pos);
      if (quote == std::string_view::npos) return false;  // unterminated
      if (quote + 1 < rest_.size() && rest_[quote + 1] == '"') {
        scratch->append(rest_.substr(pos, quote + 1 - pos));
        pos = quote + 2;
        escaped = true;
        continue;
      }
      if (escaped) {
        scratch->append(rest_.substr(pos, quote - pos));
        *field = *scratch;
      } else {
        *field = rest_.substr(1, quote - 1);
      }
      if (quote + 1 < rest_.size() && rest_[quote + 1] != ',') return false;
      return Advance(quote + 1 < rest_.size() ? quote + 1 : std::string_view::npos);
    }
  }

  // Moves past the field that ends at `end` (a ',' or the end of the record).
  bool Advance(size_t end) {
    if (end == std::string_view::npos || end >= rest_.size()) {
      done_ = true;
      rest_ = {};
    } else {
      rest_.remove_prefix(end + 1);
    }
    return true;
  }

  std::string_view rest_;
  bool done_ = false;
};

template <typename T>
void ReadInteger(std::string_view text, T* out) {
  T v{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && ptr == text.data() + text.size()) *out = v;
}

// "host:port", "[local]", or empty.
void SetConnectionFrom(std::string_view text, LogRecord* out) {
  const size_t colon = text.rfind(':');
  if (colon != std::string_view::npos && colon > 0 && colon + 1 < text.size()) {
    int port = 0;
    auto [ptr, ec] = std::from_chars(text.data() + colon + 1, text.data() + text.size(), port);
    if (ec == std::errc() && ptr == text.data() + text.size()) {
      out->remote_host.assign(text.substr(0, colon));
      out->remote_port = port;
      return;
    }
  }
  out->remote_host.assign(text);
}

bool SetColumn(size_t index, std::string_view text, LogRecord* out) {
  const ColumnSpec& spec = kColumns[index];
  switch (spec.kind) {
    case Column::kText:
      (out->*spec.text).assign(text);
      return true;
    case Column::kLogTime: {
      const std::optional<double> t = ParseLogTime(text);
      if (t) out->log_time = *t;
      return t.has_value();
    }
    case Column::kPid:
      ReadInteger(text, &out->pid);
      return true;
    case Column::kConnectionFrom:
      SetConnectionFrom(text, out);
      return true;
    case Column::kSessionId:
      out->session_id.assign(text);
      // A record without a session id (none is malformed) keeps session_start 0.
      ParseSessionId(text, &out->session_start, &out->session_pid);
      return true;
    case Column::kLineNum:
      ReadInteger(text, &out->session_line_num);
      return true;
    case Column::kTxid:
      ReadInteger(text, &out->txid);
      return true;
    case Column::kLeaderPid:
      ReadInteger(text, &out->leader_pid);
      return true;
    case Column::kQueryId:
      ReadInteger(text, &out->query_id);
      return true;
    case Column::kIgnored:
      return true;
  }
  return true;
}

}  // namespace

bool ParseCsvlog(std::string_view record, LogRecord* out) {
  out->Clear();
  if (!record.empty() && record.back() == '\n') record.remove_suffix(1);
  if (!record.empty() && record.back() == '\r') record.remove_suffix(1);
  if (record.empty()) return false;
  FieldReader reader(record);
  std::string scratch;
  size_t count = 0;
  while (!reader.done()) {
    std::string_view field;
    if (count == kMaxColumns || !reader.Next(&scratch, &field)) return false;
    if (!SetColumn(count, field, out)) return false;
    ++count;
  }
  return count >= kMinColumns;
}

}  // namespace pglock
