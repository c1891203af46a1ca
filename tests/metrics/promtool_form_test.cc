// The form under which the tests check an exposition text with promtool once a run: texts that
// promtool judges alike share it, texts it may judge differently do not.
#include <gtest/gtest.h>

#include "tests/support/metrics_text.h"

namespace pglock::testing {
namespace {

TEST(PromtoolFormTest, NumbersAndPlainLabelValuesDoNotMatter) {
  const std::string a =
      "# HELP x_seconds A time.\n# TYPE x_seconds gauge\n"
      "x_seconds{target=\"it\",application_name=\"billing-worker\",pid=\"4711\"} 0.25\n"
      "x_seconds{target=\"it\",application_name=\"report\",pid=\"4712\"} 1e-05\n";
  const std::string b =
      "# HELP x_seconds A time.\n# TYPE x_seconds gauge\n"
      "x_seconds{target=\"one\",application_name=\"leaky-worker\",pid=\"9\"} 3\n"
      "x_seconds{target=\"one\",application_name=\"session-6\",pid=\"10\"} -12.5E+3\n";
  EXPECT_EQ(PromtoolForm(a), PromtoolForm(b));
}

TEST(PromtoolFormTest, WhatPromtoolChecksStaysApart) {
  const std::string base = "# HELP x A count.\n# TYPE x gauge\nx{a=\"p\"} 1\nx{a=\"q\"} 2\n";
  const std::string variants[] = {
      // a series named twice: promtool refuses it
      "# HELP x A count.\n# TYPE x gauge\nx{a=\"p\"} 1\nx{a=\"p\"} 2\n",
      // an escape in a value
      "# HELP x A count.\n# TYPE x gauge\nx{a=\"p\\\"\"} 1\nx{a=\"q\"} 2\n",
      // bytes beyond ASCII
      "# HELP x A count.\n# TYPE x gauge\nx{a=\"\xc3\xa9\"} 1\nx{a=\"q\"} 2\n",
      // a value that is not a decimal number
      "# HELP x A count.\n# TYPE x gauge\nx{a=\"p\"} NaN\nx{a=\"q\"} 2\n",
      "# HELP x A count.\n# TYPE x gauge\nx{a=\"p\"} 1,5\nx{a=\"q\"} 2\n",
      "# HELP x A count.\n# TYPE x gauge\nx{a=\"p\"} 1e\nx{a=\"q\"} 2\n",
      // another label name, type or help
      "# HELP x A count.\n# TYPE x gauge\nx{b=\"p\"} 1\nx{b=\"q\"} 2\n",
      "# HELP x A count.\n# TYPE x counter\nx{a=\"p\"} 1\nx{a=\"q\"} 2\n",
      "# HELP x Another.\n# TYPE x gauge\nx{a=\"p\"} 1\nx{a=\"q\"} 2\n",
  };
  for (const std::string& v : variants) EXPECT_NE(PromtoolForm(base), PromtoolForm(v)) << v;
}

TEST(PromtoolFormTest, BucketBoundsAreKept) {
  const std::string a = "# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 1\n";
  const std::string b = "# TYPE h histogram\nh_bucket{le=\"0.25\"} 1\nh_bucket{le=\"+Inf\"} 1\n";
  EXPECT_NE(PromtoolForm(a), PromtoolForm(b));
}

}  // namespace
}  // namespace pglock::testing
