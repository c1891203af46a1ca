// Families writes the exposition text itself: the exact bytes of every form a series takes (its
// labels escaped and sanitised, each kind of value, a histogram), a repeated series dropped with
// the first kept, families in first-use order however their series interleave, and promtool's
// verdict on all of it.
#include "exporter/metrics/families.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "exporter/metrics/labels.h"
#include "tests/support/metrics_text.h"

namespace pglock {
namespace {

using prometheus::MetricType;

const MetricDesc kHeld{"t_held", MetricType::Gauge, "Held now.", {"target", "lock"}};
const MetricDesc kEnded{"t_ended_total", MetricType::Counter, "Ended \\ with a\nnewline.", {}};
const MetricDesc kSeconds{"t_seconds", MetricType::Histogram, "Seconds.", {"target"}};
const MetricDesc kBare{"t_bare", MetricType::Histogram, "", {}};

TEST(FamiliesText, EachFormOfASeriesByteForByte) {
  Families f;
  f.Add(kHeld, {"a", "job-1"}, 1);
  f.Add(kEnded, {}, 4498);
  f.Add(kHeld, {"a", "q\"uo\\te\nline"}, 0.1);
  f.AddHistogram(kSeconds, {"a"}, {0.5, 10}, {1, 2}, 2.25, 3);
  f.AddHistogram(kBare, {}, {1}, {0}, 0, 0);
  EXPECT_EQ(f.Text(),
            "# HELP t_held Held now.\n"
            "# TYPE t_held gauge\n"
            "t_held{target=\"a\",lock=\"job-1\"} 1\n"
            // The newline is a control character: sanitised to U+FFFD before escaping.
            "t_held{target=\"a\",lock=\"q\\\"uo\\\\te\xEF\xBF\xBDline\"} 0.1\n"
            "# HELP t_ended_total Ended \\\\ with a\\nnewline.\n"
            "# TYPE t_ended_total counter\n"
            "t_ended_total 4498\n"
            "# HELP t_seconds Seconds.\n"
            "# TYPE t_seconds histogram\n"
            "t_seconds_count{target=\"a\"} 3\n"
            "t_seconds_sum{target=\"a\"} 2.25\n"
            "t_seconds_bucket{target=\"a\",le=\"0.5\"} 1\n"
            "t_seconds_bucket{target=\"a\",le=\"10\"} 2\n"
            "t_seconds_bucket{target=\"a\",le=\"+Inf\"} 3\n"
            "# TYPE t_bare histogram\n"
            "t_bare_count 0\n"
            "t_bare_sum 0\n"
            "t_bare_bucket{le=\"1\"} 0\n"
            "t_bare_bucket{le=\"+Inf\"} 0\n");
}

TEST(FamiliesText, ValuesAsTheFormatSpellsThem) {
  const MetricDesc d{"t_value", MetricType::Gauge, "", {"i"}};
  Families f;
  const double values[] = {0,
                           -0.0,
                           2.0 / 3,
                           1777000000.123,
                           123456789012,
                           1e20,
                           1.5e-7,
                           std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  for (size_t i = 0; i < std::size(values); ++i) f.Add(d, {std::to_string(i)}, values[i]);
  EXPECT_EQ(f.Text(),
            "# TYPE t_value gauge\n"
            "t_value{i=\"0\"} 0\n"
            "t_value{i=\"1\"} -0\n"
            "t_value{i=\"2\"} 0.6666666666666666\n"
            "t_value{i=\"3\"} 1777000000.123\n"
            "t_value{i=\"4\"} 123456789012\n"
            "t_value{i=\"5\"} 1e+20\n"
            "t_value{i=\"6\"} 1.5e-07\n"
            "t_value{i=\"7\"} NaN\n"
            "t_value{i=\"8\"} +Inf\n"
            "t_value{i=\"9\"} -Inf\n");
}

// Two rows whose labels sanitise alike (different invalid bytes, a control character against
// U+FFFD itself) are one series: the first is kept, and whatever follows is written whole.
TEST(FamiliesText, ARepeatedSeriesIsDroppedAndTheFirstKept) {
  Families f;
  f.Add(kHeld, {"a", "x\xFF"}, 1);
  f.Add(kHeld, {"a", "x\xFE"}, 2);
  f.Add(kHeld, {"a", "x\x01"}, 3);
  f.Add(kHeld, {"a", "y"}, 4);
  f.AddHistogram(kSeconds, {"a"}, {1}, {1}, 1, 1);
  f.AddHistogram(kSeconds, {"a"}, {1}, {2}, 2, 2);
  f.Add(kEnded, {}, 1);
  f.Add(kEnded, {}, 2);
  const auto samples = testing::ParseSamples(f.Text());
  EXPECT_EQ(testing::Select(samples, "t_held").size(), 2u);
  EXPECT_EQ(testing::Value(samples, "t_held", {{"lock", "x\xEF\xBF\xBD"}}), 1);
  EXPECT_EQ(testing::Value(samples, "t_held", {{"lock", "y"}}), 4);
  EXPECT_EQ(testing::Select(samples, "t_seconds_count").size(), 1u);
  EXPECT_EQ(testing::Value(samples, "t_seconds_count"), 1);
  EXPECT_EQ(testing::Select(samples, "t_seconds_bucket").size(), 2u);
  EXPECT_EQ(testing::Select(samples, "t_ended_total").size(), 1u);
  EXPECT_EQ(testing::Value(samples, "t_ended_total"), 1);
}

// Enough series to grow the table of label blocks many times: every one distinct is kept, every
// repeat dropped, wherever it lands.
TEST(FamiliesText, ThousandsOfSeriesAndTheirRepeats) {
  Families f;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 5000; ++i) f.Add(kHeld, {"a", "job-" + std::to_string(i)}, round);
  }
  const auto samples = testing::ParseSamples(f.Text());
  ASSERT_EQ(samples.size(), 5000u);
  EXPECT_EQ(testing::Sum(samples, "t_held"), 0);  // the first round's, all of them
}

// A family's series stay together under its one TYPE line, in the order the family was first
// used, when collectors add them target by target.
TEST(FamiliesText, FamiliesInFirstUseOrderWithTheirSeriesTogether) {
  const MetricDesc up{"t_up", MetricType::Gauge, "Up.", {"target"}};
  Families f;
  for (const char* t : {"a", "b", "c"}) {
    f.Add(up, {t}, 1);
    f.Add(kHeld, {t, "l"}, 1);
  }
  const auto families = testing::ParseFamilies(f.Text());
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "t_up");
  EXPECT_EQ(families[1].name, "t_held");
  EXPECT_EQ(families[0].metric.size(), 3u);
  EXPECT_EQ(families[1].metric.size(), 3u);
}

TEST(FamiliesText, AValueCountThatDoesNotMatchTheLabelsIsNoSeries) {
  Families f;
  f.Add(kHeld, {"a"}, 1);
  f.Add(kHeld, std::vector<std::string>{"a", "b", "c"}, 1);
  f.AddHistogram(kSeconds, {}, {1}, {1}, 1, 1);
  f.AddHistogram(kSeconds, {"a"}, {1, 2}, {1}, 1, 1);
  EXPECT_EQ(testing::ParseSamples(f.Text()).size(), 0u);
}

TEST(FamiliesText, PromtoolAcceptsEveryForm) {
  Families f;
  f.Add(kHeld, {"a", "q\"uo\\te\nline \xFF"}, std::numeric_limits<double>::quiet_NaN());
  f.Add(kHeld, {"a", std::string(1000, 'x')}, -std::numeric_limits<double>::infinity());
  f.Add(kEnded, {}, 1e20);
  f.AddHistogram(kSeconds, {"a"}, {0.5, 10}, {1, 2}, 2.25, 3);
  f.AddHistogram({"t_bare", MetricType::Histogram, "Bare.", {}}, {}, {1}, {0}, 0, 0);
  std::string out;
  EXPECT_TRUE(testing::PromtoolCheck(f.Text(), &out)) << out << "\n" << f.Text();
}

}  // namespace
}  // namespace pglock
