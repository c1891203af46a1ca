// Parsing of the durations used in flags and the config file ("5s", "1m30s", "250ms"), and of
// PostgreSQL time settings ("3500ms", "10s", "1min", or a bare number in the setting's base unit).
// Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "exporter/util/status.h"

namespace pglock {

using Duration = std::chrono::milliseconds;

// Parses a Prometheus-style duration: one or more <integer><unit> parts with units ms, s, m, h, d,
// e.g. "5s", "1m30s", "250ms", into *out. InvalidArgument (and *out untouched) on anything else,
// including a bare number, a negative value or overflow.
Status ParseDuration(std::string_view text, Duration* out);

// Formats a duration the way ParseDuration accepts it ("1m30s", "250ms", "0s").
std::string FormatDuration(Duration d);

// The unit a PostgreSQL time setting is stored in when written without a unit.
enum class PgBaseUnit { kMilliseconds, kSeconds, kMinutes };

// Converts a PostgreSQL time setting value as written in pg_settings.setting or in
// pg_db_role_setting ("3500ms", "10s", "1min", "1.5h", " 20 s", "0", "-1") to seconds. A bare
// number is in base_unit. Accepts PostgreSQL's units us, ms, s, min, h, d. Negative values (-1
// means "disabled" for some settings) are returned as is. nullopt when the text is not a time
// value.
std::optional<double> ParsePgTimeSetting(std::string_view text, PgBaseUnit base_unit);

// The base unit of a PostgreSQL time setting by name, or the pg_settings.unit column ("ms", "s",
// "min"). Defaults to milliseconds for an unknown unit text.
PgBaseUnit PgBaseUnitFromUnitColumn(std::string_view unit);

}  // namespace pglock
