#include "exporter/metrics/labels.h"

#include <cstdint>

#include "exporter/util/utf8.h"

namespace pglock {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

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
    const size_t len = Utf8SequenceLength(raw, i);
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
    size_t len = Utf8SequenceLength(raw, i);
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
