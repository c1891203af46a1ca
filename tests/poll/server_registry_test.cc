#include <gtest/gtest.h>

#include <string>

#include "exporter/poll/server_identity.h"
#include "tests/support/log_capture.h"

namespace pglock {
namespace {

using testing::LogCapture;

constexpr char kSame[] = "poll the same PostgreSQL server";

ServerIdentity Server(const std::string& key) { return {key, "system_identifier " + key, key}; }

TEST(ServerRegistryTest, TwoTargetsOnOneServerAreWarnedAboutOnce) {
  LogCapture log;
  ServerRegistry r;
  r.Report(1, "b", Server("s1"));
  EXPECT_EQ(log.Count(kSame), 0);
  r.Report(2, "a", Server("s1"));
  EXPECT_EQ(log.Count("targets a and b poll the same PostgreSQL server (system_identifier s1)"), 1)
      << log.Text();
  // A reconnect reports again: no new warning.
  r.Report(1, "b", Server("s1"));
  r.Report(2, "a", Server("s1"));
  EXPECT_EQ(log.Count(kSame), 1) << log.Text();
}

TEST(ServerRegistryTest, OtherServersAndUnknownIdentitiesAreQuiet) {
  LogCapture log;
  ServerRegistry r;
  r.Report(1, "a", Server("s1"));
  r.Report(2, "b", Server("s2"));
  r.Report(3, "c", Server(""));
  r.Report(4, "d", Server(""));
  EXPECT_EQ(log.Count(kSame), 0) << log.Text();
}

TEST(ServerRegistryTest, ManyTargetsOnOneServerLogOneLinePerTargetThatJoins) {
  LogCapture log;
  ServerRegistry r;
  for (int i = 0; i < 12; ++i) {
    r.Report(i + 1, "t" + std::to_string(10 + i), Server("s1"));
  }
  EXPECT_EQ(log.Count(kSame), 11) << log.Text();
  EXPECT_EQ(log.Count("targets t10, t11, t12, t13, t14, t15, t16, t17 and 4 more poll"), 1)
      << log.Text();
}

TEST(ServerRegistryTest, EachReloadWarnsOnceMoreAndRetiredTargetsDoNotCount) {
  LogCapture log;
  ServerRegistry r;
  r.Report(1, "a", Server("s1"));
  r.Report(2, "b", Server("s1"));
  r.Report(3, "c", Server("s2"));
  r.Report(4, "d", Server("s2"));
  EXPECT_EQ(log.Count(kSame), 2);
  // A reload that keeps every poller: one line per server.
  r.BeginReload();
  r.WarnAll();
  EXPECT_EQ(log.Count("targets a and b"), 2) << log.Text();
  EXPECT_EQ(log.Count("targets c and d"), 2) << log.Text();
  // A reload that removes d: its late report is ignored, and c is alone on s2.
  r.BeginReload();
  r.Retire(4);
  r.Report(4, "d", Server("s2"));
  r.WarnAll();
  EXPECT_EQ(log.Count("targets a and b"), 3) << log.Text();
  EXPECT_EQ(log.Count("targets c and d"), 2) << log.Text();
}

}  // namespace
}  // namespace pglock
