// A restart of the exporter with [storage] path, on a real server whose log is read: a named
// lock's holder terminated while the exporter was down and its key taken by another session is
// one loss (evidence "log") and one takeover, judged across the gap, with the counters moving on
// from their saved values; a hold still held across the gap is no event and keeps its age; a
// server restart in the gap is a server_restart loss; a state file of another server, a damaged
// one and a write that fails are each a log line and a fresh start (or polling going on); a
// target removed from the config drops its file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "exporter/poll/poller.h"
#include "exporter/storage/state_store.h"
#include "tests/support/log_capture.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

namespace fs = std::filesystem;
using testing::Pg;
using testing::TestPoll;
using testing::TestSession;
using testing::WaitFor;

constexpr int kKey = 4343;

class StateDir {
 public:
  StateDir() {
    std::string pattern = (fs::temp_directory_path() / "pglock_state.XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~StateDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string file() const { return StateFilePath(path_, "it"); }

 private:
  std::string path_;
};

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TargetConfig Target(bool with_log = true) {
  std::string toml =
      "[[targets.locks]]\nname = \"nightly-report\"\nkey = " + std::to_string(kKey) + "\n";
  if (with_log) {
    const std::string format = Pg().VersionNum() >= 150000 ? "jsonlog" : "csvlog";
    toml += "[targets.server_log]\npath = \"" + Pg().LogDir() + "\"\nformat = \"" + format +
            "\"\nread_interval = \"200ms\"\n";
  }
  return testing::TestTarget(Pg().Dsn(), toml);
}

PollConfig Poll(const StateDir& dir) {
  PollConfig p = TestPoll({.interval_ms = 200});
  p.storage_path = dir.path();
  return p;
}

std::vector<std::shared_ptr<const Event>> EventsOf(const Poller& poller, EventKind kind) {
  std::vector<std::shared_ptr<const Event>> out;
  const auto snap = poller.Latest();
  if (!snap || !snap->events) return out;
  for (const auto& e : *snap->events) {
    if (e->kind == kind && e->lock == "nightly-report") out.push_back(e);
  }
  return out;
}

double LossesOf(const Poller& poller) {
  double n = 0;
  for (const auto& [key, v] : poller.Latest()->counters.losses) {
    if (std::get<1>(key) == "nightly-report") n += v;
  }
  return n;
}

// A first exporter sees `holder` hold the key (and, with a log, its reader catch up), then is
// killed: what its last periodic write left is the state the next start finds (its final write
// at Stop() is put back to that, as a kill -9 would leave it).
void SeeHeldThenKill(const StateDir& dir, bool with_log, int before_losses = 0) {
  Poller first(Target(with_log), Poll(dir));
  // The reader (a thread of its own from construction) positions itself at the log's end at its
  // first read; the first poll's write then keeps where it is.
  if (with_log) {
    ASSERT_TRUE(WaitFor(5, [&] { return first.server_log()->reads_through() > 0; }));
  }
  first.PollOnceForTest();
  ASSERT_EQ(LossesOf(first), before_losses);
  const std::string periodic = Read(dir.file());
  ASSERT_FALSE(periodic.empty());
  first.Stop();
  Write(dir.file(), periodic);
}

TEST(RestartState, LossAndTakeoverInTheGapAreJudgedFromTheLogAndCountOnTheSavedCounters) {
  StateDir dir;
  auto holder = std::make_unique<TestSession>(Pg().Dsn() + " application_name=report-runner");
  ASSERT_EQ(holder->Query("SELECT pg_try_advisory_lock(" + std::to_string(kKey) + ")"), "t");
  const int holder_pid = holder->Pid();
  SeeHeldThenKill(dir, /*with_log=*/true);

  // While the exporter is down: the holder is terminated, another run takes the key.
  Pg().Scalar("SELECT pg_terminate_backend(" + std::to_string(holder_pid) + ")");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                       std::to_string(holder_pid)) == "0";
  }));
  TestSession next_run(Pg().Dsn() + " application_name=report-runner-2");
  ASSERT_EQ(next_run.Query("SELECT pg_try_advisory_lock(" + std::to_string(kKey) + ")"), "t");

  testing::LogCapture log;
  Poller second(Target(), Poll(dir));
  std::vector<std::shared_ptr<const Event>> lost, taken;
  ASSERT_TRUE(WaitFor(15, [&] {
    second.PollOnceForTest();
    lost = EventsOf(second, EventKind::kLockLost);
    taken = EventsOf(second, EventKind::kLockTakeover);
    if (lost.empty() || taken.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return !lost.empty() && !taken.empty();
  })) << log.Text();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(EventCauseName(lost[0]->cause), std::string("terminated"));
  EXPECT_EQ(lost[0]->evidence, EndEvidence::kLog) << EndEvidenceLabel(lost[0]->evidence);
  EXPECT_EQ(lost[0]->previous.pid, holder_pid);
  EXPECT_GT(lost[0]->gap_to, lost[0]->gap_from);
  EXPECT_GT(lost[0]->gap_from, 0);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0]->current.pid, next_run.Pid());
  EXPECT_EQ(LossesOf(second), 1);
  EXPECT_NE(EventJson(*lost[0]).find("\"exporter_gap\":{"), std::string::npos);
  EXPECT_NE(log.Text().find("saved state applied"), std::string::npos) << log.Text();
  holder.reset();
}

TEST(RestartState, AHoldStillHeldAcrossTheGapIsNoEventAndKeepsItsAge) {
  StateDir dir;
  TestSession holder(Pg().Dsn());
  ASSERT_EQ(holder.Query("SELECT pg_try_advisory_lock(" + std::to_string(kKey) + ")"), "t");
  SeeHeldThenKill(dir, /*with_log=*/false);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Poller second(Target(false), Poll(dir));
  second.PollOnceForTest();
  second.PollOnceForTest();
  const auto snap = second.Latest();
  ASSERT_TRUE(snap->up);
  EXPECT_TRUE(EventsOf(second, EventKind::kLockLost).empty());
  EXPECT_TRUE(EventsOf(second, EventKind::kLockReleased).empty());
  EXPECT_TRUE(EventsOf(second, EventKind::kLockTakeover).empty());
  double age = -1;
  for (const HeldLock& h : snap->view->held) {
    if (h.lock == "nightly-report") age = h.seconds;
  }
  EXPECT_GE(age, 1.5) << "the hold's age restarted with the exporter";
}

TEST(RestartState, AServerRestartInTheGapLosesEveryHold) {
  StateDir dir;
  {
    TestSession holder(Pg().Dsn());
    ASSERT_EQ(holder.Query("SELECT pg_try_advisory_lock(" + std::to_string(kKey) + ")"), "t");
    SeeHeldThenKill(dir, /*with_log=*/false);
    ASSERT_TRUE(Pg().RestartServer());
  }
  TestSession next_run(Pg().Dsn());
  ASSERT_EQ(next_run.Query("SELECT pg_try_advisory_lock(" + std::to_string(kKey) + ")"), "t");
  Poller second(Target(false), Poll(dir));
  second.PollOnceForTest();
  second.PollOnceForTest();
  const auto lost = EventsOf(second, EventKind::kLockLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(EventCauseName(lost[0]->cause), std::string("server_restart"));
  EXPECT_EQ(EventsOf(second, EventKind::kLockTakeover).size(), 1u);
}

TEST(RestartState, StateOfAnotherServerIsIgnored) {
  StateDir dir;
  TestSession holder(Pg().Dsn());
  ASSERT_EQ(holder.Query("SELECT pg_try_advisory_lock(" + std::to_string(kKey) + ")"), "t");
  SeeHeldThenKill(dir, /*with_log=*/false);
  std::string state = Read(dir.file());
  const size_t at = state.find("\"server\":\"");
  ASSERT_NE(at, std::string::npos);
  state.insert(at + 10, "1");  // another system identifier
  Write(dir.file(), state);
  holder.Query("SELECT pg_advisory_unlock_all()");
  testing::LogCapture log;
  Poller second(Target(false), Poll(dir));
  second.PollOnceForTest();
  second.PollOnceForTest();
  EXPECT_NE(log.Text().find("saved state not applied"), std::string::npos) << log.Text();
  EXPECT_TRUE(second.Latest()->events->empty());
}

TEST(RestartState, DamagedFilesAreAFreshStartWithOneLogLine) {
  StateDir dir;
  TestSession holder(Pg().Dsn());
  ASSERT_EQ(holder.Query("SELECT pg_try_advisory_lock(" + std::to_string(kKey) + ")"), "t");
  SeeHeldThenKill(dir, /*with_log=*/false);
  const std::string good = Read(dir.file());
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"empty", ""},
      {"torn", good.substr(0, good.size() / 2)},
      {"not JSON", "\x01\x02garbage"},
      {"older format", std::string(good).replace(good.find("\"version\":1"), 11, "\"version\":0")},
      {"other target",
       std::string(good).replace(good.find("\"target\":\"it\""), 13, "\"target\":\"xx\"")},
  };
  for (const auto& [what, bytes] : damaged) {
    Write(dir.file(), bytes);
    testing::LogCapture log;
    Poller second(Target(false), Poll(dir));
    second.PollOnceForTest();
    EXPECT_TRUE(second.Latest()->up) << what;
    EXPECT_NE(log.Text().find("saved state " + dir.file() + " ignored, a fresh start"),
              std::string::npos)
        << what << ": " << log.Text();
    EXPECT_TRUE(second.Latest()->events->empty()) << what;
    second.Stop();
    // The fresh start wrote a good file again.
    SavedTarget again;
    EXPECT_TRUE(DecodeSavedTarget(Read(dir.file()), &again).ok()) << what;
  }
}

TEST(RestartState, AWriteThatFailsIsCountedAndPollingGoesOn) {
  StateDir dir;
  fs::create_directory(dir.file() + ".tmp");  // the temporary file cannot be created
  testing::LogCapture log;
  const double errors_before = StateWrites().errors;
  {
    Poller poller(Target(false), Poll(dir));
    poller.PollOnceForTest();
    EXPECT_TRUE(poller.Latest()->up);
    EXPECT_GE(StateWrites().errors, errors_before + 1);
    EXPECT_NE(log.Text().find("cannot save its state (polling goes on)"), std::string::npos)
        << log.Text();
    const auto samples = testing::PollAndScrape(poller);
    EXPECT_GE(testing::Value(samples, "pglock_storage_write_errors_total", {}).value_or(0), 1);
  }
  fs::remove(dir.file() + ".tmp");
}

TEST(RestartState, ATargetRemovedFromTheConfigDropsItsState) {
  StateDir dir;
  {
    Poller poller(Target(false), Poll(dir));
    poller.PollOnceForTest();
    ASSERT_TRUE(fs::exists(dir.file()));
    poller.ForgetSavedState();
  }
  EXPECT_FALSE(fs::exists(dir.file()));
}

}  // namespace
}  // namespace pglock
