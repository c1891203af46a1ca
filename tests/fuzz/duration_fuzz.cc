// Durations and PostgreSQL time settings: no crash on any input, and every accepted duration
// formats to text that parses back to the same value.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "exporter/util/duration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pglock::Duration d{0};
  if (pglock::ParseDuration(text, &d).ok()) {
    if (d.count() < 0) std::abort();
    pglock::Duration again{-1};
    if (!pglock::ParseDuration(pglock::FormatDuration(d), &again).ok() || again != d) std::abort();
  }
  for (auto unit : {pglock::PgBaseUnit::kMilliseconds, pglock::PgBaseUnit::kSeconds,
                    pglock::PgBaseUnit::kMinutes}) {
    (void)pglock::ParsePgTimeSetting(text, unit);
  }
  return 0;
}
