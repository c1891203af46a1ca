// The server log reader against a real PostgreSQL (tests/support: logging_collector on, csvlog and,
// from 15, jsonlog, log_disconnections and log_lock_waits on, deadlock_timeout 1 s): the records
// the server writes when a session is terminated, times out idle in a transaction, loses its
// client or closes, read from the files and over SQL, and judged by SessionEndFacts; and those it
// writes when a session waits for a lock, gives up on lock_timeout or NOWAIT, or is in a deadlock,
// read by ClassifyLockRecord.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exporter/serverlog/lock_records.h"
#include "exporter/serverlog/log_follower.h"
#include "exporter/serverlog/session_end_facts.h"
#include "tests/support/pg_environment.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::TestSession;

std::vector<LogFormat> Formats() {
  if (Pg().VersionNum() >= 150000) return {LogFormat::kJsonlog, LogFormat::kCsvlog};
  return {LogFormat::kCsvlog};
}

// A follower feeding SessionEndFacts.
struct Reader {
  Reader(std::unique_ptr<LogSource> source, LogFormat format)
      : follower(std::move(source), format) {}

  void Poll() {
    const Status s = follower.Poll([&](const LogRecord& r) { facts.Add(r); });
    EXPECT_TRUE(s.ok()) << s.message();
  }

  // Polls until the log has given the session's end, for up to 10 s.
  std::optional<LoggedEnd> WaitForEnd(int pid, double backend_start) {
    std::optional<LoggedEnd> end;
    testing::WaitFor(10, [&] {
      Poll();
      end = facts.Find(pid, backend_start);
      return end.has_value();
    });
    return end;
  }

  LogFollower follower;
  SessionEndFacts facts;
};

// A client session, its pid and backend start (epoch seconds, microseconds kept).
struct Client {
  explicit Client(const std::string& application) : session(Pg().Dsn()) {
    session.Query("SET application_name = '" + application + "'");
    pid = session.Pid();
    backend_start =
        std::stod(session.Query("SELECT extract(epoch FROM backend_start) FROM pg_stat_activity "
                                "WHERE pid = pg_backend_pid()"));
  }
  TestSession session;
  int pid = 0;
  double backend_start = 0;
};

HoldEnd EndOf(const std::optional<LoggedEnd>& end) {
  return end ? end->end : HoldEnd::kStillConnected;  // kStillConnected: not logged
}

TEST(ServerLog, FilesTellHowEachSessionEnded) {
  for (LogFormat format : Formats()) {
    SCOPED_TRACE(LogFormatName(format));
    Reader reader(MakeFileLogSource(Pg().LogDir(), format), format);
    reader.Poll();  // positions at the end
    Client terminated("terminated"), idle("idle_in_tx"), lost("lost"), closed("closed");
    Pg().Exec("SELECT pg_terminate_backend(" + std::to_string(terminated.pid) + ")");
    idle.session.Query("SET idle_in_transaction_session_timeout = '200ms'");
    idle.session.Query("BEGIN");
    idle.session.Query("SELECT 1");
    lost.session.Query("BEGIN");
    lost.session.AbandonSocket();
    closed.session.Close();

    const auto t = reader.WaitForEnd(terminated.pid, terminated.backend_start);
    EXPECT_EQ(EndOf(t), HoldEnd::kTerminated);
    if (t) {
      EXPECT_EQ(t->sqlstate, "57P01");
    }
    EXPECT_EQ(EndOf(reader.WaitForEnd(idle.pid, idle.backend_start)),
              HoldEnd::kIdleInTransactionTimeout);
    EXPECT_EQ(EndOf(reader.WaitForEnd(lost.pid, lost.backend_start)), HoldEnd::kConnectionLost);
    EXPECT_EQ(EndOf(reader.WaitForEnd(closed.pid, closed.backend_start)), HoldEnd::kCleanClose);
    EXPECT_TRUE(reader.facts.disconnections_logged());
    EXPECT_EQ(reader.follower.stats().unparsed, 0u);
  }
}

TEST(ServerLog, SqlSourceReadsTheLogOverTheConnection) {
  const LogFormat format = Formats().front();
  Reader reader(MakeSqlLogSource(Pg().Dsn(), format, std::chrono::seconds(5)), format);
  reader.Poll();
  EXPECT_FALSE(reader.follower.current_file().empty());
  Client terminated("terminated_sql");
  Pg().Exec("SELECT pg_terminate_backend(" + std::to_string(terminated.pid) + ")");
  EXPECT_EQ(EndOf(reader.WaitForEnd(terminated.pid, terminated.backend_start)),
            HoldEnd::kTerminated);
  EXPECT_GT(reader.follower.stats().records, 0u);
  EXPECT_EQ(reader.follower.stats().unparsed, 0u);
}

TEST(ServerLog, SqlSourceNamesTheMissingPrivilege) {
  Pg().Exec("DROP ROLE IF EXISTS log_reader_nopriv");
  Pg().Exec("CREATE ROLE log_reader_nopriv LOGIN");
  const LogFormat format = Formats().front();
  LogFollower follower(
      MakeSqlLogSource(Pg().Dsn("postgres", "log_reader_nopriv"), format, std::chrono::seconds(5)),
      format);
  const Status s = follower.Poll([](const LogRecord&) {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pg_ls_logdir"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("permission denied"), std::string::npos) << s.message();
}

// One follower per format, positioned at the end of the log, collecting the lock records.
class LockReader {
 public:
  LockReader() {
    for (LogFormat format : Formats()) {
      formats_.push_back(format);
      followers_.push_back(
          std::make_unique<LogFollower>(MakeFileLogSource(Pg().LogDir(), format), format));
      records_.emplace_back();
    }
    Poll();
  }

  // Polls every format until `match` holds for one of its records, for up to 10 s; the first
  // matching record of each format (nullopt where none came).
  std::vector<std::optional<LockRecord>> WaitFor(
      const std::function<bool(const LockRecord&)>& match) {
    std::vector<std::optional<LockRecord>> found(followers_.size());
    testing::WaitFor(10, [&] {
      Poll();
      bool all = true;
      for (size_t i = 0; i < followers_.size(); ++i) {
        for (const LockRecord& r : records_[i]) {
          if (!found[i] && match(r)) found[i] = r;
        }
        all = all && found[i].has_value();
      }
      return all;
    });
    for (size_t i = 0; i < found.size(); ++i) {
      EXPECT_TRUE(found[i].has_value()) << LogFormatName(formats_[i]) << Seen(records_[i]);
    }
    return found;
  }

  int translated() const { return translated_; }

 private:
  // The lock records read, for a failure's message.
  static std::string Seen(const std::vector<LockRecord>& records) {
    std::string seen = "; lock records read:";
    for (const LockRecord& r : records) {
      seen += "\n  " + std::string(LockRecordKindName(r.kind)) + " pid " + std::to_string(r.pid) +
              ": " + r.message;
    }
    return seen;
  }

  void Poll() {
    for (size_t i = 0; i < followers_.size(); ++i) {
      const Status s = followers_[i]->Poll([&](const LogRecord& r) {
        if (std::optional<LockRecord> l = ClassifyLockRecord(r)) records_[i].push_back(*l);
        if (LooksLikeTranslatedLockWait(r)) ++translated_;
      });
      EXPECT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(followers_[i]->stats().unparsed, 0u);
    }
  }

  std::vector<LogFormat> formats_;
  std::vector<std::unique_ptr<LogFollower>> followers_;
  std::vector<std::vector<LockRecord>> records_;
  int translated_ = 0;
};

// A table of three rows the lock scenarios fight over, and the database's oid.
uint32_t SetUpJobs() {
  Pg().Exec("DROP TABLE IF EXISTS lockrec_jobs");
  Pg().Exec("CREATE TABLE lockrec_jobs (id int PRIMARY KEY, note text)");
  Pg().Exec("INSERT INTO lockrec_jobs VALUES (1, ''), (2, ''), (3, '')");
  return static_cast<uint32_t>(
      std::stoul(Pg().Scalar("SELECT oid FROM pg_database WHERE datname = 'postgres'")));
}

uint32_t BeginWithXid(Client* c) {
  return static_cast<uint32_t>(
      std::stoul(c->session.Query("BEGIN; SELECT txid_current() % 4294967296")));
}

bool Contains(const std::vector<int>& pids, int pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

TEST(ServerLogLocks, RowLockWaitIsLoggedWhileWaitingAndWhenAcquired) {
  SetUpJobs();
  LockReader reader;
  Client holder("lockrec_row_holder"), waiter("lockrec_row_waiter");
  const uint32_t xid = BeginWithXid(&holder);
  holder.session.Query("UPDATE lockrec_jobs SET note = 'holder' WHERE id = 1");
  const std::string update = "UPDATE lockrec_jobs SET note = 'waiter' WHERE id = 1";
  waiter.session.Send(update);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  holder.session.Query("COMMIT");
  EXPECT_TRUE(testing::WaitFor(10, [&] { return waiter.session.SendDone(); }));

  for (const auto& w : reader.WaitFor([&](const LockRecord& r) {
         return r.kind == LockRecordKind::kStillWaiting && r.pid == waiter.pid;
       })) {
    if (!w) continue;
    EXPECT_EQ(w->session_start, static_cast<int64_t>(std::floor(waiter.backend_start)));
    EXPECT_EQ(w->dbname, "postgres");
    EXPECT_EQ(w->user, "postgres");
    EXPECT_EQ(w->application_name, "lockrec_row_waiter");
    EXPECT_EQ(w->statement, update);
    EXPECT_EQ(w->mode, "ShareLock");
    EXPECT_EQ(w->lock.locktype, "transactionid");
    EXPECT_EQ(w->lock.field[0], xid);
    EXPECT_EQ(w->lock.text, "transaction " + std::to_string(xid));
    EXPECT_GE(w->waited_seconds, 1.0);
    EXPECT_LT(w->waited_seconds, 1.5);
    EXPECT_EQ(w->holders, std::vector<int>{holder.pid});
    EXPECT_TRUE(Contains(w->queue, waiter.pid));
  }
  for (const auto& a : reader.WaitFor([&](const LockRecord& r) {
         return r.kind == LockRecordKind::kAcquired && r.pid == waiter.pid;
       })) {
    if (!a) continue;
    EXPECT_EQ(a->lock.field[0], xid);
    EXPECT_GE(a->waited_seconds, 1.4);
    EXPECT_LT(a->waited_seconds, 10);
    EXPECT_TRUE(a->holders.empty());
  }
  EXPECT_EQ(reader.translated(), 0);
}

TEST(ServerLogLocks, AdvisoryWaitNamesItsKey) {
  const uint32_t database = SetUpJobs();
  LockReader reader;
  Client holder("lockrec_adv_holder"), waiter("lockrec_adv_waiter");
  holder.session.Query("SELECT pg_advisory_lock(4242)");
  waiter.session.Send("SELECT pg_advisory_lock(4242)");
  const auto waits = reader.WaitFor([&](const LockRecord& r) {
    return r.kind == LockRecordKind::kStillWaiting && r.pid == waiter.pid;
  });
  holder.session.Query("SELECT pg_advisory_unlock(4242)");
  EXPECT_TRUE(testing::WaitFor(10, [&] { return waiter.session.SendDone(); }));
  waiter.session.Query("SELECT pg_advisory_unlock(4242)");
  for (const auto& w : waits) {
    if (!w) continue;
    EXPECT_EQ(w->mode, "ExclusiveLock");
    EXPECT_EQ(w->lock.locktype, "advisory");
    EXPECT_EQ(w->lock.database, database);
    EXPECT_EQ(w->lock.field[0], database);
    EXPECT_EQ(w->lock.field[1], 0u);
    EXPECT_EQ(w->lock.field[2], 4242u);
    EXPECT_EQ(w->lock.field[3], 1u);  // a bigint key
    EXPECT_EQ(w->holders, std::vector<int>{holder.pid});
    EXPECT_EQ(w->application_name, "lockrec_adv_waiter");
  }
}

TEST(ServerLogLocks, LockTimeoutNamesTheSessionAndTheRowsRelation) {
  SetUpJobs();
  LockReader reader;
  Client holder("lockrec_lt_holder"), waiter("lockrec_lt_waiter");
  holder.session.Query("BEGIN");
  holder.session.Query("UPDATE lockrec_jobs SET note = 'holder' WHERE id = 2");
  waiter.session.Query("SET lock_timeout = '200ms'");
  const std::string update = "UPDATE lockrec_jobs SET note = 'waiter' WHERE id = 2";
  EXPECT_NE(waiter.session.QueryError(update).find("lock timeout"), std::string::npos);
  holder.session.Query("ROLLBACK");
  for (const auto& t : reader.WaitFor([&](const LockRecord& r) { return r.pid == waiter.pid; })) {
    if (!t) continue;
    EXPECT_EQ(t->kind, LockRecordKind::kLockTimeout);
    EXPECT_EQ(t->sqlstate, "55P03");
    EXPECT_EQ(t->session_start, static_cast<int64_t>(std::floor(waiter.backend_start)));
    EXPECT_EQ(t->application_name, "lockrec_lt_waiter");
    EXPECT_EQ(t->statement, update);
    EXPECT_EQ(t->relation_name, "lockrec_jobs");
  }
}

TEST(ServerLogLocks, NowaitFailuresNameTheirRelation) {
  SetUpJobs();
  const bool lock_failures = Pg().VersionNum() >= 180000;
  LockReader reader;
  Client holder("lockrec_nw_holder"), row("lockrec_nw_row"), table("lockrec_nw_table");
  holder.session.Query("BEGIN");
  holder.session.Query("SELECT * FROM lockrec_jobs WHERE id = 3 FOR UPDATE");
  if (lock_failures) row.session.Query("SET log_lock_failures = on");
  EXPECT_NE(row.session.QueryError("SELECT * FROM lockrec_jobs WHERE id = 3 FOR UPDATE NOWAIT")
                .find("could not obtain lock on row"),
            std::string::npos);
  table.session.Query("BEGIN");
  EXPECT_NE(table.session.QueryError("LOCK TABLE lockrec_jobs IN ACCESS EXCLUSIVE MODE NOWAIT")
                .find("could not obtain lock on relation"),
            std::string::npos);
  table.session.Query("ROLLBACK");
  holder.session.Query("ROLLBACK");
  for (const auto& n : reader.WaitFor([&](const LockRecord& r) {
         return r.pid == row.pid && r.kind != LockRecordKind::kLockFailure;
       })) {
    if (!n) continue;
    EXPECT_EQ(n->kind, LockRecordKind::kNowaitFailed);
    EXPECT_EQ(n->relation_name, "lockrec_jobs");
    EXPECT_EQ(n->message, "could not obtain lock on row in relation \"lockrec_jobs\"");
  }
  for (const auto& n : reader.WaitFor([&](const LockRecord& r) { return r.pid == table.pid; })) {
    if (!n) continue;
    EXPECT_EQ(n->kind, LockRecordKind::kNowaitFailed);
    EXPECT_EQ(n->relation_name, "lockrec_jobs");
  }
  if (!lock_failures) return;
  for (const auto& f : reader.WaitFor([&](const LockRecord& r) {
         return r.pid == row.pid && r.kind == LockRecordKind::kLockFailure;
       })) {
    if (!f) continue;
    EXPECT_FALSE(f->lock.locktype.empty()) << f->lock.text;
    EXPECT_EQ(f->holders, std::vector<int>{holder.pid});
  }
}

// A waits for B's row, B for C's, C for A's: one of them (the first to wait, normally) finds the
// cycle after deadlock_timeout and is cancelled; its ERROR names all three.
TEST(ServerLogLocks, ThreeSessionDeadlockNamesEveryProcessAndItsLock) {
  SetUpJobs();
  LockReader reader;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<uint32_t> xids;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<Client>("lockrec_dl_" + std::to_string(i + 1)));
    xids.push_back(BeginWithXid(clients[i].get()));
    clients[i]->session.Query("UPDATE lockrec_jobs SET note = 'mine' WHERE id = " +
                              std::to_string(i + 1));
  }
  std::vector<std::string> updates;
  for (int i = 0; i < 3; ++i) {
    updates.push_back("UPDATE lockrec_jobs SET note = 'theirs' WHERE id = " +
                      std::to_string((i + 1) % 3 + 1));
    clients[i]->session.Send(updates[i]);
  }
  auto index_of = [&](int pid) {
    for (int i = 0; i < 3; ++i) {
      if (clients[i]->pid == pid) return i;
    }
    return -1;
  };
  const auto deadlocks = reader.WaitFor([&](const LockRecord& r) {
    return r.kind == LockRecordKind::kDeadlock && index_of(r.pid) >= 0;
  });
  // The victim's rollback lets one other finish; its rollback frees the last.
  std::vector<bool> done(3, false);
  EXPECT_TRUE(testing::WaitFor(10, [&] {
    for (int i = 0; i < 3; ++i) {
      if (done[i] || !clients[i]->session.SendDone()) continue;
      clients[i]->session.Query("ROLLBACK");
      done[i] = true;
    }
    return done == std::vector<bool>(3, true);
  }));
  for (const auto& d : deadlocks) {
    if (!d) continue;
    EXPECT_EQ(d->sqlstate, "40P01");
    EXPECT_EQ(d->message, "deadlock detected");
    ASSERT_EQ(d->cycle.size(), 3u);
    EXPECT_FALSE(d->truncated);
    std::set<int> pids;
    for (const DeadlockProcess& p : d->cycle) {
      SCOPED_TRACE(p.pid);
      pids.insert(p.pid);
      const int i = index_of(p.pid);
      ASSERT_GE(i, 0);
      const int next = (i + 1) % 3;  // i waits for row i+2, held by the next session
      EXPECT_EQ(p.blocked_by, clients[next]->pid);
      EXPECT_EQ(p.mode, "ShareLock");
      EXPECT_EQ(p.lock.locktype, "transactionid");
      EXPECT_EQ(p.lock.field[0], xids[next]);
      EXPECT_EQ(p.query, updates[i]);
    }
    EXPECT_EQ(pids.size(), 3u);
    EXPECT_EQ(d->lock.locktype, "transactionid");  // the victim's own wait
  }
  // The victim's LOG line before its ERROR.
  for (const auto& l : reader.WaitFor([&](const LockRecord& r) {
         return r.kind == LockRecordKind::kDetectedDeadlock && index_of(r.pid) >= 0;
       })) {
    if (!l) continue;
    EXPECT_EQ(l->mode, "ShareLock");
    EXPECT_GE(l->waited_seconds, 1.0);
    EXPECT_EQ(l->holders.size(), 1u);
  }
  EXPECT_EQ(reader.translated(), 0);
}

}  // namespace
}  // namespace pglock
