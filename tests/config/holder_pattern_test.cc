// holder_pattern validation: the shapes glibc's regex engine handles badly are refused with a
// reason, and the patterns people write for holders pass and match.
#include <gtest/gtest.h>

#include <string>

#include "exporter/config/holder_matcher.h"

namespace pglock {
namespace {

std::string Refusal(const std::string& pattern) {
  size_t groups = 0;
  std::string why;
  return ValidateHolderPattern(pattern, &groups, &why) ? "" : why;
}

TEST(HolderPattern, AcceptsTheShapesHoldersUse) {
  for (const char* p : {"^([^:]+):([0-9]+):", "^(job-[a-z]+)(-[0-9]+)*$", "^([a-z]+)@(.*)$",
                        "(host|pod)=([^ ]+)", "^[[:alnum:]_]+ ([0-9]{1,5})$", "a{0,3}b", "x?y+",
                        "^(a|b)+$", "[]x]+", "[^]x]*", "a)b", "\\(lit\\)*", "(ab){2}"}) {
    EXPECT_EQ(Refusal(p), "") << p;
  }
}

TEST(HolderPattern, RefusesStackedQuantifiers) {
  for (const char* p : {"a**", "a+*", "a{2}+", "[ab]?*", "(x)+?"}) {
    EXPECT_NE(Refusal(p).find("stacked quantifiers"), std::string::npos) << p;
  }
}

TEST(HolderPattern, RefusesAQuantifierOnWhatCanMatchNothing) {
  // "(^()*)*^" makes glibc's regexec loop for ever on an empty holder.
  for (const char* p : {"(^()*)*^", "((()#*^(())^(())*))*^(())", "(a*)*", "()+", "(a|)*",
                        "(x?y*){3}", "(a{0,2})+", "($)*", "(\\b)+"}) {
    EXPECT_NE(Refusal(p).find("can match the empty string"), std::string::npos) << p;
  }
}

TEST(HolderPattern, RefusesBackReferencesAndDeepNesting) {
  EXPECT_NE(Refusal("(a)\\1").find("back-references"), std::string::npos);
  EXPECT_NE(Refusal(std::string(17, '(') + "a" + std::string(17, ')')).find("nested deeper"),
            std::string::npos);
  EXPECT_EQ(Refusal(std::string(16, '(') + "a" + std::string(16, ')')), "");
}

TEST(HolderPattern, RefusesInvalidAndLongPatterns) {
  EXPECT_NE(Refusal("^([a-z").find("invalid POSIX extended"), std::string::npos);
  EXPECT_NE(Refusal(std::string(kMaxHolderPatternBytes + 1, 'a')).find("longer than"),
            std::string::npos);
}

TEST(HolderPattern, AnAcceptedPatternSplitsTheHolder) {
  const std::string p = "^(job-[a-z]+)(-[0-9]+)*$";
  ASSERT_EQ(Refusal(p), "");
  HolderMatcher m(p);
  const auto parts = m.Match("job-mail-1-22");
  ASSERT_NE(parts, nullptr);
  EXPECT_EQ((*parts)[0], "job-mail");
  EXPECT_EQ((*parts)[1], "-22");
  EXPECT_EQ(m.Match("cron-1"), nullptr);
}

}  // namespace
}  // namespace pglock
