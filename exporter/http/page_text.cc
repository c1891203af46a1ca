#include "exporter/http/page_text.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "exporter/http/server.h"
#include "exporter/log.h"

namespace pglock {
namespace {

// `v` formatted by `format`, which takes one double.
std::string Printf(const char* format, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string FormatUtc(double epoch, const char* format) {
  const auto t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

}  // namespace

std::string H(const std::string& s) { return HtmlEscape(s); }
std::string J(const std::string& s) { return "\"" + JsonEscape(s) + "\""; }

std::string Num(double v) { return Printf("%.3f", v); }
std::string Count(double v) { return Printf("%.0f", v); }
std::string Pct(double v) { return Printf("%.2f%%", v); }

std::string Secs(double v) {
  if (v < 0) return Printf("%.0f s overdue", -v);
  if (v < 120) return Printf("%.1f s", v);
  if (v < 7200) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f min %02.0f s", std::floor(v / 60), std::fmod(v, 60));
    return buf;
  }
  return Printf("%.1f h", v / 3600);
}

std::string Span(double v) {
  if (v < 120) return Printf("%.0f s", v);
  if (v < 7200) return Printf("%.0f min", v / 60);
  return Printf("%.1f h", v / 3600);
}

std::string Utc(double epoch) { return FormatUtc(epoch, "%Y-%m-%d %H:%M:%SZ"); }
std::string Clock(double epoch) { return FormatUtc(epoch, "%H:%M:%S"); }

std::string Addr(std::string_view a) { return a.empty() ? "local" : std::string(a); }

std::string AppName(const std::string& application_name) {
  return application_name.empty() ? "(no application_name)" : application_name;
}

std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string o;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      o += static_cast<char>(c);
    } else {
      o += '%';
      o += kHex[c >> 4];
      o += kHex[c & 15];
    }
  }
  return o;
}

}  // namespace pglock
