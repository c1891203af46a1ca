// The small text formatters of the on-call view's pages and JSON (oncall.h, timeline_page.h), so
// that /locks, /api/v1/locks and /api/v1/timeline write an escaped string, a number, a duration
// or a time the same way. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pglock {

// `s` HTML-escaped, whatever its bytes.
std::string H(const std::string& s);
// `s` percent-encoded for a URL's query string.
std::string UrlEncode(const std::string& s);
// `s` as a JSON string literal, quotes included.
std::string J(const std::string& s);

// A number with three decimals, as the JSON gives seconds and epochs.
std::string Num(double v);
// A whole number ("%.0f"): a count or a percentage.
std::string Count(double v);
// A percentage with two decimals ("12.50%"), as the timeline's SVG places and sizes its shapes.
std::string Pct(double v);
// A duration for a reader: "4.2 s", "3 min 07 s", "2.5 h"; a negative one is "12 s overdue".
std::string Secs(double v);
// A duration rounded for a short label or a tooltip: "42 s", "17 min", "2.5 h".
std::string Span(double v);

// An epoch as a UTC date and time ("2024-05-01 12:00:00Z").
std::string Utc(double epoch);
// An epoch as a UTC time of day ("12:00:00"), for the timeline's axis and tooltips.
std::string Clock(double epoch);

// A client's address; "local" for a Unix-socket client (no address).
std::string Addr(std::string_view a);
// A client's application_name; "(no application_name)" when it set none.
std::string AppName(const std::string& application_name);

// Appends `items` to *o as a JSON array; `each(item)` appends one element.
template <typename T, typename F>
void JsonArray(const std::vector<T>& items, F each, std::string* o) {
  *o += "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) *o += ",";
    each(items[i]);
  }
  *o += "]";
}

}  // namespace pglock
