#include "exporter/serverlog/jsonlog.h"

#include <simdjson.h>

#include <charconv>
#include <cstdint>
#include <string>

#include "exporter/util/utf8.h"

namespace pglock {
namespace {

namespace dom = simdjson::dom;

enum class Number { kPid, kRemotePort, kLineNum, kTxid, kLeaderPid, kQueryId };

struct TextKey {
  std::string_view key;
  std::string LogRecord::*field;
};

constexpr TextKey kTextKeys[] = {
    {"user", &LogRecord::user},
    {"dbname", &LogRecord::dbname},
    {"remote_host", &LogRecord::remote_host},
    {"session_id", &LogRecord::session_id},
    {"ps", &LogRecord::command_tag},
    {"vxid", &LogRecord::virtual_xid},
    {"error_severity", &LogRecord::error_severity},
    {"state_code", &LogRecord::state_code},
    {"message", &LogRecord::message},
    {"detail", &LogRecord::detail},
    {"hint", &LogRecord::hint},
    {"internal_query", &LogRecord::internal_query},
    {"context", &LogRecord::context},
    {"statement", &LogRecord::statement},
    {"application_name", &LogRecord::application_name},
    {"backend_type", &LogRecord::backend_type},
};

struct NumberKey {
  std::string_view key;
  Number field;
};

constexpr NumberKey kNumberKeys[] = {
    {"pid", Number::kPid},   {"remote_port", Number::kRemotePort}, {"line_num", Number::kLineNum},
    {"txid", Number::kTxid}, {"leader_pid", Number::kLeaderPid},   {"query_id", Number::kQueryId},
};

// A JSON number, or a string holding one; nullopt for anything else.
std::optional<int64_t> AsInteger(dom::element value) {
  int64_t i;
  if (value.get_int64().get(i) == simdjson::SUCCESS) return i;
  uint64_t u;
  if (value.get_uint64().get(u) == simdjson::SUCCESS) return static_cast<int64_t>(u);
  std::string_view text;
  if (value.get_string().get(text) != simdjson::SUCCESS) return std::nullopt;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return i;
}

void SetNumber(Number field, int64_t v, LogRecord* out) {
  switch (field) {
    case Number::kPid:
      out->pid = static_cast<int>(v);
      break;
    case Number::kRemotePort:
      out->remote_port = static_cast<int>(v);
      break;
    case Number::kLineNum:
      out->session_line_num = v;
      break;
    case Number::kTxid:
      out->txid = static_cast<uint64_t>(v);
      break;
    case Number::kLeaderPid:
      out->leader_pid = static_cast<int>(v);
      break;
    case Number::kQueryId:
      out->query_id = v;
      break;
  }
}

// Stores one key's value; returns false only for a "timestamp" that cannot be read.
bool SetField(std::string_view key, dom::element value, LogRecord* out) {
  if (key == "timestamp") {
    std::string_view text;
    if (value.get_string().get(text) != simdjson::SUCCESS) return false;
    const std::optional<double> t = ParseLogTime(text);
    if (!t) return false;
    out->log_time = *t;
    return true;
  }
  for (const TextKey& k : kTextKeys) {
    if (k.key != key) continue;
    std::string_view text;
    if (value.get_string().get(text) == simdjson::SUCCESS) (out->*k.field).assign(text);
    return true;
  }
  for (const NumberKey& k : kNumberKeys) {
    if (k.key != key) continue;
    if (const std::optional<int64_t> v = AsInteger(value)) SetNumber(k.field, *v, out);
    return true;
  }
  return true;
}

}  // namespace

struct JsonlogParser::Impl {
  dom::parser parser;
  std::string sanitized;  // the line with invalid UTF-8 replaced, when needed
};

JsonlogParser::JsonlogParser() : impl_(std::make_unique<Impl>()) {}
JsonlogParser::~JsonlogParser() = default;

bool JsonlogParser::Parse(std::string_view line, LogRecord* out) {
  out->Clear();
  // The parser copies the line into its own padded buffer (kept between calls).
  dom::element doc;
  simdjson::error_code error = impl_->parser.parse(line.data(), line.size(), true).get(doc);
  if (error == simdjson::UTF8_ERROR) {
    impl_->sanitized = ToValidUtf8(line);
    error = impl_->parser.parse(impl_->sanitized.data(), impl_->sanitized.size(), true).get(doc);
  }
  dom::object object;
  if (error != simdjson::SUCCESS || doc.get_object().get(object) != simdjson::SUCCESS) {
    return false;
  }
  bool has_time = false;
  for (dom::key_value_pair field : object) {
    if (!SetField(field.key, field.value, out)) return false;
    has_time = has_time || field.key == "timestamp";
  }
  if (!has_time) return false;
  // A record without a session id (none is malformed) keeps session_start 0.
  ParseSessionId(out->session_id, &out->session_start, &out->session_pid);
  return true;
}

}  // namespace pglock
