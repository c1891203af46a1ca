// spdlog set-up: text or JSON lines on stderr, level by name. JSON messages are escaped so any
// bytes in a message (an error quoting server text) stay one valid JSON object per line.
#pragma once

#include <string>
#include <string_view>

namespace pglock {

// Installs the default logger. level/format were validated by the config.
void SetupLogging(const std::string& level, const std::string& format);

// Escapes a string for inclusion in a JSON string literal (control characters as \uXXXX;
// invalid UTF-8 replaced with U+FFFD).
std::string JsonEscape(std::string_view s);

// Logs one structured record at info level: "<msg> <text_fields>" in text format; with
// --log.format=json one object whose `key` member is `json_value` (a JSON value).
void LogStructured(const std::string& msg, const std::string& text_fields, const std::string& key,
                   const std::string& json_value);

}  // namespace pglock
