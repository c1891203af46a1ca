// ToValidUtf8 (exporter/util/utf8.h): invalid sequences replaced, nothing else touched.
#include "exporter/util/utf8.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/utf8_check.h"

namespace pglock {
namespace {

using testing::IsValidUtf8;

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8CutPointTest, NeverEndsInsideACharacter) {
  const std::string s = "ab\u00e9\u20ac";  // a b é (2 bytes) € (3 bytes): 7 bytes
  EXPECT_EQ(Utf8CutPoint(s, 10), 7u);
  EXPECT_EQ(Utf8CutPoint(s, 7), 7u);
  EXPECT_EQ(Utf8CutPoint(s, 6), 4u);  // inside the euro sign: before it
  EXPECT_EQ(Utf8CutPoint(s, 5), 4u);
  EXPECT_EQ(Utf8CutPoint(s, 4), 4u);
  EXPECT_EQ(Utf8CutPoint(s, 3), 2u);  // inside é: before it
  EXPECT_EQ(Utf8CutPoint(s, 0), 0u);
}

TEST(ToValidUtf8Test, ReplacesOnlyInvalidSequences) {
  EXPECT_EQ(ToValidUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(ToValidUtf8("tab\tnl\n\x01\x7F\xC2\x85"), "tab\tnl\n\x01\x7F\xC2\x85");
  EXPECT_EQ(ToValidUtf8("a\xFF"
                        "b\xC0\xAF"),
            "a" + kFffd + "b" + kFffd + kFffd);
  EXPECT_EQ(ToValidUtf8("\xED\xB0\x80"), kFffd + kFffd + kFffd);
}

TEST(ToValidUtf8Test, HasNoLengthCap) {
  const std::string big(100 * 1024, 'x');
  EXPECT_EQ(ToValidUtf8(big), big);
  const std::string bad = ToValidUtf8(std::string(1000, '\x80'));
  EXPECT_EQ(bad.size(), 3000u);
  EXPECT_TRUE(IsValidUtf8(bad));
}

}  // namespace
}  // namespace pglock
