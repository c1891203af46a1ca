// Label values from the database are untrusted bytes. SanitizeLabelValue makes any of them a
// valid, bounded exposition label value. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace pglock {

// Longest label value in bytes before the marker is appended.
inline constexpr size_t kMaxLabelValueBytes = 256;
inline constexpr std::string_view kTruncatedMarker = "...[truncated]";

// Replaces invalid UTF-8 sequences and control characters (C0 including newline, DEL, C1) with
// U+FFFD, and cuts values longer than kMaxLabelValueBytes at a character boundary, appending
// "#<8 hex digits of a hash of the whole value>" and kTruncatedMarker, so two long values that
// share a prefix stay distinct. Quotes and backslashes are escaped by Families, which writes the
// text.
std::string SanitizeLabelValue(std::string_view raw);
// The same, appended to `out` (a scrape reuses one buffer for every value).
void AppendSanitizedLabelValue(std::string_view raw, std::string* out);

}  // namespace pglock
