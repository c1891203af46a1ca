// A restart of the exporter with [storage] path, on a real server whose log is read: a named
// lock's holder terminated while the exporter was down and its key taken by another session is
// one loss (evidence "log") and one takeover, judged across the gap, with the counters moving on
// from their saved values; a hold still held across the gap is no event and keeps its age; a
// server restart in the gap is a server_restart loss; a state file of another server, a damaged
// one and a write that fails are each a log line and a fresh start (or polling going on); a
// target removed from the config drops its file; a blocking episode in progress, the timeline and
// the lease tables' last reads survive a stop and a start.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "exporter/http/oncall.h"
#include "exporter/http/timeline_page.h"
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
  for (const auto& [key, v] : poller.Latest()->counters->losses) {
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

const TimelineRowWindow* RowOf(const TimelineWindow& w, TimelineRowKind kind,
                               const std::string& name) {
  for (const TimelineRowWindow& r : w.rows) {
    if (r.row->kind == kind && r.row->name == name) return &r;
  }
  return nullptr;
}

const TimelineInterval* HoldOf(const TimelineRowWindow* r, int pid) {
  if (r == nullptr) return nullptr;
  for (const TimelineInterval& i : r->holds) {
    if (i.pid == pid) return &i;
  }
  return nullptr;
}

std::vector<std::shared_ptr<const Event>> AllOf(const Poller& poller, EventKind kind) {
  std::vector<std::shared_ptr<const Event>> out;
  for (const auto& e : *poller.Latest()->events) {
    if (e->kind == kind) out.push_back(e);
  }
  return out;
}

// A stop with SIGTERM (Stop(): the final write) during a blocking episode, then a start: the
// events are the same, the timeline's bars from before are there with the gap between, a bar
// whose holder is still there goes on across it, the episode goes on with its original start
// (its event, once it ends, carries the gap), and a lease held by the same holder on both sides
// is no transition while one taken over in the gap is judged across it.
TEST(RestartState, AnEpisodeInProgressTheTimelineAndTheLeasesSurviveAStopAndAStart) {
  StateDir dir;
  const std::string key = std::to_string(kKey);
  Pg().Exec("DROP TABLE IF EXISTS rs_leases");
  Pg().Exec(
      "CREATE TABLE rs_leases (name text PRIMARY KEY, holder text NOT NULL, "
      "taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)");
  Pg().Exec(
      "INSERT INTO rs_leases (name, holder, expires_at) VALUES "
      "('sweep', 'worker-1', now() + interval '1 hour'), "
      "('report', 'worker-a', now() + interval '2 seconds')");
  TargetConfig target = Target(false);
  LeaseTableConfig lease;
  lease.table = lease.relation = "rs_leases";
  target.leases = {lease};
  TestSession earlier(Pg().Dsn() + " application_name=earlier-run");
  const int earlier_pid = earlier.Pid();
  TestSession holder(Pg().Dsn() + " application_name=report-runner");
  TestSession waiter(Pg().Dsn() + " application_name=report-waiter");
  const std::string root_name = "pid " + std::to_string(holder.Pid());
  TimelineWindow before;
  std::string events_before;
  {
    Poller first(target, Poll(dir));
    // A hold that ends before the stop, its session closed: a closed bar and a release.
    ASSERT_EQ(earlier.Query("SELECT pg_try_advisory_lock(" + key + ")"), "t");
    first.PollOnceForTest();
    earlier.Close();
    ASSERT_TRUE(WaitFor(10, [&] {
      first.PollOnceForTest();
      return EventsOf(first, EventKind::kLockReleased).size() == 1;
    }));
    // The next run holds the key and another waits for it: an episode in progress.
    ASSERT_EQ(holder.Query("SELECT pg_try_advisory_lock(" + key + ")"), "t");
    waiter.Send("SELECT pg_advisory_lock(" + key + ")");
    ASSERT_TRUE(WaitFor(10, [&] {
      first.PollOnceForTest();
      return RowOf(first.Latest()->timeline->Query(3600), TimelineRowKind::kRoot, root_name) !=
             nullptr;
    }));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    first.PollOnceForTest();
    before = first.Latest()->timeline->Query(3600);
    events_before = RenderEventsJson({first.Latest()}, {});
    first.Stop();  // what SIGTERM does: the final write
  }
  const std::string state = Read(dir.file());
  for (const char* section : {"\"episodes\":{", "\"leases\":{", "\"timeline\":{"}) {
    EXPECT_NE(state.find(section), std::string::npos) << section;
  }
  const TimelineInterval* held_before =
      HoldOf(RowOf(before, TimelineRowKind::kLock, "nightly-report"), holder.Pid());
  const TimelineInterval* earlier_before =
      HoldOf(RowOf(before, TimelineRowKind::kLock, "nightly-report"), earlier_pid);
  const TimelineInterval* root_before =
      HoldOf(RowOf(before, TimelineRowKind::kRoot, root_name), holder.Pid());
  ASSERT_TRUE(held_before && earlier_before && root_before);
  ASSERT_NE(RowOf(before, TimelineRowKind::kLease, "sweep"), nullptr);

  // While the exporter is down: the report lease expires and worker-b takes it.
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar(
               "WITH t AS (UPDATE rs_leases SET holder = 'worker-b', taken_at = now(), "
               "expires_at = now() + interval '1 hour' WHERE name = 'report' AND expires_at < "
               "now() RETURNING 1) SELECT count(*) FROM t") == "1";
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  testing::LogCapture log;
  Poller second(target, Poll(dir));
  second.PollOnceForTest();
  ASSERT_TRUE(second.Latest()->up) << second.Latest()->last_error;
  EXPECT_NE(log.Text().find("saved state applied"), std::string::npos) << log.Text();
  // The lease held by the same holder on both sides is nothing; the one taken in the gap is an
  // expired takeover judged across it. The other events are those from before.
  const auto takeovers = AllOf(second, EventKind::kLeaseExpiredTakeover);
  ASSERT_EQ(takeovers.size(), 1u) << RenderEventsJson({second.Latest()}, {});
  EXPECT_EQ(takeovers[0]->lease, "report");
  EXPECT_GT(takeovers[0]->gap_to, takeovers[0]->gap_from);
  EXPECT_TRUE(AllOf(second, EventKind::kLeaseAcquired).empty());
  std::string events_after = RenderEventsJson({second.Latest()}, {});
  const std::string& takeover_json = EventJson(*takeovers[0]);
  const size_t at = events_after.find(takeover_json);
  ASSERT_NE(at, std::string::npos);
  events_after.erase(at > 0 && events_after[at - 1] == ',' ? at - 1 : at,
                     takeover_json.size() + (at > 0 && events_after[at - 1] == ',' ? 1 : 0));
  EXPECT_EQ(events_after, events_before);

  // The timeline: the closed bar as it was, the held one and the root's going on from their
  // start, the gap between the last poll before the stop and the first after the start.
  const TimelineWindow after = second.Latest()->timeline->Query(3600);
  EXPECT_EQ(after.kept_since, before.kept_since);
  ASSERT_EQ(after.gaps.size(), 1u);
  EXPECT_EQ(after.gaps[0].from, before.now);
  EXPECT_EQ(after.gaps[0].to, after.now);
  const TimelineRowWindow* lock_row = RowOf(after, TimelineRowKind::kLock, "nightly-report");
  const TimelineInterval* earlier_after = HoldOf(lock_row, earlier_pid);
  ASSERT_NE(earlier_after, nullptr);
  EXPECT_FALSE(earlier_after->open);
  EXPECT_EQ(earlier_after->start, earlier_before->start);
  EXPECT_EQ(earlier_after->end, earlier_before->end);
  const TimelineInterval* held_after = HoldOf(lock_row, holder.Pid());
  ASSERT_NE(held_after, nullptr);
  EXPECT_TRUE(held_after->open);
  EXPECT_EQ(held_after->start, held_before->start);
  EXPECT_EQ(held_after->end, after.now);
  const TimelineInterval* root_after =
      HoldOf(RowOf(after, TimelineRowKind::kRoot, root_name), holder.Pid());
  ASSERT_NE(root_after, nullptr);
  EXPECT_EQ(root_after->start, root_before->start);
  const TimelineRowWindow* sweep = RowOf(after, TimelineRowKind::kLease, "sweep");
  ASSERT_NE(sweep, nullptr);
  ASSERT_EQ(sweep->holds.size(), 1u);
  EXPECT_TRUE(sweep->holds[0].open);
  const std::string api = RenderTimelineJson({second.Latest()}, {}, 3600);
  EXPECT_NE(api.find("\"exporter_gaps\":[{\"from\":"), std::string::npos) << api;

  // The root lets go: the episode ends, from its start before the restart.
  holder.Query("SELECT pg_advisory_unlock(" + key + ")");
  std::vector<std::shared_ptr<const Event>> episodes;
  ASSERT_TRUE(WaitFor(10, [&] {
    second.PollOnceForTest();
    episodes = AllOf(second, EventKind::kBlockingEpisode);
    return !episodes.empty();
  }));
  ASSERT_EQ(episodes.size(), 1u);
  EXPECT_EQ(episodes[0]->previous.pid, holder.Pid());
  EXPECT_EQ(episodes[0]->started, root_before->start);
  EXPECT_GE(episodes[0]->duration, after.gaps[0].to - root_before->start);
  EXPECT_GT(episodes[0]->gap_from, 0);
  EXPECT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
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
  std::vector<std::pair<std::string, std::string>> damaged = {
      {"empty", ""},
      {"torn", good.substr(0, good.size() / 2)},
      {"not JSON", "\x01\x02garbage"},
      {"older format", std::string(good).replace(good.find("\"version\":1"), 11, "\"version\":0")},
      {"other target",
       std::string(good).replace(good.find("\"target\":\"it\""), 13, "\"target\":\"xx\"")},
  };
  // Damage in the sections of the episodes, the lease tables and the timeline is damage too.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"episodes\":{\"postmaster_start\":", "\"episodes\":{\"postmaster_begin\":"},
           {"\"leases\":{\"tables\":[", "\"leases\":{\"tables\":[7"},
           {"\"timeline\":{\"now\":", "\"timeline\":{\"then\":"}}) {
    const size_t at = good.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    damaged.push_back({"damaged " + from, std::string(good).replace(at, from.size(), to)});
  }
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

std::string Journal(const StateDir& dir, uint64_t generation) {
  return EventJournalPath(dir.path(), "it", generation);
}

size_t LinesOf(const std::string& path) {
  const std::string bytes = Read(path);
  return static_cast<size_t>(std::count(bytes.begin(), bytes.end(), '\n'));
}

std::vector<std::shared_ptr<const Event>> LockEvents(const Poller& poller) {
  std::vector<std::shared_ptr<const Event>> out;
  for (const auto& e : *poller.Latest()->events) {
    if (e->lock == "nightly-report") out.push_back(e);
  }
  return out;
}

// `a` holds the named lock, gives it back and `b` takes it between two polls of `poller`, then `b`
// gives it back: one event (a hand-over).
void HandOver(Poller& poller, TestSession& a, TestSession& b) {
  const std::string key = std::to_string(kKey);
  ASSERT_EQ(a.Query("SELECT pg_try_advisory_lock(" + key + ")"), "t");
  poller.PollOnceForTest();
  const size_t before = LockEvents(poller).size();
  ASSERT_EQ(a.Query("SELECT pg_advisory_unlock(" + key + ")"), "t");
  ASSERT_EQ(b.Query("SELECT pg_try_advisory_lock(" + key + ")"), "t");
  poller.PollOnceForTest();
  ASSERT_EQ(b.Query("SELECT pg_advisory_unlock(" + key + ")"), "t");
  poller.PollOnceForTest();
  ASSERT_EQ(LockEvents(poller).size(), before + 1);
}

// The events live in a journal beside the state file (the timeline's closed bars and marks in
// theirs): a write appends the events added since the last one (the journal's generation
// unchanged, the state naming its lines), the next start restores them, and its first write
// writes them whole under the next generation and removes the one before once the state names
// the new one.
TEST(RestartState, TheEventsJournalIsAppendedToRestoredAndRewrittenAtTheNextStart) {
  StateDir dir;
  TestSession a(Pg().Dsn()), b(Pg().Dsn());
  {
    Poller first(Target(false), Poll(dir));
    first.PollOnceForTest();  // the first write: an empty journal, generation 1
    ASSERT_TRUE(fs::exists(Journal(dir, 1)));
    EXPECT_EQ(LinesOf(Journal(dir, 1)), 0u);
    HandOver(first, a, b);
    HandOver(first, b, a);
    first.Stop();  // the final write appends the two events
  }
  EXPECT_EQ(LinesOf(Journal(dir, 1)), 2u);
  // The timeline's closed bars (each holder's, closed at its give-back) in their own journal.
  const size_t closed = LinesOf(TimelineJournalPath(dir.path(), "it", 1));
  EXPECT_GE(closed, 4u);
  SavedTarget saved;
  ASSERT_TRUE(DecodeSavedTarget(Read(dir.file()), &saved).ok());
  ASSERT_TRUE(saved.journal.has_value());
  EXPECT_EQ(saved.journal->generation, 1u);
  EXPECT_EQ(saved.journal->lines, 2u);
  EXPECT_TRUE(saved.events.empty());
  ASSERT_TRUE(saved.timeline_journal.has_value());
  EXPECT_EQ(saved.timeline_journal->lines, closed);
  ASSERT_TRUE(saved.timeline.has_value());
  EXPECT_TRUE(saved.timeline->closed.empty());
  // Its markers (the two hand-overs) in theirs.
  EXPECT_EQ(LinesOf(MarkerJournalPath(dir.path(), "it", 1)), 2u);
  ASSERT_TRUE(saved.marker_journal.has_value());
  EXPECT_EQ(saved.marker_journal->lines, 2u);
  EXPECT_TRUE(saved.timeline->markers.empty());

  Poller second(Target(false), Poll(dir));
  second.PollOnceForTest();
  const auto restored = LockEvents(second);
  ASSERT_EQ(restored.size(), 2u);
  EXPECT_EQ(restored[0]->previous.pid, a.Pid());
  EXPECT_EQ(restored[0]->current.pid, b.Pid());
  EXPECT_EQ(restored[1]->previous.pid, b.Pid());
  EXPECT_FALSE(fs::exists(Journal(dir, 1)));
  EXPECT_EQ(LinesOf(Journal(dir, 2)), 2u);
  ASSERT_TRUE(DecodeSavedTarget(Read(dir.file()), &saved).ok());
  EXPECT_EQ(saved.journal->generation, 2u);
  EXPECT_EQ(saved.journal->lines, 2u);
  EXPECT_FALSE(fs::exists(TimelineJournalPath(dir.path(), "it", 1)));
  EXPECT_GE(LinesOf(TimelineJournalPath(dir.path(), "it", 2)), closed);
  EXPECT_FALSE(fs::exists(MarkerJournalPath(dir.path(), "it", 1)));
  EXPECT_EQ(LinesOf(MarkerJournalPath(dir.path(), "it", 2)), 2u);
  // The bars and the marks came back: the page's window holds those from before the restart.
  size_t bars = 0, marks = 0;
  for (const TimelineRowWindow& r : second.Latest()->timeline->Query(3600).rows) {
    if (r.row->name == "nightly-report") bars += r.holds.size();
    for (const TimelineMarker& m : r.markers) marks += m.event_kind == EventKind::kLockHandover;
  }
  EXPECT_GE(bars, 4u);
  EXPECT_EQ(marks, 2u);
  second.Stop();
}

// A damaged line loses that event alone, a missing journal the events alone: the rest of the
// state is applied, and each is one log line.
TEST(RestartState, ADamagedOrMissingJournalLosesOnlyItsEvents) {
  StateDir dir;
  TestSession a(Pg().Dsn()), b(Pg().Dsn());
  {
    Poller first(Target(false), Poll(dir));
    first.PollOnceForTest();
    HandOver(first, a, b);
    HandOver(first, b, a);
    first.Stop();
  }
  const std::string journal = Read(Journal(dir, 1));
  const std::string state = Read(dir.file());
  std::string damaged = journal;
  damaged.replace(0, 1, "[");
  Write(Journal(dir, 1), damaged);
  {
    testing::LogCapture log;
    Poller second(Target(false), Poll(dir));
    second.PollOnceForTest();
    ASSERT_EQ(LockEvents(second).size(), 1u);
    EXPECT_EQ(LockEvents(second)[0]->previous.pid, b.Pid());
    EXPECT_NE(
        log.Text().find("1 of 2 lines damaged and skipped, the rest restored; the first: line 1: "),
        std::string::npos)
        << log.Text();
    EXPECT_NE(log.Text().find("saved state applied"), std::string::npos) << log.Text();
    second.Stop();
  }
  Write(dir.file(), state);
  fs::remove(Journal(dir, 2));
  fs::remove(Journal(dir, 1));
  testing::LogCapture log;
  Poller third(Target(false), Poll(dir));
  third.PollOnceForTest();
  EXPECT_TRUE(LockEvents(third).empty());
  EXPECT_NE(log.Text().find("journal " + Journal(dir, 1) +
                            " not read, what it keeps is not restored (the rest is): missing"),
            std::string::npos)
      << log.Text();
  EXPECT_NE(log.Text().find("saved state applied"), std::string::npos) << log.Text();
  third.Stop();
}

TEST(RestartState, ATargetRemovedFromTheConfigDropsItsState) {
  StateDir dir;
  {
    Poller poller(Target(false), Poll(dir));
    poller.PollOnceForTest();
    ASSERT_TRUE(fs::exists(dir.file()));
    ASSERT_TRUE(fs::exists(Journal(dir, 1)));
    poller.ForgetSavedState();
  }
  EXPECT_FALSE(fs::exists(dir.file()));
  EXPECT_FALSE(fs::exists(Journal(dir, 1)));
  EXPECT_TRUE(fs::is_empty(dir.path())) << "every journal goes with the state file";
  EXPECT_FALSE(fs::exists(TimelineJournalPath(dir.path(), "it", 1)));
}

}  // namespace
}  // namespace pglock
