// The timeline (exporter/events/timeline.h, exporter/http/timeline_page.h) against a real
// PostgreSQL, one scenario driven poll by poll: a hand-over of a named lock, its loss to
// pg_terminate_backend and the takeover, a blocking episode behind the new holder with a hostile
// application name waiting, and a lease that expires and is taken over. Every interval and marker
// is asserted at the right poll (± one poll), in the history and in its JSON; the SVG escapes.
#include "exporter/events/timeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "exporter/http/timeline_page.h"
#include "exporter/poll/poller.h"
#include "tests/support/http_get.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::TestPoll;
using testing::TestSession;
using testing::ValidJson;
using testing::WaitFor;

constexpr const char* kHostileApp = "<img src=x onerror=alert(1)>&\"";

TargetConfig Target() {
  TargetConfig t;
  t.name = "tl";
  t.dsn = Pg().Dsn();
  LockNameConfig report;
  report.name = "nightly-report";
  report.kind = LockNameConfig::Kind::kBigint;
  report.key = 4711;
  t.locks = {report};
  LeaseTableConfig leases;
  leases.table = "tl_leases";
  leases.relation = "tl_leases";
  t.leases = {leases};
  return t;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// A poller driven by the test, with the server time of every poll it ran.
class Scenario {
 public:
  Scenario() : poller_(Target(), TestPoll({.interval_ms = 500})) {}

  // One poll; returns its now().
  double Poll() {
    poller_.PollOnceForTest();
    EXPECT_TRUE(poller_.Latest()->up) << poller_.Latest()->last_error;
    polls_.push_back(Window().now);
    return polls_.back();
  }
  // Polls (at most 15 s) until `row` has a marker of `kind`; returns it.
  TimelineMarker PollUntilMarker(TimelineRowKind row, const std::string& name,
                                 const std::string& kind) {
    std::optional<TimelineMarker> found;
    const bool ok = WaitFor(15, [&] {
      Poll();
      if (const TimelineRowWindow* r = Row(row, name)) {
        for (const TimelineMarker& m : r->markers) {
          if (MarkerKindName(m) == kind) found = m;
        }
      }
      if (found) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return false;
    });
    EXPECT_TRUE(ok) << "no " << kind << " on " << name;
    return found.value_or(TimelineMarker{});
  }
  TimelineWindow Window() const { return poller_.Latest()->timeline->Query(3600); }
  // The row as the latest poll left it (a copy kept in last_).
  const TimelineRowWindow* Row(TimelineRowKind kind, const std::string& name) {
    last_ = Window();
    for (const TimelineRowWindow& r : last_.rows) {
      if (r.row->kind == kind && r.row->name == name) return &r;
    }
    return nullptr;
  }
  // The index of the poll at `t` (-1: none).
  int PollAt(double t) const {
    for (size_t i = 0; i < polls_.size(); ++i) {
      if (std::abs(polls_[i] - t) < 1e-6) return static_cast<int>(i);
    }
    return -1;
  }
  Poller& poller() { return poller_; }

 private:
  Poller poller_;
  std::vector<double> polls_;
  TimelineWindow last_;
};

const TimelineInterval* HoldOf(const TimelineRowWindow& r, int pid) {
  for (const TimelineInterval& i : r.holds) {
    if (i.pid == pid) return &i;
  }
  return nullptr;
}

TEST(Timeline, HandoverLossTakeoverEpisodeAndLeaseExpiryAtTheRightPolls) {
  if (Pg().VersionNum() < 140000) {
    GTEST_SKIP() << "a terminated holder is a loss with pg_stat_database.sessions_killed (14+)";
  }
  Pg().Exec("DROP TABLE IF EXISTS tl_leases");
  Pg().Exec(
      "CREATE TABLE tl_leases (name text PRIMARY KEY, holder text, taken_at timestamptz, "
      "expires_at timestamptz)");
  Scenario s;
  // On 14 a holder's end may be judged an inventory later (EventTracker::Observe): its events
  // then come one poll later still.
  const int slack = Pg().VersionNum() < 150000 ? 2 : 1;

  // --- a hand-over: A holds for two polls, closes, B takes the lock ---
  auto a = std::make_unique<TestSession>(Pg().Dsn() + " application_name=tl-a");
  a->Query("SELECT pg_advisory_lock(4711)");
  const int pid_a = a->Pid();
  const double a_first = s.Poll();
  s.Poll();
  a.reset();
  auto b = std::make_unique<TestSession>(Pg().Dsn() + " application_name=tl-b");
  b->Query("SELECT pg_advisory_lock(4711)");
  const int pid_b = b->Pid();
  const TimelineMarker handover =
      s.PollUntilMarker(TimelineRowKind::kLock, "nightly-report", "lock_handover");
  const TimelineRowWindow* row = s.Row(TimelineRowKind::kLock, "nightly-report");
  ASSERT_NE(row, nullptr);
  const TimelineInterval* hold_a = HoldOf(*row, pid_a);
  const TimelineInterval* hold_b = HoldOf(*row, pid_b);
  ASSERT_TRUE(hold_a && hold_b);
  EXPECT_EQ(hold_a->who, "tl-a");
  EXPECT_DOUBLE_EQ(hold_a->start, a_first);
  EXPECT_FALSE(hold_a->open);
  EXPECT_EQ(s.PollAt(hold_b->start), s.PollAt(hold_a->end) + 1) << "B seen the poll after A";
  EXPECT_LE(std::abs(s.PollAt(handover.time) - s.PollAt(hold_b->start)), slack);
  EXPECT_EQ(handover.previous_pid, pid_a);
  EXPECT_EQ(handover.current_pid, pid_b);
  const double b_start = hold_b->start;

  // --- a loss: B terminated; C takes the lock over ---
  Pg().Scalar("SELECT pg_terminate_backend(" + std::to_string(pid_b) + ")");
  const TimelineMarker lost =
      s.PollUntilMarker(TimelineRowKind::kLock, "nightly-report", "lock_lost");
  TestSession c(Pg().Dsn() + " application_name=tl-c");
  c.Query("SELECT pg_advisory_lock(4711)");
  const int pid_c = c.Pid();
  const TimelineMarker takeover =
      s.PollUntilMarker(TimelineRowKind::kLock, "nightly-report", "lock_takeover");
  row = s.Row(TimelineRowKind::kLock, "nightly-report");
  ASSERT_NE(row, nullptr);
  hold_b = HoldOf(*row, pid_b);
  const TimelineInterval* hold_c = HoldOf(*row, pid_c);
  ASSERT_TRUE(hold_b && hold_c);
  EXPECT_DOUBLE_EQ(hold_b->start, b_start);
  EXPECT_LE(std::abs(s.PollAt(lost.time) - (s.PollAt(hold_b->end) + 1)), slack);
  EXPECT_STREQ(EventCauseName(lost.cause), "terminated");
  EXPECT_NE(lost.evidence, EndEvidence::kNone);
  EXPECT_EQ(lost.previous_pid, pid_b);
  EXPECT_LE(std::abs(s.PollAt(takeover.time) - s.PollAt(hold_c->start)), slack);
  EXPECT_EQ(takeover.current_pid, pid_c);
  EXPECT_EQ(row->attention, 2);

  // --- a blocking episode: D (a hostile application name) waits behind C until C closes ---
  TestSession d(Pg().Dsn() + " application_name='" + kHostileApp + "'");
  d.Send("SELECT pg_advisory_lock(4711)");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " +
                       std::to_string(d.Pid())) == "1";
  }));
  const double wait_seen = s.Poll();
  s.Poll();
  row = s.Row(TimelineRowKind::kLock, "nightly-report");
  ASSERT_NE(row, nullptr);
  ASSERT_EQ(row->waits.size(), 1u);
  EXPECT_EQ(row->waits[0].pid, d.Pid());
  EXPECT_EQ(row->waits[0].blocker_pid, pid_c);
  EXPECT_EQ(row->waits[0].who, kHostileApp);
  EXPECT_LE(row->waits[0].start, wait_seen);
  const std::string root_name = "pid " + std::to_string(pid_c);
  const TimelineRowWindow* root = s.Row(TimelineRowKind::kRoot, root_name);
  ASSERT_NE(root, nullptr);
  ASSERT_EQ(root->holds.size(), 1u);
  EXPECT_DOUBLE_EQ(root->holds[0].start, wait_seen);
  const std::string page = RenderLocksPage({s.poller().Latest()}, LocksFilter{});
  EXPECT_NE(page.find("<svg class=tl"), std::string::npos);
  EXPECT_NE(page.find("&lt;img src=x onerror=alert(1)&gt;&amp;&quot;"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  c.Close();
  ASSERT_TRUE(WaitFor(10, [&] { return d.SendDone(); }));
  const TimelineMarker ended =
      s.PollUntilMarker(TimelineRowKind::kRoot, root_name, "blocking_episode_end");
  root = s.Row(TimelineRowKind::kRoot, root_name);
  ASSERT_NE(root, nullptr);
  TimelineMarker started;
  for (const TimelineMarker& m : root->markers) {
    if (MarkerKindName(m) == std::string("blocking_episode_start")) started = m;
  }
  EXPECT_LE(std::abs(s.PollAt(started.time) - s.PollAt(wait_seen)), 1);
  EXPECT_LE(std::abs(s.PollAt(ended.time) - (s.PollAt(root->holds[0].end) + 1)), 1);
  row = s.Row(TimelineRowKind::kLock, "nightly-report");
  ASSERT_NE(row, nullptr);
  const TimelineInterval* hold_d = HoldOf(*row, d.Pid());
  ASSERT_NE(hold_d, nullptr);
  EXPECT_EQ(s.PollAt(hold_d->start), s.PollAt(row->waits[0].end) + 1) << "D held after waiting";

  // --- a lease that expires under its holder, then is taken over ---
  Pg().Exec("INSERT INTO tl_leases VALUES ('sweep', 'worker-1', now(), now() + interval '1.5 s')");
  const double taken_at =
      std::stod(Pg().Scalar("SELECT extract(epoch FROM taken_at) FROM tl_leases"));
  const double expires_at =
      std::stod(Pg().Scalar("SELECT extract(epoch FROM expires_at) FROM tl_leases"));
  s.Poll();
  ASSERT_TRUE(
      WaitFor(10, [] { return Pg().Scalar("SELECT expires_at < now() FROM tl_leases") == "t"; }));
  const TimelineMarker expiry = s.PollUntilMarker(TimelineRowKind::kLease, "sweep", "lease_expiry");
  EXPECT_NEAR(expiry.time, expires_at, 0.01);
  EXPECT_EQ(expiry.previous, "worker-1");
  Pg().Exec(
      "UPDATE tl_leases SET holder = 'worker-2', taken_at = now(), "
      "expires_at = now() + interval '1 hour'");
  const TimelineMarker expired_takeover =
      s.PollUntilMarker(TimelineRowKind::kLease, "sweep", "lease_expired_takeover");
  const TimelineRowWindow* lease = s.Row(TimelineRowKind::kLease, "sweep");
  ASSERT_NE(lease, nullptr);
  ASSERT_EQ(lease->holds.size(), 3u);  // worker-1, worker-1 expired, worker-2
  EXPECT_EQ(lease->holds[0].who, "worker-1");
  EXPECT_NEAR(lease->holds[0].start, taken_at, 0.01);
  EXPECT_TRUE(lease->holds[1].expired);
  EXPECT_NEAR(lease->holds[1].start, expires_at, 0.01);
  EXPECT_EQ(lease->holds[2].who, "worker-2");
  EXPECT_LE(std::abs(s.PollAt(expired_takeover.time) - s.PollAt(lease->holds[2].start)), 1);

  // --- the JSON carries the same intervals and markers ---
  const std::string json = RenderTimelineJson({s.poller().Latest()}, LocksFilter{}, 3600);
  EXPECT_TRUE(ValidJson(json)) << json;
  for (const TimelineMarker* m :
       {&handover, &lost, &takeover, &ended, &expiry, &expired_takeover}) {
    EXPECT_NE(json.find("\"time\":" + Num(m->time) + ",\"kind\":\"" + MarkerKindName(*m) + "\""),
              std::string::npos)
        << MarkerKindName(*m);
  }
  EXPECT_NE(json.find("{\"start\":" + Num(a_first) + ","), std::string::npos);
  EXPECT_NE(json.find("\"who\":\"<img src=x onerror=alert(1)>&\\\"\""), std::string::npos);
  EXPECT_NE(json.find("\"blocker_pid\":" + std::to_string(pid_c)), std::string::npos);
  std::printf("timeline scenario: %zu rows, JSON %zu bytes\n", s.Window().rows.size(), json.size());
  Pg().Exec("DROP TABLE tl_leases");
}

}  // namespace
}  // namespace pglock
