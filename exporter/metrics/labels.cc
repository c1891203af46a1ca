#include "exporter/metrics/labels.h"

#include <cstdint>
#include <cstdio>

#include "exporter/util/utf8.h"

namespace pglock {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr size_t kHashSuffixBytes = 9;                     // "#" + 8 hex digits

bool IsControl(std::string_view s, size_t i, size_t len) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (len == 1) return b0 < 0x20 || b0 == 0x7F;
  // C1 controls U+0080..U+009F are encoded as C2 80..C2 9F.
  return len == 2 && b0 == 0xC2 && static_cast<uint8_t>(s[i + 1]) < 0xA0;
}

}  // namespace

std::string SanitizeLabelValue(std::string_view raw) {
  std::string out;
  AppendSanitizedLabelValue(raw, &out);
  return out;
}

void AppendSanitizedLabelValue(std::string_view raw, std::string* appended_to) {
  // Built in a string of its own only when the bytes need more than copying.
  bool plain = raw.size() <= kMaxLabelValueBytes;
  for (size_t k = 0; plain && k < raw.size(); ++k) {
    const auto b = static_cast<uint8_t>(raw[k]);
    plain = b >= 0x20 && b < 0x7F;
  }
  if (plain) {
    appended_to->append(raw);
    return;
  }
  std::string out;
  out.reserve(std::min(raw.size(), kMaxLabelValueBytes) + kTruncatedMarker.size() + 16);
  size_t i = 0;
  // Sanitise until the result is known to be too long (so 100 KB inputs cost little).
  while (i < raw.size() && out.size() <= kMaxLabelValueBytes) {
    size_t len = Utf8SequenceLength(raw, i);
    if (len == 0) {
      out += kReplacement;
      len = 1;
    } else if (IsControl(raw, i, len)) {
      out += kReplacement;
    } else {
      out.append(raw.substr(i, len));
    }
    i += len;
  }
  if (out.size() <= kMaxLabelValueBytes && i == raw.size()) {
    appended_to->append(out);
    return;
  }
  // Too long: cut at a character boundary, leaving room for "#<hash>" and the marker. FNV-1a of
  // the raw value keeps two long values that share a prefix distinct.
  out.resize(Utf8CutPoint(out, kMaxLabelValueBytes - kHashSuffixBytes));
  uint32_t hash = 2166136261u;
  for (unsigned char c : raw) hash = (hash ^ c) * 16777619u;
  char suffix[kHashSuffixBytes + 1];
  std::snprintf(suffix, sizeof suffix, "#%08x", hash);
  out += suffix;
  out += kTruncatedMarker;
  appended_to->append(out);
}

}  // namespace pglock
