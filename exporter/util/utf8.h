// UTF-8 validation shared by label sanitising, JSON logs and config loading. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pglock {

// Length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 when it is invalid: bad lead or
// continuation bytes, truncation, overlong forms, surrogates, code points above U+10FFFF.
// REQUIRES: i < s.size().
size_t Utf8SequenceLength(std::string_view s, size_t i);

// Offset of the first invalid byte, or std::string_view::npos when `s` is valid UTF-8.
size_t FirstInvalidUtf8(std::string_view s);

// Where to cut `s` to keep at most `max` bytes without ending inside a character: `max` moved back
// over continuation bytes, or s.size() when that is at most `max`.
size_t Utf8CutPoint(std::string_view s, size_t max);

// Replaces only invalid UTF-8 sequences with U+FFFD (no length cap, controls kept).
std::string ToValidUtf8(std::string_view raw);

}  // namespace pglock
