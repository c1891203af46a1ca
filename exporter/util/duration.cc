#include "exporter/util/duration.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

namespace pglock {
namespace {

constexpr int64_t kMaxMillis = int64_t{1} << 52;  // ~142,000 years: far beyond any sane value.

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Status ParseDuration(std::string_view text, Duration* out) {
  if (text.empty()) {
    return Status::InvalidArgument("empty duration");
  }
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!IsDigit(text[i])) {
      return Status::InvalidArgument(
          "invalid duration \"" + std::string(text) +
          "\": expected a number followed by a unit (ms, s, m, h, d), e.g. \"5s\"");
    }
    int64_t number = 0;
    const auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), number);
    if (ec != std::errc() || number > kMaxMillis) {
      return Status::InvalidArgument("duration \"" + std::string(text) + "\" is out of range");
    }
    i = static_cast<size_t>(end - text.data());
    size_t unit_start = i;
    while (i < text.size() && !IsDigit(text[i])) ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    int64_t factor = 0;
    if (unit == "ms") {
      factor = 1;
    } else if (unit == "s") {
      factor = 1000;
    } else if (unit == "m") {
      factor = 60'000;
    } else if (unit == "h") {
      factor = 3'600'000;
    } else if (unit == "d") {
      factor = 86'400'000;
    } else {
      return Status::InvalidArgument("invalid duration \"" + std::string(text) + "\": " +
                                     (unit.empty() ? std::string("missing unit")
                                                   : "unknown unit \"" + std::string(unit) + "\"") +
                                     " (use ms, s, m, h or d, e.g. \"5s\")");
    }
    if (number > (kMaxMillis - total) / factor) {
      return Status::InvalidArgument("duration \"" + std::string(text) + "\" is out of range");
    }
    total += number * factor;
  }
  *out = Duration(total);
  return Status::Ok();
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  const struct {
    int64_t factor;
    const char* unit;
  } parts[] = {{86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}, {1, "ms"}};
  for (const auto& p : parts) {
    if (ms >= p.factor) {
      out += std::to_string(ms / p.factor) + p.unit;
      ms %= p.factor;
    }
  }
  return out;
}

namespace {

// The length of the numeric prefix of `text` (sign, digits, one decimal point, optional
// exponent); 0 when it does not start with a number.
size_t NumberPrefixLength(std::string_view text) {
  size_t i = 0;
  if (text[i] == '-' || text[i] == '+') ++i;
  const size_t digits_start = i;
  bool seen_dot = false;
  while (i < text.size() && (IsDigit(text[i]) || (text[i] == '.' && !seen_dot))) {
    seen_dot = seen_dot || text[i] == '.';
    ++i;
  }
  if (i == digits_start || (i == digits_start + 1 && seen_dot)) return 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    if (j < text.size() && (text[j] == '-' || text[j] == '+')) ++j;
    if (j < text.size() && IsDigit(text[j])) {
      while (j < text.size() && IsDigit(text[j])) ++j;
      i = j;
    }
  }
  return i;
}

// Seconds in one `unit` of a PostgreSQL time setting; a bare number is in `base_unit`.
std::optional<double> SecondsPerPgUnit(std::string_view unit, PgBaseUnit base_unit) {
  if (unit.empty()) {
    switch (base_unit) {
      case PgBaseUnit::kMilliseconds:
        return 0.001;
      case PgBaseUnit::kSeconds:
        return 1;
      case PgBaseUnit::kMinutes:
        return 60;
    }
    return 0;
  }
  if (unit == "us") return 1e-6;
  if (unit == "ms") return 0.001;
  if (unit == "s") return 1;
  if (unit == "min") return 60;
  if (unit == "h") return 3600;
  if (unit == "d") return 86400;
  return std::nullopt;
}

}  // namespace

std::optional<double> ParsePgTimeSetting(std::string_view text, PgBaseUnit base_unit) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  const size_t i = NumberPrefixLength(text);
  if (i == 0) return std::nullopt;
  double value = 0;
  const std::string number(text.substr(0, i));
  // std::from_chars for double is fine on GCC 12; the leading '+' it rejects is stripped here.
  const char* begin = number.c_str() + (number[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(begin, number.c_str() + number.size(), value);
  if (ec != std::errc() || end != number.c_str() + number.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  const std::optional<double> seconds_per_unit = SecondsPerPgUnit(Trim(text.substr(i)), base_unit);
  if (!seconds_per_unit) return std::nullopt;
  return value * *seconds_per_unit;
}

PgBaseUnit PgBaseUnitFromUnitColumn(std::string_view unit) {
  if (unit == "s") return PgBaseUnit::kSeconds;
  if (unit == "min") return PgBaseUnit::kMinutes;
  return PgBaseUnit::kMilliseconds;
}

}  // namespace pglock
