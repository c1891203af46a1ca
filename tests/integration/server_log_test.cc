// The server's log as the first evidence of how a lock holder's session ended, on a real server
// whose logging collector writes csvlog (and jsonlog from 15 on): every end cause the log names
// (terminate, the three timeouts, a client gone mid-transaction, a clean close, a restart), each
// while holding a named session lock, judged with evidence "log"; the log's own health metrics;
// an unreadable log that leaves the polls alone; and the race the counters lose (a termination
// and clean closes of the same database in one interval).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "exporter/poll/poller.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::PollAndScrape;
using testing::Sample;
using testing::Sum;
using testing::TestPoll;
using testing::TestSession;
using testing::Value;
using testing::WaitFor;

// The formats this server writes: csvlog always, jsonlog from 15 on.
std::vector<std::string> Formats() {
  if (Pg().VersionNum() >= 150000) return {"jsonlog", "csvlog"};
  return {"csvlog"};
}

TargetConfig Target(const std::string& format, const std::string& path = "") {
  return testing::TestTarget(Pg().Dsn(),
                             "[[targets.locks]]\nname = \"nightly-report\"\nkey = 4242\n"
                             "[targets.server_log]\npath = \"" +
                                 (path.empty() ? Pg().LogDir() : path) + "\"\nformat = \"" +
                                 format + "\"\nread_interval = \"200ms\"\n");
}

// The newest event of `kind` for `pid` (null: none yet).
std::shared_ptr<const Event> EventOf(const Poller& poller, const std::string& kind, int pid) {
  const auto snap = poller.Latest();
  if (!snap || !snap->events) return nullptr;
  for (auto it = snap->events->rbegin(); it != snap->events->rend(); ++it) {
    if (EventKindName((*it)->kind) == kind && (*it)->previous.pid == pid) return *it;
  }
  return nullptr;
}

// Polls every 200 ms until the lock of `pid` is judged lost or released (15 s at most).
std::shared_ptr<const Event> PollUntilEnded(Poller& poller, int pid) {
  std::shared_ptr<const Event> ended;
  WaitFor(15, [&] {
    poller.PollOnceForTest();
    ended = EventOf(poller, "lock_lost", pid);
    if (!ended) ended = EventOf(poller, "lock_released", pid);
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return ended != nullptr;
  });
  return ended;
}

// Holds the named lock on a session of its own, lets `end` end that session, and returns the
// event that judged the lock's end.
std::shared_ptr<const Event> EndWhileHolding(const std::string& format, const std::string& dsn,
                                             const std::function<void(TestSession&)>& before,
                                             const std::function<void(TestSession&)>& end,
                                             int* pid_out = nullptr) {
  Poller poller(Target(format), TestPoll({.interval_ms = 200}));
  auto s = std::make_unique<TestSession>(dsn + " application_name=nightly-" + format);
  before(*s);
  EXPECT_EQ(s->Query("SELECT pg_try_advisory_lock(4242)"), "t");
  const int pid = s->Pid();
  if (pid_out != nullptr) *pid_out = pid;
  poller.PollOnceForTest();
  // The reader starts at the end of the log: nothing it read before this counts.
  EXPECT_TRUE(WaitFor(5, [&] { return poller.server_log()->reads_through() > 0; }));
  end(*s);
  return PollUntilEnded(poller, pid);
}

void ExpectLoss(const std::shared_ptr<const Event>& e, const std::string& cause,
                const std::string& format) {
  ASSERT_NE(e, nullptr) << format << ": no event";
  EXPECT_EQ(e->kind, EventKind::kLockLost) << format;
  EXPECT_EQ(EventCauseName(e->cause), cause) << format;
  EXPECT_EQ(e->lock, "nightly-report") << format;
  EXPECT_EQ(e->evidence, EndEvidence::kLog) << format << ": " << EndEvidenceLabel(e->evidence);
}

const auto kNothing = [](TestSession&) {};

TEST(ServerLog, TerminatedHolderIsATerminatedLossOnTheLogsWord) {
  for (const std::string& format : Formats()) {
    ExpectLoss(EndWhileHolding(format, Pg().Dsn(), kNothing,
                               [](TestSession& s) {
                                 Pg().Scalar("SELECT pg_terminate_backend(" +
                                             std::to_string(s.Pid()) + ")");
                               }),
               "terminated", format);
  }
}

TEST(ServerLog, IdleInTransactionTimeout) {
  for (const std::string& format : Formats()) {
    ExpectLoss(EndWhileHolding(
                   format, Pg().Dsn(),
                   [](TestSession& s) {
                     s.Query("SET idle_in_transaction_session_timeout = '1s'");
                     s.Query("BEGIN");
                   },
                   [](TestSession&) { std::this_thread::sleep_for(std::chrono::seconds(2)); }),
               "idle_in_transaction_timeout", format);
  }
}

TEST(ServerLog, IdleSessionTimeout) {
  if (Pg().VersionNum() < 140000) GTEST_SKIP() << "idle_session_timeout is 14+";
  for (const std::string& format : Formats()) {
    ExpectLoss(
        EndWhileHolding(
            format, Pg().Dsn(), [](TestSession& s) { s.Query("SET idle_session_timeout = '1s'"); },
            [](TestSession&) { std::this_thread::sleep_for(std::chrono::seconds(2)); }),
        "idle_session_timeout", format);
  }
}

TEST(ServerLog, TransactionTimeout) {
  if (Pg().VersionNum() < 170000) GTEST_SKIP() << "transaction_timeout is 17+";
  for (const std::string& format : Formats()) {
    ExpectLoss(EndWhileHolding(
                   format, Pg().Dsn(),
                   [](TestSession& s) {
                     s.Query("SET transaction_timeout = '1s'");
                     s.Query("BEGIN");
                   },
                   [](TestSession&) { std::this_thread::sleep_for(std::chrono::seconds(2)); }),
               "transaction_timeout", format);
  }
}

TEST(ServerLog, ClientGoneMidTransactionIsAConnectionLost) {
  for (const std::string& format : Formats()) {
    ExpectLoss(EndWhileHolding(
                   format, Pg().Dsn(), [](TestSession& s) { s.Query("BEGIN"); },
                   // A killed client: its socket closes with no goodbye.
                   [](TestSession& s) { s.AbandonSocket(); }),
               "connection_lost", format);
  }
}

TEST(ServerLog, CleanCloseIsAReleaseOnTheLogsWord) {
  for (const std::string& format : Formats()) {
    const auto e = EndWhileHolding(format, Pg().Dsn(), kNothing, [](TestSession& s) { s.Close(); });
    ASSERT_NE(e, nullptr) << format;
    EXPECT_EQ(e->kind, EventKind::kLockReleased) << format;
    EXPECT_EQ(e->cause, CauseOf(HoldEnd::kCleanClose)) << format;
    // Its disconnection line names no cause; nothing abandoned in its database says it closed
    // (12/13 count no abandoned ends: the line alone).
    EXPECT_EQ(e->evidence,
              Pg().VersionNum() >= 140000 ? EndEvidence::kLogAndCounters : EndEvidence::kLog)
        << format;
  }
}

TEST(ServerLog, HealthMetricsAndNoReplayOfOldRecords) {
  for (const std::string& format : Formats()) {
    Poller poller(Target(format), TestPoll());
    ASSERT_TRUE(WaitFor(5, [&] { return poller.server_log()->reads_through() > 0; }));
    TestSession s(Pg().Dsn());
    s.Close();  // a disconnection line
    ASSERT_TRUE(WaitFor(5, [&] { return poller.server_log()->Status()->records > 0; }));
    const auto samples = PollAndScrape(poller);
    EXPECT_EQ(Value(samples, "pglock_server_log_up", {}), 1) << format;
    EXPECT_GE(Sum(samples, "pglock_server_log_records_total"), 1) << format;
    EXPECT_EQ(Value(samples, "pglock_server_log_unparsed_total", {}), 0) << format;
    EXPECT_EQ(Value(samples, "pglock_server_log_untranslated", {}), 0) << format;
    // Started at the end: the thousands of lines earlier tests left are not records here.
    EXPECT_LT(Sum(samples, "pglock_server_log_records_total"), 50) << format;
  }
}

TEST(ServerLog, UnreadableLogIsReportedAndPollsGoOn) {
  const std::string missing = Pg().LogDir() + "/no-such-dir";
  Poller poller(Target(Formats()[0], missing), TestPoll());
  ASSERT_TRUE(WaitFor(5, [&] {
    return !poller.server_log()->Status()->error.empty() &&
           poller.server_log()->Status()->error != "not read yet";
  }));
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_up", {}), 1);
  EXPECT_EQ(Value(samples, "pglock_server_log_up", {}), 0);
  EXPECT_NE(poller.server_log()->Status()->error.find("no-such-dir"), std::string::npos)
      << poller.server_log()->Status()->error;
  // A lock's end falls back to the counters, at once (nothing to wait for).
  TestSession s(Pg().Dsn());
  s.Query("SELECT pg_advisory_lock(4242)");
  const int pid = s.Pid();
  poller.PollOnceForTest();
  s.Close();
  const auto e = PollUntilEnded(poller, pid);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->evidence, EndEvidence::kLog);
}

// How a poller judged the race's sessions, from its events: the victims hold the named lock,
// the clean closes hold unnamed keys.
struct Tally {
  int victims_terminated = 0;  // right
  int victims_other = 0;       // a victim judged anything else: a missed or wrong cause
  int clean_released = 0;      // right
  int clean_lost = 0;          // a clean close judged a loss: a false page
  int from_log = 0;            // judgements with evidence "log"
};

Tally TallyOf(const Poller& poller) {
  Tally t;
  const auto snap = poller.Latest();
  for (const auto& e : *snap->events) {
    if (e->kind != EventKind::kLockLost && e->kind != EventKind::kLockReleased) continue;
    const bool victim = e->lock == "nightly-report";
    const bool terminated =
        e->kind == EventKind::kLockLost && e->cause == CauseOf(HoldEnd::kTerminated);
    if (victim) (terminated ? t.victims_terminated : t.victims_other) += 1;
    if (!victim) (e->kind == EventKind::kLockLost ? t.clean_lost : t.clean_released) += 1;
    if (e->evidence == EndEvidence::kLog || e->evidence == EndEvidence::kLogAndCounters) {
      ++t.from_log;
    }
  }
  return t;
}

TEST(ServerLog, TerminationsAmongCleanClosesOfTheSameDatabase) {
  // Each round: a holder is terminated while two other holders of the same database close
  // cleanly between the same two polls. The counters see one 'killed' end for three sessions;
  // the log names the one. Two pollers watch the same sessions in lockstep, one reading the log
  // and one without it: the first must be exact, the second is reported (the race it loses).
  // PGLOCK_RACE_ROUNDS sets the rounds (default 10).
  if (Pg().VersionNum() < 140000) GTEST_SKIP() << "the race is the 14+ session counters'";
  const char* env = std::getenv("PGLOCK_RACE_ROUNDS");
  const int rounds = env != nullptr ? std::atoi(env) : 10;
  Poller with_log(Target(Formats()[0]), TestPoll({.interval_ms = 200}));
  TargetConfig no_log_target = Target(Formats()[0]);
  no_log_target.server_log = ServerLogConfig{};
  Poller counters_only(no_log_target, TestPoll({.interval_ms = 200}));
  ASSERT_TRUE(WaitFor(5, [&] { return with_log.server_log()->reads_through() > 0; }));
  const auto poll_both = [&] {
    with_log.PollOnceForTest();
    counters_only.PollOnceForTest();
  };
  for (int round = 0; round < rounds; ++round) {
    // The clean closes connect first: their sessions come first where the counters' ends are
    // handed out, as any session of the database may.
    TestSession clean1(Pg().Dsn() + " application_name=clean-a");
    TestSession clean2(Pg().Dsn() + " application_name=clean-b");
    TestSession victim(Pg().Dsn() + " application_name=victim");
    victim.Query("SELECT pg_advisory_lock(4242)");
    clean1.Query("SELECT pg_advisory_lock(" + std::to_string(100 + round) + ")");
    clean2.Query("SELECT pg_advisory_lock(" + std::to_string(200 + round) + ")");
    poll_both();
    clean1.Close();
    Pg().Scalar("SELECT pg_terminate_backend(" + std::to_string(victim.Pid()) + ")");
    clean2.Close();
    ASSERT_TRUE(WaitFor(15, [&] {
      poll_both();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return EventOf(with_log, "lock_lost", victim.Pid()) != nullptr ||
             EventOf(with_log, "lock_released", victim.Pid()) != nullptr;
    }));
  }
  // Every pending judgement settles.
  for (int i = 0; i < 15; ++i) {
    poll_both();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const Tally log = TallyOf(with_log), counters = TallyOf(counters_only);
  std::printf(
      "race: %d rounds, 1 termination + 2 clean closes each. With the log: %d victims "
      "terminated, %d judged otherwise, %d clean closes released, %d judged lost (%d on the "
      "log's word). Counters alone: %d victims terminated, %d judged otherwise, %d clean closes "
      "released, %d judged lost.\n",
      rounds, log.victims_terminated, log.victims_other, log.clean_released, log.clean_lost,
      log.from_log, counters.victims_terminated, counters.victims_other, counters.clean_released,
      counters.clean_lost);
  EXPECT_EQ(log.victims_terminated, rounds);
  EXPECT_EQ(log.victims_other, 0);
  EXPECT_EQ(log.clean_released, 2 * rounds);
  EXPECT_EQ(log.clean_lost, 0);
  EXPECT_EQ(log.from_log, 3 * rounds);
}

TEST(ServerLog, ALossAfterARotationIsReadFromTheNewFile) {
  for (const std::string& format : Formats()) {
    Poller poller(Target(format), TestPoll({.interval_ms = 200}));
    ASSERT_TRUE(WaitFor(5, [&] { return poller.server_log()->reads_through() > 0; }));
    TestSession holder(Pg().Dsn() + " application_name=rotated");
    holder.Query("SELECT pg_advisory_lock(4242)");
    poller.PollOnceForTest();
    const std::string before = poller.server_log()->Status()->file;
    // A new file by name (log_filename has seconds: the next second's name).
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    Pg().Scalar("SELECT pg_rotate_logfile()");
    ASSERT_TRUE(WaitFor(10,
                        [&] {
                          TestSession(Pg().Dsn()).Close();  // a line for the new file
                          std::this_thread::sleep_for(std::chrono::milliseconds(200));
                          return poller.server_log()->Status()->file != before;
                        }))
        << format << ": still reading " << before;
    const int pid = holder.Pid();
    Pg().Scalar("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
    ExpectLoss(PollUntilEnded(poller, pid), "terminated", format);
  }
}

TEST(ServerLog, InAnotherLanguageEndsAreReadBySqlstateAndWaitsAreNotCountedAsSilence) {
  // lc_messages is a session's own: a German session's FATAL and wait lines are German. Needs a
  // de_DE.UTF-8 locale (scripts/install-deps.sh makes one) and a server built with translations
  // (Debian's are; the npm packages of other majors are not).
  TestSession probe(Pg().Dsn());
  if (!probe.QueryError("SET lc_messages = 'de_DE.UTF-8'").empty()) {
    GTEST_SKIP() << "no de_DE.UTF-8 locale on this machine";
  }
  if (probe.QueryError("SELECT 1/0").find("Division durch Null") == std::string::npos) {
    GTEST_SKIP() << "this server has no German messages";
  }
  const std::string format = Formats()[0];
  Poller poller(Target(format), TestPoll({.interval_ms = 200}));
  ASSERT_TRUE(WaitFor(5, [&] { return poller.server_log()->reads_through() > 0; }));
  {
    TestSession victim(Pg().Dsn() + " application_name=opfer");
    victim.Query("SET lc_messages = 'de_DE.UTF-8'");
    victim.Query("SELECT pg_advisory_lock(4242)");
    const int pid = victim.Pid();
    poller.PollOnceForTest();
    Pg().Scalar("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
    ExpectLoss(PollUntilEnded(poller, pid), "terminated", format);
  }
  TestSession holder(Pg().Dsn() + " application_name=halter");
  TestSession waiter(Pg().Dsn() + " application_name=wartend");
  waiter.Query("SET lc_messages = 'de_DE.UTF-8'");
  holder.Query("SELECT pg_advisory_lock(4243)");
  waiter.Send("SELECT pg_advisory_lock(4243)");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  holder.Query("SELECT pg_advisory_unlock(4243)");
  ASSERT_TRUE(WaitFor(5, [&] { return waiter.SendDone(); }));
  ASSERT_TRUE(WaitFor(10, [&] {
    poller.PollOnceForTest();
    return poller.server_log()->Status()->untranslated;
  })) << "a German wait line went unnoticed";
  const auto samples = PollAndScrape(poller);
  EXPECT_EQ(Value(samples, "pglock_server_log_untranslated", {}), 1);
  EXPECT_TRUE(testing::Select(samples, "pglock_logged_lock_waits_total").empty())
      << "a wait the exporter cannot read is neither counted nor a zero";
}

TEST(ServerLog, ServerRestartIsAServerRestartLoss) {
  // Last: it restarts the binary's server.
  const std::string format = Formats()[0];
  Poller poller(Target(format), TestPoll({.interval_ms = 200}));
  auto s = std::make_unique<TestSession>(Pg().Dsn());
  s->Query("SELECT pg_advisory_lock(4242)");
  const int pid = s->Pid();
  poller.PollOnceForTest();
  ASSERT_TRUE(Pg().RestartServer());
  const auto e = PollUntilEnded(poller, pid);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->cause, CauseOf(HoldEnd::kServerRestart));
}

}  // namespace
}  // namespace pglock
