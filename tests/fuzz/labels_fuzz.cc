// Label sanitising: any bytes in, valid UTF-8 without control characters out, bounded length,
// idempotent.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "exporter/log.h"
#include "exporter/metrics/labels.h"
#include "exporter/util/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string raw(reinterpret_cast<const char*>(data), size);
  const std::string clean = pglock::SanitizeLabelValue(raw);
  if (clean.size() > pglock::kMaxLabelValueBytes + pglock::kTruncatedMarker.size()) std::abort();
  if (pglock::ToValidUtf8(clean) != clean) std::abort();
  for (unsigned char c : clean) {
    if (c < 0x20 || c == 0x7F) std::abort();
  }
  if (raw.size() <= pglock::kMaxLabelValueBytes / 3 && pglock::SanitizeLabelValue(clean) != clean) {
    std::abort();
  }
  const std::string json = pglock::JsonEscape(raw);
  for (unsigned char c : json) {
    if (c < 0x20) std::abort();
  }
  return 0;
}
