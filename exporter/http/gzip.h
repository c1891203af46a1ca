// gzip for /metrics: whether a request's Accept-Encoding allows it, and the compression itself
// (zlib). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace pglock {

// True when an Accept-Encoding header value (RFC 9110 section 12.5.3) makes gzip acceptable:
// "gzip" (or "x-gzip") listed with a weight above 0, or not listed while "*" is, with a weight
// above 0. Tokens are case-insensitive; "gzip;q=0" refuses it whatever "*" says. A missing or
// empty header, and an element with a malformed weight, do not allow it.
bool AcceptsGzip(std::string_view accept_encoding);

// The gzip stream (RFC 1952) of `text` into *out. False only when zlib fails (out of memory).
bool GzipCompress(std::string_view text, std::string* out);

}  // namespace pglock
