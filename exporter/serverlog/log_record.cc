#include "exporter/serverlog/log_record.h"

#include <charconv>
#include <ctime>

namespace pglock {
namespace {

// Reads exactly `width` decimal digits at text[pos]; false otherwise.
bool Digits(std::string_view text, size_t pos, size_t width, int* out) {
  if (pos + width > text.size()) return false;
  *out = 0;
  for (size_t i = pos; i < pos + width; ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return false;
    *out = *out * 10 + (c - '0');
  }
  return true;
}

// "YYYY-MM-DD HH:MM:SS" at the start of `text` into *tm.
bool ParseCivil(std::string_view text, std::tm* tm) {
  int year, month, day, hour, minute, second;
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' || text[10] != ' ' || text[13] != ':' ||
      text[16] != ':') {
    return false;
  }
  if (!Digits(text, 0, 4, &year) || !Digits(text, 5, 2, &month) || !Digits(text, 8, 2, &day) ||
      !Digits(text, 11, 2, &hour) || !Digits(text, 14, 2, &minute) ||
      !Digits(text, 17, 2, &second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return false;
  }
  *tm = std::tm{};
  tm->tm_year = year - 1900;
  tm->tm_mon = month - 1;
  tm->tm_mday = day;
  tm->tm_hour = hour;
  tm->tm_min = minute;
  tm->tm_sec = second;
  return true;
}

// ".123" (any number of digits) as a fraction of a second; advances *rest past it.
bool ParseFraction(std::string_view* rest, double* fraction) {
  *fraction = 0;
  if (rest->empty() || rest->front() != '.') return true;
  double scale = 0.1;
  size_t i = 1;
  for (; i < rest->size() && (*rest)[i] >= '0' && (*rest)[i] <= '9'; ++i) {
    *fraction += ((*rest)[i] - '0') * scale;
    scale /= 10;
  }
  if (i == 1) return false;
  rest->remove_prefix(i);
  return true;
}

// "+02", "-0530", "+05:30" as seconds east of UTC.
std::optional<int> ParseOffset(std::string_view zone) {
  if (zone.size() < 3 || (zone[0] != '+' && zone[0] != '-')) return std::nullopt;
  int hours = 0, minutes = 0;
  if (!Digits(zone, 1, 2, &hours)) return std::nullopt;
  std::string_view rest = zone.substr(3);
  if (!rest.empty() && rest[0] == ':') rest.remove_prefix(1);
  if (!rest.empty() && (rest.size() != 2 || !Digits(rest, 0, 2, &minutes))) return std::nullopt;
  if (hours > 15 || minutes > 59) return std::nullopt;
  const int seconds = hours * 3600 + minutes * 60;
  return zone[0] == '-' ? -seconds : seconds;
}

// An abbreviation such as CEST or EST.
bool IsZoneName(std::string_view zone) {
  if (zone.empty()) return false;
  for (char c : zone) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) return false;
  }
  return true;
}

}  // namespace

const char* LogFormatName(LogFormat format) {
  switch (format) {
    case LogFormat::kJsonlog:
      return "jsonlog";
    case LogFormat::kCsvlog:
      return "csvlog";
  }
  return "jsonlog";
}

std::optional<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "jsonlog") return LogFormat::kJsonlog;
  if (name == "csvlog") return LogFormat::kCsvlog;
  return std::nullopt;
}

void LogRecord::Clear() {
  log_time = 0;
  pid = remote_port = session_pid = leader_pid = 0;
  session_start = session_line_num = query_id = 0;
  txid = 0;
  for (std::string* s : {&user, &dbname, &remote_host, &session_id, &command_tag, &virtual_xid,
                         &error_severity, &state_code, &message, &detail, &hint, &internal_query,
                         &context, &statement, &application_name, &backend_type}) {
    s->clear();
  }
}

std::optional<double> ParseLogTime(std::string_view text) {
  std::tm tm;
  if (!ParseCivil(text, &tm)) return std::nullopt;
  std::string_view rest = text.substr(19);
  double fraction;
  if (!ParseFraction(&rest, &fraction)) return std::nullopt;
  if (!rest.empty() && rest.front() != ' ') return std::nullopt;
  const std::string_view zone = rest.empty() ? std::string_view("UTC") : rest.substr(1);
  if (zone.empty()) return std::nullopt;
  if (zone == "UTC" || zone == "GMT" || zone == "Z" || zone == "UCT") {
    return static_cast<double>(timegm(&tm)) + fraction;
  }
  if (zone.front() == '+' || zone.front() == '-') {
    const std::optional<int> offset = ParseOffset(zone);
    if (!offset) return std::nullopt;
    return static_cast<double>(timegm(&tm) - *offset) + fraction;
  }
  if (!IsZoneName(zone)) return std::nullopt;
  tm.tm_isdst = -1;  // let the exporter's zone rules decide
  return static_cast<double>(mktime(&tm)) + fraction;
}

bool ParseSessionId(std::string_view text, int64_t* start, int* pid) {
  const size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == text.size()) return false;
  const char* end = text.data() + text.size();
  uint64_t start_bits = 0;
  uint32_t pid_bits = 0;
  auto r1 = std::from_chars(text.data(), text.data() + dot, start_bits, 16);
  if (r1.ec != std::errc() || r1.ptr != text.data() + dot) return false;
  auto r2 = std::from_chars(text.data() + dot + 1, end, pid_bits, 16);
  if (r2.ec != std::errc() || r2.ptr != end) return false;
  *start = static_cast<int64_t>(start_bits);
  *pid = static_cast<int>(pid_bits);
  return true;
}

}  // namespace pglock
