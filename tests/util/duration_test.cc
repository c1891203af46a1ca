#include "exporter/util/duration.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace pglock {
namespace {

using std::chrono::milliseconds;

TEST(ParseDurationTest, AcceptsSingleUnits) {
  EXPECT_EQ(ParseDuration("5s"), milliseconds(5'000));
  EXPECT_EQ(ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(ParseDuration("2m"), milliseconds(120'000));
  EXPECT_EQ(ParseDuration("1h"), milliseconds(3'600'000));
  EXPECT_EQ(ParseDuration("2d"), milliseconds(2 * 86'400'000));
  EXPECT_EQ(ParseDuration("0s"), milliseconds(0));
}

TEST(ParseDurationTest, AddsCompoundParts) {
  EXPECT_EQ(ParseDuration("1m30s"), milliseconds(90'000));
  EXPECT_EQ(ParseDuration("1h2m3s4ms"), milliseconds(3'723'004));
  EXPECT_EQ(ParseDuration("1d12h"), milliseconds(36 * 3'600'000));
}

TEST(ParseDurationTest, RejectsEmptyWithMessage) {
  std::string error;
  EXPECT_EQ(ParseDuration("", &error), std::nullopt);
  EXPECT_NE(error.find("empty"), std::string::npos) << error;
}

TEST(ParseDurationTest, RejectsBareNumber) {
  std::string error;
  EXPECT_EQ(ParseDuration("5", &error), std::nullopt);
  EXPECT_NE(error.find("missing unit"), std::string::npos) << error;
}

TEST(ParseDurationTest, RejectsUnknownUnit) {
  std::string error;
  EXPECT_EQ(ParseDuration("5x", &error), std::nullopt);
  EXPECT_NE(error.find("unknown unit \"x\""), std::string::npos) << error;
  EXPECT_EQ(ParseDuration("5min"), std::nullopt);
  EXPECT_EQ(ParseDuration("5S"), std::nullopt);
}

TEST(ParseDurationTest, RejectsNegativeFractionalAndSpaces) {
  EXPECT_EQ(ParseDuration("-1s"), std::nullopt);
  EXPECT_EQ(ParseDuration("1.5s"), std::nullopt);
  EXPECT_EQ(ParseDuration(" 5s"), std::nullopt);
  EXPECT_EQ(ParseDuration("5s "), std::nullopt);
  EXPECT_EQ(ParseDuration("s"), std::nullopt);
}

TEST(ParseDurationTest, RejectsOverflow) {
  std::string error;
  // Does not fit in int64 at all.
  EXPECT_EQ(ParseDuration("99999999999999999999999s", &error), std::nullopt);
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
  // Fits in int64 as a number, but not once multiplied into milliseconds.
  error.clear();
  EXPECT_EQ(ParseDuration("9223372036854775d", &error), std::nullopt);
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
  // Each part fits; their sum does not.
  EXPECT_EQ(ParseDuration("52000000d52000000d"), std::nullopt);
}

TEST(ParseDurationTest, ErrorIsOptional) {
  EXPECT_EQ(ParseDuration("bogus", nullptr), std::nullopt);
}

TEST(FormatDurationTest, UsesLargestUnitsFirst) {
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(milliseconds(5'000)), "5s");
  EXPECT_EQ(FormatDuration(milliseconds(90'000)), "1m30s");
  EXPECT_EQ(FormatDuration(milliseconds(86'400'000 + 3'600'000 + 60'000 + 1'000 + 1)),
            "1d1h1m1s1ms");
  EXPECT_EQ(FormatDuration(milliseconds(-1'500)), "-1s500ms");
}

TEST(FormatDurationTest, RoundTripsThroughParseDuration) {
  for (const int64_t ms : {int64_t{0}, int64_t{1}, int64_t{999}, int64_t{1'000}, int64_t{61'001},
                           int64_t{3'600'000}, int64_t{90'061'001}, int64_t{400} * 86'400'000}) {
    const std::string text = FormatDuration(milliseconds(ms));
    EXPECT_EQ(ParseDuration(text), milliseconds(ms)) << text;
  }
  for (const char* text : {"1m30s", "250ms", "2d", "1h1s"}) {
    const auto d = ParseDuration(text);
    ASSERT_TRUE(d.has_value()) << text;
    EXPECT_EQ(FormatDuration(*d), text);
  }
}

TEST(ParsePgTimeSettingTest, ExplicitUnits) {
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("2500us", PgBaseUnit::kMilliseconds), 0.0025);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("3500ms", PgBaseUnit::kMilliseconds), 3.5);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("10s", PgBaseUnit::kMilliseconds), 10);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("1min", PgBaseUnit::kMilliseconds), 60);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("2h", PgBaseUnit::kMilliseconds), 7200);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("1d", PgBaseUnit::kMilliseconds), 86400);
}

TEST(ParsePgTimeSettingTest, ExplicitUnitIgnoresBaseUnit) {
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("10s", PgBaseUnit::kMinutes), 10);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("500ms", PgBaseUnit::kSeconds), 0.5);
}

TEST(ParsePgTimeSettingTest, BareNumberUsesBaseUnit) {
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("2000", PgBaseUnit::kMilliseconds), 2);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("2000", PgBaseUnit::kSeconds), 2000);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("3", PgBaseUnit::kMinutes), 180);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("0", PgBaseUnit::kMilliseconds), 0);
}

TEST(ParsePgTimeSettingTest, ToleratesSpacesAroundNumberAndUnit) {
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting(" 20 s", PgBaseUnit::kMilliseconds), 20);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("20s ", PgBaseUnit::kMilliseconds), 20);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("\t7\n", PgBaseUnit::kSeconds), 7);
}

TEST(ParsePgTimeSettingTest, FractionsSignsAndExponents) {
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("1.5h", PgBaseUnit::kMilliseconds), 5400);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("0.5", PgBaseUnit::kSeconds), 0.5);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("+3s", PgBaseUnit::kMilliseconds), 3);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("1e3ms", PgBaseUnit::kMilliseconds), 1);
}

TEST(ParsePgTimeSettingTest, NegativeValuesAreNotRejected) {
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("-1", PgBaseUnit::kSeconds), -1);
  EXPECT_DOUBLE_EQ(*ParsePgTimeSetting("-1", PgBaseUnit::kMilliseconds), -0.001);
}

TEST(ParsePgTimeSettingTest, GarbageIsNullopt) {
  for (const char* text : {"", "   ", "abc", "s", "10x", "10 sec", "1.2.3s", ".", "-", "10s5",
                           "1e999", "nan", "inf"}) {
    EXPECT_EQ(ParsePgTimeSetting(text, PgBaseUnit::kMilliseconds), std::nullopt) << text;
  }
}

TEST(PgBaseUnitFromUnitColumnTest, MapsPgSettingsUnits) {
  EXPECT_EQ(PgBaseUnitFromUnitColumn("ms"), PgBaseUnit::kMilliseconds);
  EXPECT_EQ(PgBaseUnitFromUnitColumn("s"), PgBaseUnit::kSeconds);
  EXPECT_EQ(PgBaseUnitFromUnitColumn("min"), PgBaseUnit::kMinutes);
  EXPECT_EQ(PgBaseUnitFromUnitColumn(""), PgBaseUnit::kMilliseconds);
}

}  // namespace
}  // namespace pglock
