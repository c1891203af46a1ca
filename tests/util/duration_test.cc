#include "exporter/util/duration.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

namespace pglock {
namespace {

using std::chrono::milliseconds;

// The parsed duration; nullopt when ParseDuration fails.
std::optional<Duration> Parsed(std::string_view text) {
  Duration d{0};
  if (!ParseDuration(text, &d).ok()) return std::nullopt;
  return d;
}

// The message of ParseDuration's failure; "" when it parses.
std::string ErrorOf(std::string_view text) {
  Duration d{0};
  return ParseDuration(text, &d).message();
}

TEST(ParseDurationTest, AcceptsSingleUnits) {
  EXPECT_EQ(Parsed("5s"), milliseconds(5'000));
  EXPECT_EQ(Parsed("250ms"), milliseconds(250));
  EXPECT_EQ(Parsed("2m"), milliseconds(120'000));
  EXPECT_EQ(Parsed("1h"), milliseconds(3'600'000));
  EXPECT_EQ(Parsed("2d"), milliseconds(2 * 86'400'000));
  EXPECT_EQ(Parsed("0s"), milliseconds(0));
}

TEST(ParseDurationTest, AddsCompoundParts) {
  EXPECT_EQ(Parsed("1m30s"), milliseconds(90'000));
  EXPECT_EQ(Parsed("1h2m3s4ms"), milliseconds(3'723'004));
  EXPECT_EQ(Parsed("1d12h"), milliseconds(36 * 3'600'000));
}

TEST(ParseDurationTest, RejectsEmptyWithMessage) {
  EXPECT_EQ(Parsed(""), std::nullopt);
  EXPECT_NE(ErrorOf("").find("empty"), std::string::npos) << ErrorOf("");
}

TEST(ParseDurationTest, RejectsBareNumber) {
  EXPECT_EQ(Parsed("5"), std::nullopt);
  EXPECT_NE(ErrorOf("5").find("missing unit"), std::string::npos) << ErrorOf("5");
}

TEST(ParseDurationTest, RejectsUnknownUnit) {
  EXPECT_EQ(Parsed("5x"), std::nullopt);
  EXPECT_NE(ErrorOf("5x").find("unknown unit \"x\""), std::string::npos) << ErrorOf("5x");
  EXPECT_EQ(Parsed("5min"), std::nullopt);
  EXPECT_EQ(Parsed("5S"), std::nullopt);
}

TEST(ParseDurationTest, RejectsNegativeFractionalAndSpaces) {
  EXPECT_EQ(Parsed("-1s"), std::nullopt);
  EXPECT_EQ(Parsed("1.5s"), std::nullopt);
  EXPECT_EQ(Parsed(" 5s"), std::nullopt);
  EXPECT_EQ(Parsed("5s "), std::nullopt);
  EXPECT_EQ(Parsed("s"), std::nullopt);
}

TEST(ParseDurationTest, RejectsOverflow) {
  // Does not fit in int64 at all.
  EXPECT_EQ(Parsed("99999999999999999999999s"), std::nullopt);
  EXPECT_NE(ErrorOf("99999999999999999999999s").find("out of range"), std::string::npos);
  // Fits in int64 as a number, but not once multiplied into milliseconds.
  EXPECT_EQ(Parsed("9223372036854775d"), std::nullopt);
  EXPECT_NE(ErrorOf("9223372036854775d").find("out of range"), std::string::npos);
  // Each part fits; their sum does not.
  EXPECT_EQ(Parsed("52000000d52000000d"), std::nullopt);
}

TEST(ParseDurationTest, FailureIsInvalidArgumentAndLeavesTheOutputAlone) {
  Duration d{1234};
  const Status s = ParseDuration("bogus", &d);
  EXPECT_EQ(s.kind(), Status::Kind::kInvalidArgument);
  EXPECT_EQ(d, milliseconds(1234));
  EXPECT_TRUE(ParseDuration("5s", &d).ok());
  EXPECT_EQ(d, milliseconds(5'000));
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
    EXPECT_EQ(Parsed(text), milliseconds(ms)) << text;
  }
  for (const char* text : {"1m30s", "250ms", "2d", "1h1s"}) {
    const auto d = Parsed(text);
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
