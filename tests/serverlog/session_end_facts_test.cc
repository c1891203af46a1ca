// ClassifyEnd and SessionEndFacts (exporter/serverlog/session_end_facts.h): each logged end by
// SQLSTATE, the disconnection line, the shutdown window and the bounds of the store.
#include "exporter/serverlog/session_end_facts.h"

#include <gtest/gtest.h>

#include <string>

namespace pglock {
namespace {

constexpr double kStart = 1714564784;  // 2024-05-01 11:59:44 UTC

// A client backend's record; each session its own pid, application and address.
LogRecord ClientRecord(int pid, double time, const std::string& severity,
                       const std::string& sqlstate, const std::string& message) {
  LogRecord r;
  r.log_time = time;
  r.user = "app";
  r.dbname = "appdb";
  r.pid = pid;
  r.session_pid = pid;
  r.session_start = static_cast<int64_t>(kStart);
  r.remote_host = "10.0.0." + std::to_string(pid % 250);
  r.application_name = "worker-" + std::to_string(pid);
  r.backend_type = "client backend";
  r.error_severity = severity;
  r.state_code = sqlstate;
  r.message = message;
  return r;
}

LogRecord Disconnection(int pid, double time) {
  return ClientRecord(pid, time, "LOG", "00000",
                      "disconnection: session time: 0:01:02.003 user=app database=appdb "
                      "host=10.0.0.1 port=50000");
}

LogRecord Postmaster(double time, const std::string& message) {
  LogRecord r;
  r.log_time = time;
  r.pid = 1000;
  r.backend_type = "postmaster";
  r.error_severity = "LOG";
  r.state_code = "00000";
  r.message = message;
  return r;
}

HoldEnd EndOf(const LogRecord& r) {
  const std::optional<LoggedEnd> end = ClassifyEnd(r);
  return end ? end->end : HoldEnd::kStillConnected;  // kStillConnected: no end reported
}

TEST(ClassifyEndTest, BySqlstateInAnyLanguage) {
  const double t = kStart + 60;
  EXPECT_EQ(EndOf(ClientRecord(1, t, "FATAL", "57P01", "Beende Verbindung")), HoldEnd::kTerminated);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "FATAL", "25P03", "x")), HoldEnd::kIdleInTransactionTimeout);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "FATAL", "57P05", "x")), HoldEnd::kIdleSessionTimeout);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "FATAL", "25P04", "x")), HoldEnd::kTransactionTimeout);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "LOG", "08P01", "unexpected EOF on client connection")),
            HoldEnd::kConnectionLost);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "LOG", "08006", "could not receive data from client")),
            HoldEnd::kConnectionLost);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "WARNING", "57P02", "crash of another server process")),
            HoldEnd::kServerRestart);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "FATAL", "57P03", "the database system is shutting down")),
            HoldEnd::kServerRestart);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "FATAL", "53300", "too many connections")), HoldEnd::kUnknown);
  EXPECT_EQ(EndOf(Disconnection(1, t)), HoldEnd::kCleanClose);
  const std::optional<LoggedEnd> end = ClassifyEnd(ClientRecord(1, t, "FATAL", "25P03", "x"));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->sqlstate, "25P03");
  EXPECT_EQ(end->time, t);
}

TEST(ClassifyEndTest, IgnoresWhatEndsNoClientSession) {
  const double t = kStart + 60;
  // Errors that leave the session alive.
  EXPECT_EQ(EndOf(ClientRecord(1, t, "ERROR", "55P03", "could not obtain lock")),
            HoldEnd::kStillConnected);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "ERROR", "57014", "canceling statement")),
            HoldEnd::kStillConnected);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "ERROR", "08P01", "insufficient data left in message")),
            HoldEnd::kStillConnected);
  EXPECT_EQ(EndOf(ClientRecord(1, t, "LOG", "00000", "connection authorized")),
            HoldEnd::kStillConnected);
  // Not a client backend.
  LogRecord autovacuum = ClientRecord(1, t, "FATAL", "57P01", "terminating autovacuum process");
  autovacuum.backend_type = "autovacuum worker";
  EXPECT_EQ(EndOf(autovacuum), HoldEnd::kStillConnected);
  // csvlog of 12: no backend_type; a client backend is one with a user or a database.
  LogRecord old = ClientRecord(1, t, "FATAL", "57P01", "x");
  old.backend_type.clear();
  EXPECT_EQ(EndOf(old), HoldEnd::kTerminated);
  old.user.clear();
  old.dbname.clear();
  EXPECT_EQ(EndOf(old), HoldEnd::kStillConnected);
}

TEST(SessionEndFactsTest, FindsEndsBySessionAndTheFirstEndStands) {
  SessionEndFacts facts;
  facts.Add(ClientRecord(101, kStart + 10, "FATAL", "57P01", "terminating connection"));
  facts.Add(Disconnection(101, kStart + 10.001));
  facts.Add(ClientRecord(102, kStart + 11, "FATAL", "25P03", "idle-in-transaction timeout"));
  facts.Add(Disconnection(103, kStart + 12));
  ASSERT_TRUE(facts.Find(101, kStart + 0.654321));  // backend_start has microseconds
  EXPECT_EQ(facts.Find(101, kStart + 0.654321)->end, HoldEnd::kTerminated);
  EXPECT_EQ(facts.Find({102, kStart})->end, HoldEnd::kIdleInTransactionTimeout);
  EXPECT_EQ(facts.Find(103, kStart)->end, HoldEnd::kCleanClose);
  EXPECT_FALSE(facts.Find(101, kStart + 1));  // the pid reused by a later session
  EXPECT_FALSE(facts.Find(104, kStart));
  EXPECT_TRUE(facts.disconnections_logged());
  EXPECT_EQ(facts.size(), 3u);
}

TEST(SessionEndFactsTest, NoDisconnectionLineMeansNoneLogged) {
  SessionEndFacts facts;
  facts.Add(ClientRecord(101, kStart + 10, "FATAL", "57P01", "terminating connection"));
  EXPECT_FALSE(facts.disconnections_logged());
}

TEST(SessionEndFactsTest, TerminationsDuringAShutdownAreAServerRestart) {
  SessionEndFacts facts;
  facts.Add(ClientRecord(101, kStart + 10, "FATAL", "57P01", "terminating connection"));
  facts.Add(Postmaster(kStart + 20, "received fast shutdown request"));
  facts.Add(ClientRecord(102, kStart + 20.5, "FATAL", "57P01", "terminating connection"));
  facts.Add(ClientRecord(103, kStart + 81, "FATAL", "57P01", "terminating connection"));
  EXPECT_EQ(facts.Find(101, kStart)->end, HoldEnd::kTerminated);     // before it
  EXPECT_EQ(facts.Find(102, kStart)->end, HoldEnd::kServerRestart);  // within 60 s
  EXPECT_EQ(facts.Find(103, kStart)->end, HoldEnd::kTerminated);     // long after
  EXPECT_TRUE(IsShutdownRequest(Postmaster(0, "received smart shutdown request")));
  EXPECT_TRUE(IsShutdownRequest(Postmaster(0, "received immediate shutdown request")));
  EXPECT_FALSE(IsShutdownRequest(Postmaster(0, "received SIGHUP, reloading configuration files")));
}

TEST(SessionEndFactsTest, KeepsAtMostMaxSessionsOldestFirst) {
  SessionEndFacts facts(/*max_sessions=*/3, /*retention_seconds=*/900);
  for (int pid = 1; pid <= 5; ++pid) {
    facts.Add(ClientRecord(pid, kStart + pid, "FATAL", "57P01", "terminating connection"));
  }
  EXPECT_EQ(facts.size(), 3u);
  EXPECT_FALSE(facts.Find(1, kStart));
  EXPECT_FALSE(facts.Find(2, kStart));
  EXPECT_TRUE(facts.Find(3, kStart));
  EXPECT_TRUE(facts.Find(5, kStart));
}

TEST(SessionEndFactsTest, ForgetsEndsOlderThanTheRetention) {
  SessionEndFacts facts(/*max_sessions=*/100, /*retention_seconds=*/60);
  facts.Add(ClientRecord(1, kStart + 10, "FATAL", "57P01", "terminating connection"));
  facts.Add(ClientRecord(2, kStart + 50, "FATAL", "57P01", "terminating connection"));
  facts.Add(ClientRecord(3, kStart + 80, "FATAL", "57P01", "terminating connection"));
  EXPECT_FALSE(facts.Find(1, kStart));  // 70 s behind the newest
  EXPECT_TRUE(facts.Find(2, kStart));
  EXPECT_TRUE(facts.Find(3, kStart));
  EXPECT_EQ(facts.size(), 2u);
}

TEST(SessionEndFactsTest, EndsOfADatabaseBetweenTwoTimes) {
  // What a no-cause end is judged against: every end of its database in the interval, those of
  // sessions no poll saw included.
  SessionEndFacts facts;
  facts.Add(Disconnection(1, kStart + 1));
  facts.Add(ClientRecord(2, kStart + 2, "LOG", "08006", "unexpected EOF"));
  facts.Add(Disconnection(3, kStart + 5));
  LogRecord other_db = Disconnection(4, kStart + 2);
  other_db.dbname = "otherdb";
  facts.Add(other_db);
  const std::vector<LoggedSessionEnd> ends = facts.EndsBetween("appdb", kStart + 1, kStart + 2);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0].session, SessionId(1, kStart));
  EXPECT_EQ(ends[0].end, HoldEnd::kCleanClose);
  EXPECT_EQ(ends[1].session, SessionId(2, kStart));
  EXPECT_EQ(ends[1].end, HoldEnd::kConnectionLost);
  EXPECT_TRUE(facts.EndsBetween("appdb", kStart + 6, kStart + 9).empty());
}

}  // namespace
}  // namespace pglock
