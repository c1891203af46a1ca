#include "exporter/metrics/labels.h"

#include <cstdint>

namespace pglock {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i], or 0 when invalid (overlongs, surrogates and code
// points above U+10FFFF are invalid too).
size_t ValidSequence(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  uint32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return len;
}

bool IsControl(std::string_view s, size_t i, size_t len) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (len == 1) return b0 < 0x20 || b0 == 0x7F;
  // C1 controls U+0080..U+009F are encoded as C2 80..C2 9F.
  return len == 2 && b0 == 0xC2 && static_cast<uint8_t>(s[i + 1]) < 0xA0;
}

}  // namespace

std::string ToValidUtf8(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  size_t i = 0;
  while (i < raw.size()) {
    const size_t len = ValidSequence(raw, i);
    if (len == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(raw.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string SanitizeLabelValue(std::string_view raw) {
  std::string out;
  out.reserve(std::min(raw.size(), kMaxLabelValueBytes) + kTruncatedMarker.size());
  size_t i = 0;
  while (i < raw.size()) {
    size_t len = ValidSequence(raw, i);
    std::string_view piece;
    if (len == 0) {
      piece = kReplacement;
      len = 1;
    } else if (IsControl(raw, i, len)) {
      piece = kReplacement;
    } else {
      piece = raw.substr(i, len);
    }
    if (out.size() + piece.size() > kMaxLabelValueBytes) {
      out += kTruncatedMarker;
      return out;
    }
    out += piece;
    i += len;
  }
  return out;
}

}  // namespace pglock
