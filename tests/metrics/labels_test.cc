#include "exporter/metrics/labels.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>

#include "tests/support/utf8_check.h"

namespace pglock {
namespace {

using testing::IsValidUtf8;

const std::string kFffd = "\xEF\xBF\xBD";

bool HasControl(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x20 || b == 0x7F) return true;
    if (b == 0xC2 && i + 1 < s.size() && static_cast<uint8_t>(s[i + 1]) < 0xA0) return true;
  }
  return false;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), std::string(suffix)) == 0;
}

TEST(SanitizeLabelValueTest, KeepsValidUtf8AndPunctuation) {
  for (const std::string& s :
       {std::string(""), std::string("worker-1"),
        std::string("h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C"), std::string("\xF0\x9F\x98\x80 emoji"),
        std::string("quote\" back\\slash {}=,"), std::string("nbsp\xC2\xA0ok"),
        std::string("max \xF4\x8F\xBF\xBF")}) {
    EXPECT_EQ(SanitizeLabelValue(s), s);
  }
}

TEST(SanitizeLabelValueTest, ReplacesInvalidBytes) {
  EXPECT_EQ(SanitizeLabelValue("a\xFF"
                               "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(SanitizeLabelValue("\x80"), kFffd);
  EXPECT_EQ(SanitizeLabelValue("\xFE\xFE"), kFffd + kFffd);
  // A sequence cut short, in the middle and at the end.
  EXPECT_EQ(SanitizeLabelValue("\xE4\xB8x"), kFffd + kFffd + "x");
  EXPECT_EQ(SanitizeLabelValue("x\xF0\x9F\x98"), "x" + kFffd + kFffd + kFffd);
}

TEST(SanitizeLabelValueTest, ReplacesOverlongsSurrogatesAndOutOfRange) {
  // Overlong "/" in two and three bytes.
  EXPECT_EQ(SanitizeLabelValue("\xC0\xAF"), kFffd + kFffd);
  EXPECT_EQ(SanitizeLabelValue("\xE0\x80\xAF"), kFffd + kFffd + kFffd);
  // Overlong four-byte encoding of U+FFFF.
  EXPECT_EQ(SanitizeLabelValue("\xF0\x8F\xBF\xBF"), kFffd + kFffd + kFffd + kFffd);
  // UTF-16 surrogate U+D800 encoded as UTF-8 (CESU).
  EXPECT_EQ(SanitizeLabelValue("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  // Above U+10FFFF.
  EXPECT_EQ(SanitizeLabelValue("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(SanitizeLabelValue("\xF5\x80\x80\x80"), kFffd + kFffd + kFffd + kFffd);
}

TEST(SanitizeLabelValueTest, ReplacesControlCharacters) {
  EXPECT_EQ(SanitizeLabelValue(std::string("a\0b", 3)), "a" + kFffd + "b");
  EXPECT_EQ(SanitizeLabelValue("line1\nline2\r\t"), "line1" + kFffd + "line2" + kFffd + kFffd);
  EXPECT_EQ(SanitizeLabelValue("\x1B[31mred"), kFffd + "[31mred");
  EXPECT_EQ(SanitizeLabelValue("del\x7F"), "del" + kFffd);
  // C1 controls U+0080 and U+009F (NEL U+0085 in between).
  EXPECT_EQ(SanitizeLabelValue("\xC2\x80\xC2\x85\xC2\x9F"), kFffd + kFffd + kFffd);
}

TEST(SanitizeLabelValueTest, ShortValuesAreNotTruncated) {
  const std::string exact(kMaxLabelValueBytes, 'a');
  EXPECT_EQ(SanitizeLabelValue(exact), exact);
}

// The kept prefix of a truncated value, checking the "#<8 hex>" + marker suffix on the way.
std::string KeptPrefix(const std::string& out) {
  EXPECT_TRUE(EndsWith(out, kTruncatedMarker)) << out;
  const size_t suffix = 9 + kTruncatedMarker.size();
  EXPECT_GE(out.size(), suffix);
  const std::string hash = out.substr(out.size() - suffix, 9);
  EXPECT_EQ(hash[0], '#') << out;
  for (size_t i = 1; i < hash.size(); ++i) EXPECT_TRUE(std::isxdigit(hash[i])) << out;
  return out.substr(0, out.size() - suffix);
}

TEST(SanitizeLabelValueTest, LongAsciiIsCutAtTheLimitWithMarker) {
  const std::string s = SanitizeLabelValue(std::string(kMaxLabelValueBytes + 1, 'a'));
  EXPECT_EQ(KeptPrefix(s), std::string(kMaxLabelValueBytes - 9, 'a'));
  EXPECT_LE(s.size(), kMaxLabelValueBytes + kTruncatedMarker.size());
}

TEST(SanitizeLabelValueTest, LongValuesSharingAPrefixStayDistinct) {
  const std::string a = std::string(1000, 'x') + "a", b = std::string(1000, 'x') + "b";
  EXPECT_NE(SanitizeLabelValue(a), SanitizeLabelValue(b));
  EXPECT_EQ(SanitizeLabelValue(a), SanitizeLabelValue(a));
}

TEST(SanitizeLabelValueTest, TruncationKeepsWholeCharacters) {
  // 3-byte characters: the value is too long, so 256 - 9 bytes are kept, i.e. 82 characters.
  std::string in;
  for (int i = 0; i < 100; ++i) in += "\xE4\xB8\x96";
  const std::string out = SanitizeLabelValue(in);
  const std::string kept = KeptPrefix(out);
  EXPECT_EQ(kept.size(), 246u);  // 82 characters fit in 256 - 9 bytes
  EXPECT_TRUE(IsValidUtf8(out));
  EXPECT_EQ(kept, in.substr(0, 246));

  // 4-byte characters: 61 fit in 247 bytes.
  std::string emoji;
  for (int i = 0; i < 65; ++i) emoji += "\xF0\x9F\x98\x80";
  EXPECT_EQ(KeptPrefix(SanitizeLabelValue(emoji)), emoji.substr(0, 244));
}

TEST(SanitizeLabelValueTest, ReplacementsCountTowardsTheLimit) {
  // 200 invalid bytes become 200 three-byte replacements: 82 fit before the hash suffix.
  const std::string out = SanitizeLabelValue(std::string(200, '\xFF'));
  std::string want;
  for (int i = 0; i < 82; ++i) want += kFffd;
  EXPECT_EQ(KeptPrefix(out), want);
}

TEST(SanitizeLabelValueTest, HundredKilobytesOfHostileBytes) {
  std::string in;
  for (size_t i = 0; i < 100 * 1024; ++i) in += static_cast<char>((i * 131 + 7) % 256);
  const std::string out = SanitizeLabelValue(in);
  EXPECT_LE(out.size(), kMaxLabelValueBytes + kTruncatedMarker.size());
  EXPECT_TRUE(EndsWith(out, kTruncatedMarker));
  EXPECT_TRUE(IsValidUtf8(out));
  EXPECT_FALSE(HasControl(out));
}

TEST(SanitizeLabelValueTest, EveryByteAloneGivesValidOutput) {
  for (int b = 0; b < 256; ++b) {
    const std::string out = SanitizeLabelValue(std::string(1, static_cast<char>(b)));
    EXPECT_TRUE(IsValidUtf8(out)) << b;
    EXPECT_FALSE(HasControl(out)) << b;
    if (b >= 0x20 && b < 0x7F) {
      EXPECT_EQ(out, std::string(1, static_cast<char>(b)));
    } else {
      EXPECT_EQ(out, kFffd) << b;
    }
  }
}

}  // namespace
}  // namespace pglock
