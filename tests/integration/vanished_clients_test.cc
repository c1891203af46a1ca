// Clients that vanish while their session sits idle holding a session lock, on a real server with
// log_disconnections on: PostgreSQL logs their EOF only at DEBUG1, so the log shows the same
// disconnection line as for a clean close, and the database's sessions_abandoned tells the two
// apart. Each holder is a psql process of its own, killed with SIGKILL or closed cleanly (its input
// closed: it sends Terminate). Two pollers watch in lockstep, one reading the log and one without
// it. The holders use a database of their own, so that the test's other sessions (each a clean
// close of `postgres`) share no interval's ends with them. The same with the real lock libraries
// from npm (advisory-lock 2.0.0, node-pg-migrate 9.0.0: scripts/lib/lock_libraries.sh installs
// them into a cache), each holder a node process (tests/integration/npm/holder.js) killed with
// SIGKILL, ended with process.exit() without unlocking, or unlocking and closing cleanly.
#include <gtest/gtest.h>
#include <signal.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "exporter/poll/poller.h"
#include "tests/support/build_paths.h"
#include "tests/support/client_process.h"
#include "tests/support/lock_libraries.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::ClientProcess;
using testing::LockLibrariesPath;
using testing::Pg;
using testing::TestPoll;
using testing::TestSession;
using testing::WaitFor;

constexpr char kDb[] = "vanishing";

TargetConfig Target(bool with_log) {
  TargetConfig t = testing::TestTarget(Pg().Dsn(),
                                       "[[targets.locks]]\nname = \"leader\"\nkey = 4242\n"
                                       "[targets.server_log]\npath = \"" +
                                           Pg().LogDir() + "\"\nformat = \"" +
                                           (Pg().VersionNum() >= 150000 ? "jsonlog" : "csvlog") +
                                           "\"\nread_interval = \"200ms\"\n");
  if (!with_log) t.server_log = ServerLogConfig{};
  return t;
}

// A psql process holding advisory lock `key` in kDb, idle outside a transaction.
class PsqlHolder {
 public:
  PsqlHolder(const std::string& app, int key)
      : psql_({"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
               Pg().Dsn(kDb) + " application_name=" + app}) {
    psql_.Write("SELECT pg_advisory_lock(" + std::to_string(key) + ");\n");
    const std::string sql =
        "SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid WHERE "
        "l.locktype = 'advisory' AND l.granted AND l.objid = " +
        std::to_string(key) + " AND a.application_name = '" + app + "'";
    WaitFor(10, [&] {
      const std::string pid = Pg().Scalar(sql);
      if (!pid.empty()) pid_ = std::stoi(pid);
      return pid_ != 0;
    });
  }
  int pid() const { return pid_; }
  ClientProcess& process() { return psql_; }
  // Its backend is gone from pg_stat_activity (10 s at most).
  bool WaitGone() const {
    return WaitFor(10, [&] {
      return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                         std::to_string(pid_)) == "0";
    });
  }

 private:
  ClientProcess psql_;
  int pid_ = 0;
};

// A node process holding an advisory lock in kDb with `library`, idle outside a transaction.
class LibraryHolder {
 public:
  LibraryHolder(const std::string& library, const std::string& app)
      : node_({"node", testing::SourceDir() + "/tests/integration/npm/holder.js", library,
               "postgresql://postgres@127.0.0.1:" + std::to_string(Pg().port()) + "/" + kDb +
                   "?application_name=" + app},
              {"NODE_PATH=" + LockLibrariesPath()}) {
    WaitFor(20, [&] {
      const std::string out = node_.Output();
      const size_t at = out.find("held ");
      if (at == std::string::npos || out.find('\n', at) == std::string::npos) return false;
      key_ = out.substr(at + 5, out.find('\n', at) - at - 5);
      return true;
    });
    const std::string pid = Pg().Scalar(
        "SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid WHERE "
        "l.locktype = 'advisory' AND l.granted AND a.application_name = '" +
        app + "'");
    if (!key_.empty() && !pid.empty()) pid_ = std::stoi(pid);
  }
  int pid() const { return pid_; }
  // The key as pg_advisory_lock takes it.
  const std::string& key() const { return key_; }
  testing::ClientProcess& process() { return node_; }
  bool WaitGone() const {
    return WaitFor(10, [&] {
      return Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                         std::to_string(pid_)) == "0";
    });
  }

 private:
  testing::ClientProcess node_;
  std::string key_;
  int pid_ = 0;
};

// The newest lock_lost or lock_released event for `pid`, and the takeover or hand-over after it.
struct Ended {
  std::shared_ptr<const Event> end;
  std::shared_ptr<const Event> next_holder;
};

Ended EndedOf(const Poller& poller, int pid) {
  Ended out;
  const auto snap = poller.Latest();
  if (!snap || !snap->events) return out;
  for (const auto& e : *snap->events) {
    if (e->previous.pid != pid) continue;
    if (e->kind == EventKind::kLockLost || e->kind == EventKind::kLockReleased) out.end = e;
    if (e->kind == EventKind::kLockTakeover || e->kind == EventKind::kLockHandover) {
      out.next_holder = e;
    }
  }
  return out;
}

std::string Describe(const char* who, const Ended& e) {
  if (!e.end) return std::string(who) + ": no event";
  return std::string(who) + ": " + EventKindName(e.end->kind) +
         " cause=" + EventCauseName(e.end->cause) +
         " evidence=" + EndEvidenceLabel(e.end->evidence) +
         (e.next_holder ? std::string(", then ") + EventKindName(e.next_holder->kind) : "");
}

class VanishedClients : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Pg().VersionNum() < 140000) GTEST_SKIP() << "no sessions_abandoned before 14";
    if (Pg().Scalar(std::string("SELECT count(*) FROM pg_database WHERE datname = '") + kDb +
                    "'") == "0") {
      Pg().Exec(std::string("CREATE DATABASE ") + kDb);
    }
    with_log_ = std::make_unique<Poller>(Target(true), TestPoll({.interval_ms = 200}));
    counters_only_ = std::make_unique<Poller>(Target(false), TestPoll({.interval_ms = 200}));
    PollBoth();
    // The reader starts at the end of the log: nothing before this counts.
    ASSERT_TRUE(WaitFor(5, [&] { return with_log_->server_log()->reads_through() > 0; }));
  }

  void PollBoth() {
    with_log_->PollOnceForTest();
    counters_only_->PollOnceForTest();
  }

  // Polls both every 200 ms until each has judged the lock of every one of `pids` (20 s at most).
  bool PollUntilJudged(const std::vector<int>& pids) {
    return WaitFor(20, [&] {
      PollBoth();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      for (const int pid : pids) {
        if (!EndedOf(*with_log_, pid).end || !EndedOf(*counters_only_, pid).end) return false;
      }
      return true;
    });
  }

  std::unique_ptr<Poller> with_log_;
  std::unique_ptr<Poller> counters_only_;
};

void ExpectEnd(const Ended& e, EventKind kind, EventCause cause, EndEvidence evidence) {
  ASSERT_NE(e.end, nullptr);
  EXPECT_EQ(e.end->kind, kind) << EventKindName(e.end->kind);
  EXPECT_EQ(e.end->cause, cause) << EventCauseName(e.end->cause);
  EXPECT_EQ(e.end->evidence, evidence) << EndEvidenceLabel(e.end->evidence);
}

TEST_F(VanishedClients, AHolderKilledWhileIdleIsConnectionLostAndItsKeyTakenOver) {
  PsqlHolder holder("leader-killed", 4242);
  ASSERT_NE(holder.pid(), 0) << holder.process().Output();
  PollBoth();
  holder.process().Kill(SIGKILL);
  ASSERT_TRUE(holder.WaitGone());
  TestSession next(Pg().Dsn(kDb) + " application_name=leader-next");
  next.Query("SELECT pg_advisory_lock(4242)");
  ASSERT_TRUE(PollUntilJudged({holder.pid()}));
  const Ended log = EndedOf(*with_log_, holder.pid());
  const Ended counters = EndedOf(*counters_only_, holder.pid());
  std::printf("SIGKILL while idle: %s; %s\n", Describe("with the log", log).c_str(),
              Describe("counters alone", counters).c_str());
  ExpectEnd(log, EventKind::kLockLost, CauseOf(HoldEnd::kConnectionLost),
            EndEvidence::kLogAndCounters);
  ExpectEnd(counters, EventKind::kLockLost, CauseOf(HoldEnd::kConnectionLost),
            EndEvidence::kCounters);
  for (const Ended* e : {&log, &counters}) {
    ASSERT_NE(e->next_holder, nullptr);
    EXPECT_EQ(e->next_holder->kind, EventKind::kLockTakeover);
  }
}

TEST_F(VanishedClients, ACleanCloseIsAReleaseAndAHandOver) {
  PsqlHolder holder("leader-closed", 4242);
  ASSERT_NE(holder.pid(), 0) << holder.process().Output();
  PollBoth();
  holder.process().CloseInput();  // psql sends Terminate and exits
  ASSERT_NE(holder.process().Wait(10), -1);
  ASSERT_TRUE(holder.WaitGone());
  TestSession next(Pg().Dsn(kDb) + " application_name=leader-next");
  next.Query("SELECT pg_advisory_lock(4242)");
  ASSERT_TRUE(PollUntilJudged({holder.pid()}));
  const Ended log = EndedOf(*with_log_, holder.pid());
  const Ended counters = EndedOf(*counters_only_, holder.pid());
  std::printf("clean close: %s; %s\n", Describe("with the log", log).c_str(),
              Describe("counters alone", counters).c_str());
  ExpectEnd(log, EventKind::kLockReleased, CauseOf(HoldEnd::kCleanClose),
            EndEvidence::kLogAndCounters);
  ExpectEnd(counters, EventKind::kLockReleased, CauseOf(HoldEnd::kCleanClose),
            EndEvidence::kCounters);
  for (const Ended* e : {&log, &counters}) {
    ASSERT_NE(e->next_holder, nullptr);
    EXPECT_EQ(e->next_holder->kind, EventKind::kLockHandover);
  }
}

TEST_F(VanishedClients, OneKilledAndOneClosedInOneIntervalAreUndetermined) {
  // Both end between the same two polls, in the same database: one abandoned end, two
  // disconnection lines. The log cannot say whose; the counters alone pin it on one of them.
  PsqlHolder killed("holder-killed", 4242), closed("holder-closed", 4343);
  ASSERT_NE(killed.pid(), 0) << killed.process().Output();
  ASSERT_NE(closed.pid(), 0) << closed.process().Output();
  PollBoth();
  killed.process().Kill(SIGKILL);
  closed.process().CloseInput();
  ASSERT_NE(closed.process().Wait(10), -1);
  ASSERT_TRUE(killed.WaitGone());
  ASSERT_TRUE(closed.WaitGone());
  ASSERT_TRUE(PollUntilJudged({killed.pid(), closed.pid()}));
  for (PsqlHolder* h : {&killed, &closed}) {
    const Ended log = EndedOf(*with_log_, h->pid());
    std::printf("one killed + one closed, %s: %s; %s\n", h == &killed ? "killed" : "closed",
                Describe("with the log", log).c_str(),
                Describe("counters alone", EndedOf(*counters_only_, h->pid())).c_str());
    ExpectEnd(log, EventKind::kLockLost, CauseOf(HoldEnd::kUndetermined),
              EndEvidence::kLogAndCounters);
  }
}

// How a test ends a library's holder.
enum class HolderEnd { kSigkill, kProcessExit, kUnlock };

const char* HolderEndName(HolderEnd end) {
  switch (end) {
    case HolderEnd::kSigkill:
      return "SIGKILL";
    case HolderEnd::kProcessExit:
      return "process.exit()";
    case HolderEnd::kUnlock:
      return "unlock and close";
  }
  return "";
}

class LockLibraries : public VanishedClients,
                      public ::testing::WithParamInterface<std::tuple<const char*, HolderEnd>> {};

TEST_P(LockLibraries, AHolderEndedWhileIdle) {
  const auto [library, how] = GetParam();
  ASSERT_FALSE(LockLibrariesPath().empty()) << "scripts/lib/lock_libraries.sh failed";
  LibraryHolder holder(library, std::string("npm-") + library);
  ASSERT_NE(holder.pid(), 0) << holder.process().Output();
  PollBoth();
  if (how == HolderEnd::kSigkill) {
    holder.process().Kill(SIGKILL);
  } else {
    holder.process().Write(how == HolderEnd::kProcessExit ? "exit\n" : "finish\n");
    ASSERT_EQ(holder.process().Wait(10), 0) << holder.process().Output();
  }
  ASSERT_TRUE(holder.WaitGone());
  TestSession next(Pg().Dsn(kDb) + " application_name=npm-next");
  next.Query("SELECT pg_advisory_lock(" + holder.key() + ")");
  ASSERT_TRUE(PollUntilJudged({holder.pid()}));
  const Ended log = EndedOf(*with_log_, holder.pid());
  const Ended counters = EndedOf(*counters_only_, holder.pid());
  std::printf("%s, %s while idle: %s; %s\n", library, HolderEndName(how),
              Describe("with the log", log).c_str(), Describe("counters alone", counters).c_str());
  const bool lost = how != HolderEnd::kUnlock;
  ExpectEnd(log, lost ? EventKind::kLockLost : EventKind::kLockReleased,
            lost ? CauseOf(HoldEnd::kConnectionLost) : CauseOf(HoldEnd::kCleanClose),
            EndEvidence::kLogAndCounters);
  ExpectEnd(counters, lost ? EventKind::kLockLost : EventKind::kLockReleased,
            lost ? CauseOf(HoldEnd::kConnectionLost) : CauseOf(HoldEnd::kCleanClose),
            EndEvidence::kCounters);
  for (const Ended* e : {&log, &counters}) {
    ASSERT_NE(e->next_holder, nullptr);
    EXPECT_EQ(e->next_holder->kind, lost ? EventKind::kLockTakeover : EventKind::kLockHandover);
  }
}

INSTANTIATE_TEST_SUITE_P(RealLibraries, LockLibraries,
                         ::testing::Combine(::testing::Values("advisory-lock", "node-pg-migrate"),
                                            ::testing::Values(HolderEnd::kSigkill,
                                                              HolderEnd::kProcessExit,
                                                              HolderEnd::kUnlock)),
                         [](const auto& info) {
                           std::string name = std::string(std::get<0>(info.param)) + "_" +
                                              HolderEndName(std::get<1>(info.param));
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace pglock
