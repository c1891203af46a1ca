// Primaries and standbys against a real streaming standby of the test server: the role
// on pglock_postgres_info, lease tables read on a standby only with read_on_standby, the
// standby's own sessions still reported, and a promotion (pg_promote()) that switches the role
// without counting a restart or any loss. Prints the series of each node.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "exporter/poll/poller.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::Sample;
using testing::Select;
using testing::Sum;
using testing::SumPresent;
using testing::TestPoll;
using testing::TestPostgres;
using testing::TestSession;
using testing::Value;
using testing::WaitFor;

LeaseTableConfig Lease(const std::string& relation, bool read_on_standby) {
  LeaseTableConfig t;
  t.table = "public." + relation;
  t.schema = "public";
  t.relation = relation;
  t.read_on_standby = read_on_standby;
  return t;
}

// public.leases with the default (primary only) and public.leases_everywhere read on standbys.
TargetConfig Target(const std::string& name, const TestPostgres& pg) {
  TargetConfig t;
  t.name = name;
  t.dsn = pg.Dsn();
  t.leases = {Lease("leases", false), Lease("leases_everywhere", true)};
  return t;
}

std::string PollAndScrapeText(Poller& poller) {
  poller.PollOnceForTest();
  EXPECT_TRUE(poller.Latest()->up) << poller.Latest()->last_error;
  const std::string text = testing::Serialize({poller.Latest()});
  std::string out;
  EXPECT_TRUE(testing::PromtoolCheck(text, &out)) << out << "\n" << text;
  return text;
}

// The lines of the text about the node's role, its leases and its advisory locks, printed.
void PrintSeries(const std::string& title, const std::string& text) {
  std::printf("--- %s\n", title.c_str());
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    for (const char* p :
         {"pglock_postgres_info", "pglock_lease_", "pglock_leases{", "pglock_advisory_locks_held",
          "pglock_advisory_lock_held_seconds", "pglock_advisory_lock_losses_total"}) {
      if (line.rfind(p, 0) == 0) {
        std::printf("%s\n", line.c_str());
        break;
      }
    }
  }
}

std::string Role(const std::vector<Sample>& samples) {
  const auto info = Select(samples, "pglock_postgres_info");
  return info.size() == 1 ? info[0].labels.at("role") : "<" + std::to_string(info.size()) + ">";
}

// Every series of any lease metric for that table.
size_t LeaseSeries(const std::vector<Sample>& samples, const std::string& table) {
  size_t n = 0;
  for (const Sample& s : samples) {
    if (s.name.rfind("pglock_lease", 0) == 0 && s.labels.count("table") != 0 &&
        s.labels.at("table") == table) {
      ++n;
    }
  }
  return n;
}

class Standby : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* table : {"leases", "leases_everywhere"}) {
      Pg().Exec(std::string("CREATE TABLE IF NOT EXISTS ") + table +
                " (name text PRIMARY KEY, holder text, taken_at timestamptz, "
                "expires_at timestamptz)");
      Pg().Exec(std::string("INSERT INTO ") + table +
                " VALUES ('sweep', 'host-a:1', now(), now() + interval '1 hour') "
                "ON CONFLICT DO NOTHING");
    }
  }

  // A new standby for each test: a promotion ends its life as a standby.
  std::unique_ptr<TestPostgres> NewStandby() {
    std::string error;
    auto standby = Pg().StartStandby(&error);
    EXPECT_NE(standby, nullptr) << error;
    return standby;
  }
};

TEST_F(Standby, RoleOnBothAndLeasesOnlyWhereConfigured) {
  const auto standby = NewStandby();
  ASSERT_NE(standby, nullptr);
  ASSERT_EQ(standby->Scalar("SELECT pg_is_in_recovery()"), "t");
  // A session of the standby's own holds an advisory lock: still reported there.
  TestSession holder(standby->Dsn() + " application_name=standby-holder");
  holder.Query("SELECT pg_advisory_lock(4242)");

  Poller on_primary(Target("primary", Pg()), TestPoll({.timeout_ms = 10000}));
  Poller on_standby(Target("standby", *standby), TestPoll({.timeout_ms = 10000}));
  const std::string primary_text = PollAndScrapeText(on_primary);
  const std::string standby_text = PollAndScrapeText(on_standby);
  PrintSeries("primary", primary_text);
  PrintSeries("standby", standby_text);
  const auto primary = testing::ParseSamples(primary_text);
  const auto replica = testing::ParseSamples(standby_text);

  EXPECT_EQ(Role(primary), "primary");
  EXPECT_EQ(Role(replica), "standby");
  EXPECT_EQ(Value(primary, "pglock_lease_held", {{"table", "public.leases"}}), 1);
  EXPECT_EQ(Value(primary, "pglock_lease_held", {{"table", "public.leases_everywhere"}}), 1);
  // Not read on the standby: no series at all, pglock_lease_table_up included.
  EXPECT_EQ(LeaseSeries(replica, "public.leases"), 0u);
  EXPECT_EQ(Value(replica, "pglock_lease_table_up", {{"table", "public.leases_everywhere"}}), 1);
  EXPECT_EQ(Value(replica, "pglock_lease_held", {{"table", "public.leases_everywhere"}}), 1);
  EXPECT_EQ(Sum(replica, "pglock_advisory_locks_held"), 1);
  EXPECT_EQ(Select(replica, "pglock_advisory_lock_held_seconds",
                   {{"pid", std::to_string(holder.Pid())}, {"lock", "4242"}})
                .size(),
            1u);
}

TEST_F(Standby, PromotionSwitchesTheRoleWithoutLosses) {
  const auto standby = NewStandby();
  ASSERT_NE(standby, nullptr);
  TestSession holder(standby->Dsn() + " application_name=standby-holder");
  holder.Query("SELECT pg_advisory_lock(4242)");
  Poller poller(Target("node", *standby), TestPoll({.timeout_ms = 10000}));
  PollAndScrapeText(poller);
  const std::string before = PollAndScrapeText(poller);
  PrintSeries("standby before promotion", before);
  EXPECT_EQ(Role(testing::ParseSamples(before)), "standby");
  const std::string started = standby->Scalar("SELECT pg_postmaster_start_time()");

  ASSERT_EQ(standby->Scalar("SELECT pg_promote(true, 60)"), "t");
  ASSERT_TRUE(WaitFor(60, [&] { return standby->Scalar("SELECT pg_is_in_recovery()") == "f"; }));
  // What makes a promotion no restart: the postmaster, its sessions and their locks live on.
  EXPECT_EQ(standby->Scalar("SELECT pg_postmaster_start_time()"), started);
  EXPECT_EQ(holder.Query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = " +
                         std::to_string(holder.Pid())),
            "1");

  const std::string after = PollAndScrapeText(poller);
  PrintSeries("the same node after promotion", after);
  const auto samples = testing::ParseSamples(after);
  EXPECT_EQ(Role(samples), "primary");
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_losses_total"), 0);
  EXPECT_EQ(SumPresent(samples, "pglock_advisory_lock_releases_total"), 0);
  EXPECT_EQ(Select(samples, "pglock_advisory_lock_held_seconds",
                   {{"pid", std::to_string(holder.Pid())}, {"lock", "4242"}})
                .size(),
            1u);
  // Now the primary: the default table is read, and its first read is no transition (its
  // counters start at 0).
  EXPECT_EQ(Value(samples, "pglock_lease_held", {{"table", "public.leases"}}), 1);
  EXPECT_EQ(SumPresent(samples, "pglock_lease_transitions_total", {{"table", "public.leases"}}), 0);
  EXPECT_EQ(SumPresent(samples, "pglock_lease_transitions_total"), 0);
}

}  // namespace
}  // namespace pglock
