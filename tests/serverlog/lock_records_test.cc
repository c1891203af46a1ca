// ClassifyLockRecord, ParseLockTag and LooksLikeTranslatedLockWait
// (exporter/serverlog/lock_records.h): each record kind with its lines exactly as PostgreSQL 14-18
// write them (jsonlog and csvlog parse into the same LogRecord, so records are built directly),
// each lock tag form, a three-process deadlock, translations, and truncated or hostile input.
#include "exporter/serverlog/lock_records.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace pglock {
namespace {

constexpr double kStart = 1714564784;  // 2024-05-01 11:59:44 UTC

// A client backend's record; each session its own pid, application and address.
LogRecord ClientRecord(int pid, const std::string& severity, const std::string& sqlstate,
                       const std::string& message, const std::string& detail = "") {
  LogRecord r;
  r.log_time = kStart + 100;
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
  r.detail = detail;
  return r;
}

LogRecord WaitLine(int pid, const std::string& message, const std::string& detail = "") {
  return ClientRecord(pid, "LOG", "00000", message, detail);
}

std::vector<uint32_t> Fields(const LoggedLockTag& t) {
  return {t.field[0], t.field[1], t.field[2], t.field[3]};
}

TEST(LockRecordsTest, StillWaitingForARowLock) {
  LogRecord r = WaitLine(4242,
                         "process 4242 still waiting for ShareLock on transaction 737 after "
                         "1000.123 ms",
                         "Process holding the lock: 4241. Wait queue: 4242.");
  r.context = "while updating tuple (0,1) in relation \"jobs\"";
  r.statement = "UPDATE jobs SET state = 'done' WHERE id = 1";
  const std::optional<LockRecord> w = ClassifyLockRecord(r);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->kind, LockRecordKind::kStillWaiting);
  EXPECT_STREQ(LockRecordKindName(w->kind), "still_waiting");
  EXPECT_EQ(w->pid, 4242);
  EXPECT_EQ(w->session_start, static_cast<int64_t>(kStart));
  EXPECT_EQ(w->time, kStart + 100);
  EXPECT_EQ(w->dbname, "appdb");
  EXPECT_EQ(w->user, "app");
  EXPECT_EQ(w->application_name, "worker-4242");
  EXPECT_EQ(w->backend_type, "client backend");
  EXPECT_EQ(w->statement, "UPDATE jobs SET state = 'done' WHERE id = 1");
  EXPECT_EQ(w->mode, "ShareLock");
  EXPECT_EQ(w->lock.locktype, "transactionid");
  EXPECT_EQ(Fields(w->lock), (std::vector<uint32_t>{737, 0, 0, 0}));
  EXPECT_EQ(w->lock.text, "transaction 737");
  EXPECT_DOUBLE_EQ(w->waited_seconds, 1.000123);
  EXPECT_EQ(w->holders, std::vector<int>{4241});
  EXPECT_EQ(w->queue, std::vector<int>{4242});
  EXPECT_FALSE(w->truncated);
  EXPECT_TRUE(w->relation_name.empty());
  EXPECT_FALSE(LooksLikeTranslatedLockWait(r));
}

TEST(LockRecordsTest, AcquiredHasNoDetail) {
  const auto w = ClassifyLockRecord(
      WaitLine(4242, "process 4242 acquired ShareLock on transaction 737 after 1500.250 ms"));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->kind, LockRecordKind::kAcquired);
  EXPECT_DOUBLE_EQ(w->waited_seconds, 1.50025);
  EXPECT_TRUE(w->holders.empty());
  EXPECT_TRUE(w->queue.empty());
}

TEST(LockRecordsTest, AdvisoryWaitWithManyHolders) {
  const auto w = ClassifyLockRecord(
      WaitLine(5003,
               "process 5003 still waiting for ShareLock on advisory lock [16384,0,4242,1] after "
               "1001.004 ms",
               "Processes holding the lock: 5000, 5001, 5002. Wait queue: 5004, 5003."));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->lock.locktype, "advisory");
  EXPECT_EQ(w->lock.database, 16384u);
  EXPECT_EQ(w->lock.relation, 0u);
  EXPECT_EQ(Fields(w->lock), (std::vector<uint32_t>{16384, 0, 4242, 1}));
  EXPECT_EQ(w->holders, (std::vector<int>{5000, 5001, 5002}));
  EXPECT_EQ(w->queue, (std::vector<int>{5004, 5003}));
}

TEST(LockRecordsTest, EveryLockTagForm) {
  struct Case {
    std::string text, locktype;
    uint32_t database, relation;
    std::vector<uint32_t> fields;
  };
  const Case cases[] = {
      {"relation 16390 of database 16384", "relation", 16384, 16390, {16384, 16390, 0, 0}},
      {"extension of relation 16390 of database 16384",
       "extend",
       16384,
       16390,
       {16384, 16390, 0, 0}},
      {"pg_database.datfrozenxid of database 16384", "frozenid", 16384, 0, {16384, 0, 0, 0}},
      {"page 7 of relation 16390 of database 16384", "page", 16384, 16390, {16384, 16390, 7, 0}},
      {"tuple (3,12) of relation 16390 of database 16384",
       "tuple",
       16384,
       16390,
       {16384, 16390, 3, 12}},
      {"transaction 4294967295", "transactionid", 0, 0, {4294967295u, 0, 0, 0}},
      {"virtual transaction 3/17", "virtualxid", 0, 0, {3, 17, 0, 0}},
      {"virtual transaction -1/17", "virtualxid", 0, 0, {4294967295u, 17, 0, 0}},
      {"speculative token 5 of transaction 900", "spectoken", 0, 0, {900, 5, 0, 0}},
      {"object 16400 of class 1259 of database 16384", "object", 16384, 0, {16384, 1259, 16400, 0}},
      {"user lock [1,2,3]", "userlock", 0, 0, {1, 2, 3, 0}},
      // pg_advisory_lock(-1): the bigint's two halves, each printed %u.
      {"advisory lock [16384,4294967295,4294967295,1]",
       "advisory",
       16384,
       0,
       {16384, 4294967295u, 4294967295u, 1}},
      // pg_advisory_lock(-5, 7): two int4 keys.
      {"advisory lock [16384,4294967291,7,2]", "advisory", 16384, 0, {16384, 4294967291u, 7, 2}},
      {"remote transaction 811 of subscription 16500 of database 16384",
       "applytransaction",
       16384,
       0,
       {16384, 16500, 811, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const LoggedLockTag t = ParseLockTag(c.text);
    EXPECT_EQ(t.locktype, c.locktype);
    EXPECT_EQ(t.database, c.database);
    EXPECT_EQ(t.relation, c.relation);
    EXPECT_EQ(Fields(t), c.fields);
    EXPECT_EQ(t.text, c.text);
  }
}

TEST(LockRecordsTest, LockTagsThatAreNotEnglishFormsKeepOnlyTheText) {
  for (const std::string text :
       {"unrecognized locktag type 42", "Relation 16390 der Datenbank 16384",
        "relation 16390 of database 16384 ", "relation 4294967296 of database 1",
        "relation -1 of database 1", "advisory lock [1,2,3]", "advisory lock [1,2,3,4,5]",
        "transaction ", "transaction 12x", "", "tuple (1,2 of relation 3 of database 4"}) {
    SCOPED_TRACE(text);
    const LoggedLockTag t = ParseLockTag(text);
    EXPECT_TRUE(t.locktype.empty());
    EXPECT_EQ(Fields(t), (std::vector<uint32_t>{0, 0, 0, 0}));
    EXPECT_EQ(t.database, 0u);
    EXPECT_EQ(t.text, text);
  }
}

TEST(LockRecordsTest, EveryWaitLineKind) {
  const std::string detail = "Process holding the lock: 1. Wait queue: 2, 3.";
  struct Case {
    std::string message;
    LockRecordKind kind;
    std::string mode, locktype;
    double seconds;
  };
  const Case cases[] = {
      {"process 3 still waiting for RowExclusiveLock on relation 16390 of database 16384 after "
       "1000.072 ms",
       LockRecordKind::kStillWaiting, "RowExclusiveLock", "relation", 1.000072},
      {"process 3 avoided deadlock for AccessExclusiveLock on relation 16390 of database 16384 "
       "by rearranging queue order after 1000.981 ms",
       LockRecordKind::kAvoidedDeadlock, "AccessExclusiveLock", "relation", 1.000981},
      {"process 3 detected deadlock while waiting for ShareLock on transaction 801 after "
       "1000.055 ms",
       LockRecordKind::kDetectedDeadlock, "ShareLock", "transactionid", 1.000055},
      {"process 3 failed to acquire ExclusiveLock on tuple (0,1) of relation 16390 of database "
       "16384 after 2001.000 ms",
       LockRecordKind::kFailedToAcquire, "ExclusiveLock", "tuple", 2.001},
      {"process 3 still waiting for ShareUpdateExclusiveLock on extension of relation 16390 of "
       "database 16384 after 123456789.012 ms",
       LockRecordKind::kStillWaiting, "ShareUpdateExclusiveLock", "extend", 123456.789012},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const auto w = ClassifyLockRecord(WaitLine(3, c.message, detail));
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->kind, c.kind);
    EXPECT_EQ(w->pid, 3);
    EXPECT_EQ(w->mode, c.mode);
    EXPECT_EQ(w->lock.locktype, c.locktype);
    EXPECT_NEAR(w->waited_seconds, c.seconds, 1e-9);
    EXPECT_EQ(w->holders, std::vector<int>{1});
    EXPECT_EQ(w->queue, (std::vector<int>{2, 3}));
  }
}

TEST(LockRecordsTest, LogLockFailuresOf18NamesTheHolders) {
  const auto f = ClassifyLockRecord(
      WaitLine(8001, "process 8001 could not obtain ShareLock on transaction 900",
               "Processes holding the lock: 8000, 7999, Wait queue: 8002."));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, LockRecordKind::kLockFailure);
  EXPECT_EQ(f->mode, "ShareLock");
  EXPECT_EQ(f->lock.locktype, "transactionid");
  EXPECT_EQ(f->lock.field[0], 900u);
  EXPECT_EQ(f->waited_seconds, 0);
  EXPECT_EQ(f->holders, (std::vector<int>{8000, 7999}));
  EXPECT_EQ(f->queue, std::vector<int>{8002});

  const auto empty_queue = ClassifyLockRecord(WaitLine(
      8001,
      "process 8001 could not obtain AccessExclusiveLock on tuple (0,1) of relation 16390 of "
      "database 16384",
      "Process holding the lock: 8000, Wait queue: ."));
  ASSERT_TRUE(empty_queue.has_value());
  EXPECT_EQ(empty_queue->lock.locktype, "tuple");
  EXPECT_EQ(empty_queue->holders, std::vector<int>{8000});
  EXPECT_TRUE(empty_queue->queue.empty());
}

TEST(LockRecordsTest, LockTimeoutNamesTheRowsRelationFromItsContext) {
  LogRecord r = ClientRecord(4300, "ERROR", "55P03", "canceling statement due to lock timeout");
  r.context = "while updating tuple (0,1) in relation \"jobs\"";
  r.statement = "UPDATE jobs SET state = 'x' WHERE id = 1";
  const auto t = ClassifyLockRecord(r);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->kind, LockRecordKind::kLockTimeout);
  EXPECT_EQ(t->pid, 4300);
  EXPECT_EQ(t->sqlstate, "55P03");
  EXPECT_EQ(t->relation_name, "jobs");
  EXPECT_EQ(t->statement, "UPDATE jobs SET state = 'x' WHERE id = 1");
  EXPECT_EQ(t->message, "canceling statement due to lock timeout");

  r.context = "PL/pgSQL function f() line 3 at SQL statement";
  EXPECT_EQ(ClassifyLockRecord(r)->relation_name, "");
  r.context = "while locking tuple (3,4) in relation \"we\"ird\"\nPL/pgSQL function f() line 3";
  EXPECT_EQ(ClassifyLockRecord(r)->relation_name, "we\"ird");
}

TEST(LockRecordsTest, NowaitFailuresNameTheirRelation) {
  struct Case {
    std::string message, relation;
  };
  const Case cases[] = {
      {"could not obtain lock on row in relation \"jobs\"", "jobs"},
      {"could not obtain lock on relation \"jobs\"", "jobs"},
      {"could not obtain lock on relation \"public.jobs\"", "public.jobs"},
      {"aborting because lock on relation \"public.jobs\" is not available", "public.jobs"},
      {"could not obtain lock on relation \"\"", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const auto n = ClassifyLockRecord(ClientRecord(4400, "ERROR", "55P03", c.message));
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(n->kind, LockRecordKind::kNowaitFailed);
    EXPECT_STREQ(LockRecordKindName(n->kind), "nowait_failed");
    EXPECT_EQ(n->relation_name, c.relation);
  }
}

TEST(LockRecordsTest, LockNotAvailableBySqlstateInAnyLanguage) {
  const auto de = ClassifyLockRecord(ClientRecord(
      4500, "ERROR", "55P03", "storniere Anfrage wegen Zeitüberschreitung einer Sperre"));
  ASSERT_TRUE(de.has_value());
  EXPECT_EQ(de->kind, LockRecordKind::kLockNotAvailable);
  EXPECT_TRUE(de->relation_name.empty());
  // VACUUM (SKIP_LOCKED) and autovacuum log 55P03 as WARNING or LOG: no statement gave up.
  EXPECT_FALSE(ClassifyLockRecord(ClientRecord(4500, "WARNING", "55P03",
                                               "skipping vacuum of \"jobs\" --- lock not "
                                               "available")));
  EXPECT_FALSE(ClassifyLockRecord(ClientRecord(4500, "LOG", "55P03", "x")));
}

// Three sessions in a cycle; the first query holds a newline followed by a line that looks like
// another process's (not the next one's), the second quotes and newlines.
TEST(LockRecordsTest, ThreeProcessDeadlock) {
  const std::string detail =
      "Process 9001 waits for ShareLock on transaction 801; blocked by process 9002.\n"
      "Process 9002 waits for ExclusiveLock on tuple (0,3) of relation 16390 of database 16384; "
      "blocked by process 9003.\n"
      "Process 9003 waits for ShareLock on transaction 800; blocked by process 9001.\n"
      "Process 9001: UPDATE jobs SET note = 'a\nProcess 9003: fake' WHERE id = 2\n"
      "Process 9002: UPDATE jobs\n   SET note = \"quoted\", other = 'it''s' WHERE id = 3;\n"
      "Process 9003: UPDATE jobs SET note = 'x' WHERE id = 1";
  LogRecord r = ClientRecord(9001, "ERROR", "40P01", "deadlock detected", detail);
  r.hint = "See server log for query details.";
  r.context = "while updating tuple (0,2) in relation \"jobs\"";
  const auto d = ClassifyLockRecord(r);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, LockRecordKind::kDeadlock);
  EXPECT_EQ(d->pid, 9001);
  EXPECT_EQ(d->mode, "ShareLock");  // the victim's own wait
  EXPECT_EQ(d->lock.locktype, "transactionid");
  ASSERT_EQ(d->cycle.size(), 3u);
  EXPECT_FALSE(d->truncated);

  EXPECT_EQ(d->cycle[0].pid, 9001);
  EXPECT_EQ(d->cycle[0].mode, "ShareLock");
  EXPECT_EQ(d->cycle[0].lock.locktype, "transactionid");
  EXPECT_EQ(d->cycle[0].lock.field[0], 801u);
  EXPECT_EQ(d->cycle[0].blocked_by, 9002);
  EXPECT_EQ(d->cycle[0].query, "UPDATE jobs SET note = 'a\nProcess 9003: fake' WHERE id = 2");

  EXPECT_EQ(d->cycle[1].pid, 9002);
  EXPECT_EQ(d->cycle[1].mode, "ExclusiveLock");
  EXPECT_EQ(d->cycle[1].lock.locktype, "tuple");
  EXPECT_EQ(Fields(d->cycle[1].lock), (std::vector<uint32_t>{16384, 16390, 0, 3}));
  EXPECT_EQ(d->cycle[1].blocked_by, 9003);
  EXPECT_EQ(d->cycle[1].query,
            "UPDATE jobs\n   SET note = \"quoted\", other = 'it''s' WHERE id = 3;");

  EXPECT_EQ(d->cycle[2].pid, 9003);
  EXPECT_EQ(d->cycle[2].lock.field[0], 800u);
  EXPECT_EQ(d->cycle[2].blocked_by, 9001);
  EXPECT_EQ(d->cycle[2].query, "UPDATE jobs SET note = 'x' WHERE id = 1");
}

TEST(LockRecordsTest, DeadlockInAnotherLanguageHasItsVictimOnly) {
  const auto d = ClassifyLockRecord(ClientRecord(
      9100, "ERROR", "40P01", "Verklemmung (Deadlock) entdeckt",
      "Prozess 9100 wartet auf ShareLock-Sperre auf Transaktion 5; blockiert von Prozess 9101.\n"
      "Prozess 9101 wartet auf ShareLock-Sperre auf Transaktion 6; blockiert von Prozess 9100.\n"
      "Prozess 9100: UPDATE a\nProzess 9101: UPDATE b"));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, LockRecordKind::kDeadlock);
  EXPECT_EQ(d->pid, 9100);
  EXPECT_TRUE(d->cycle.empty());
  EXPECT_TRUE(d->mode.empty());
}

TEST(LockRecordsTest, DeadlockWithoutQueriesOrCutShort) {
  const std::string waits =
      "Process 1 waits for ShareLock on transaction 10; blocked by process 2.\n"
      "Process 2 waits for ShareLock on transaction 11; blocked by process 1.";
  const auto no_queries =
      ClassifyLockRecord(ClientRecord(1, "ERROR", "40P01", "deadlock detected", waits));
  ASSERT_TRUE(no_queries.has_value());
  ASSERT_EQ(no_queries->cycle.size(), 2u);
  EXPECT_EQ(no_queries->cycle[1].blocked_by, 1);
  EXPECT_TRUE(no_queries->cycle[0].query.empty());

  const auto other_order = ClassifyLockRecord(ClientRecord(
      1, "ERROR", "40P01", "deadlock detected", waits + "\nProcess 2: SELECT 2\nProcess 1: x"));
  ASSERT_TRUE(other_order.has_value());
  ASSERT_EQ(other_order->cycle.size(), 2u);
  EXPECT_TRUE(other_order->cycle[0].query.empty());  // not in the order logged: not guessed
  EXPECT_TRUE(other_order->cycle[1].query.empty());

  const auto cut = ClassifyLockRecord(ClientRecord(
      1, "ERROR", "40P01", "deadlock detected",
      "Process 1 waits for ShareLock on transaction 10; blocked by process 2.\nProcess 2 wai"));
  ASSERT_TRUE(cut.has_value());
  ASSERT_EQ(cut->cycle.size(), 1u);
  EXPECT_EQ(cut->cycle[0].pid, 1);
}

TEST(LockRecordsTest, ListsAndCyclesAreBounded) {
  std::string holders, queue;
  for (int i = 1; i <= 1000; ++i) {
    holders += (i > 1 ? ", " : "") + std::to_string(i);
    queue += (i > 1 ? ", " : "") + std::to_string(10000 + i);
  }
  const auto w = ClassifyLockRecord(
      WaitLine(10001,
               "process 10001 still waiting for ShareLock on relation 1 of database 2 "
               "after 1000.000 ms",
               "Processes holding the lock: " + holders + ". Wait queue: " + queue + "."));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->holders.size(), kMaxPids);
  EXPECT_EQ(w->queue.size(), kMaxPids);
  EXPECT_EQ(w->holders.back(), 100);
  EXPECT_TRUE(w->truncated);

  std::string detail;
  const int n = 1000;
  for (int i = 1; i <= n; ++i) {
    detail += "Process " + std::to_string(i) + " waits for ShareLock on transaction " +
              std::to_string(i) + "; blocked by process " + std::to_string(i % n + 1) + ".\n";
  }
  for (int i = 1; i <= n; ++i) {
    detail +=
        "Process " + std::to_string(i) + ": SELECT " + std::to_string(i) + (i < n ? "\n" : "");
  }
  const auto d = ClassifyLockRecord(ClientRecord(1, "ERROR", "40P01", "deadlock detected", detail));
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->cycle.size(), kMaxCycle);
  EXPECT_TRUE(d->truncated);
  EXPECT_EQ(d->cycle.back().pid, 100);
  EXPECT_EQ(d->cycle.back().query, "SELECT 100");  // ends where process 101's line begins
}

TEST(LockRecordsTest, MalformedWaitLinesAreNotClassified) {
  for (const std::string message : {
           "process 1 still waiting for ShareLock on transaction 5 after 1000.12 ms",
           "process 1 still waiting for ShareLock on transaction 5 after 1000.1234 ms",
           "process 1 still waiting for ShareLock on transaction 5 after 1000.123ms",
           "process 1 still waiting for ShareLock on transaction 5 after ms",
           "process 1 still waiting for ShareLock on transaction 5",
           "process 1 still waiting for Share Lock on transaction 5 after 1000.123 ms",
           "process 99999999999 still waiting for ShareLock on transaction 5 after 1000.123 ms",
           "process still waiting for ShareLock on transaction 5 after 1000.123 ms",
           "process 1 slept on ShareLock on transaction 5 after 1000.123 ms",
           "disconnection: session time: 0:00:01.000 user=app database=appdb host=[local]",
           "process 1 acquired ShareLock",
           "",
       }) {
    SCOPED_TRACE(message);
    EXPECT_FALSE(ClassifyLockRecord(WaitLine(1, message,
                                             "Process holding the lock: 2. Wait "
                                             "queue: 1.")));
  }
  // A known message whose DETAIL is not a pid list: the wait, without holders.
  for (const std::string detail : {"Process holding the lock: 2. Wait queue: 1", "junk",
                                   "Process holding the lock: 2; Wait queue: 1.",
                                   "Process holding the lock: 2, x. Wait queue: 1.",
                                   "Process holding the lock: 99999999999. Wait queue: 1."}) {
    SCOPED_TRACE(detail);
    const auto w = ClassifyLockRecord(WaitLine(
        1, "process 1 still waiting for ShareLock on transaction 5 after 1000.123 ms", detail));
    ASSERT_TRUE(w.has_value());
    EXPECT_TRUE(w->holders.empty());
    EXPECT_TRUE(w->queue.empty());
  }
}

// Every prefix of every message and DETAIL above, and random byte flips in them: never a crash,
// never a list beyond its bound.
TEST(LockRecordsTest, HostileInputNeverCrashes) {
  const std::vector<LogRecord> seeds = {
      WaitLine(5,
               "process 5 avoided deadlock for ShareLock on advisory lock [1,2,3,4] by "
               "rearranging queue order after 1000.001 ms",
               "Processes holding the lock: 1, 2. Wait queue: 5."),
      WaitLine(5,
               "process 5 could not obtain ShareLock on tuple (0,1) of relation 2 of database "
               "3",
               "Process holding the lock: 1, Wait queue: ."),
      ClientRecord(5, "ERROR", "40P01", "deadlock detected",
                   "Process 5 waits for ShareLock on transaction 10; blocked by process 6.\n"
                   "Process 6 waits for ShareLock on transaction 11; blocked by process 5.\n"
                   "Process 5: SELECT 1\nProcess 6: SELECT 2"),
      ClientRecord(5, "ERROR", "55P03", "could not obtain lock on row in relation \"jobs\""),
  };
  std::mt19937 random(42);
  for (const LogRecord& seed : seeds) {
    for (size_t cut = 0; cut <= seed.message.size(); ++cut) {
      LogRecord r = seed;
      r.message.resize(cut);
      (void)ClassifyLockRecord(r);
      (void)LooksLikeTranslatedLockWait(r);
    }
    for (size_t cut = 0; cut <= seed.detail.size(); ++cut) {
      LogRecord r = seed;
      r.detail.resize(cut);
      const auto c = ClassifyLockRecord(r);
      if (c) {
        EXPECT_LE(c->cycle.size(), kMaxCycle);
      }
    }
    for (int i = 0; i < 2000; ++i) {
      LogRecord r = seed;
      for (std::string* s : {&r.message, &r.detail}) {
        if (s->empty()) continue;
        (*s)[random() % s->size()] = static_cast<char>(random() % 256);
      }
      const auto c = ClassifyLockRecord(r);
      if (c) {
        EXPECT_LE(c->holders.size(), kMaxPids);
        EXPECT_LE(c->queue.size(), kMaxPids);
      }
      (void)LooksLikeTranslatedLockWait(r);
    }
  }
  const std::string zeros("\0\0process 1\0", 12);
  EXPECT_FALSE(ClassifyLockRecord(WaitLine(1, zeros, zeros)));
}

TEST(LockRecordsTest, OtherRecordsAreNotLockRecords) {
  EXPECT_FALSE(ClassifyLockRecord(ClientRecord(1, "FATAL", "57P01",
                                               "terminating connection due to administrator "
                                               "command")));
  EXPECT_FALSE(ClassifyLockRecord(
      ClientRecord(1, "ERROR", "57014", "canceling statement due to statement timeout")));
  EXPECT_FALSE(ClassifyLockRecord(ClientRecord(1, "LOG", "00000", "statement: SELECT 1")));
}

// The wait lines of the translations PostgreSQL 15 ships (msgstr of "process %d still waiting for
// %s on %s after %ld.%03d ms" and of "... acquired ..."), filled in as the server fills them.
TEST(LockRecordsTest, TranslatedWaitLinesAreRecognisedNotClassified) {
  const std::string translated[] = {
      "Prozess 4242 wartet immer noch auf ShareLock-Sperre auf Transaktion 737 nach 1000,123 ms",
      "Prozess 4242 erlangte ShareLock-Sperre auf Transaktion 737 nach 1500,250 ms",
      "el proceso 4242 aún espera ShareLock en transacción 737 después de 1000.123 ms",
      std::string("le processus 4242 est toujours en attente de ShareLock sur transaction 737 ") +
          "après 1000.123 ms",
      "il processo 4242 è ancora un attesa di ShareLock su transazione 737 dopo 1000.123 ms",
      "プロセス4242はShareLockをトランザクション 737で待機しています。1000.123ミリ秒後",
      "プロセス4242は1500.250 ms後にトランザクション 737上のShareLockを獲得しました",
      "4242 PID 프로세스에서 여전히 ShareLock(트랜잭션 737) 작업을 기다리고 있음(1000.123ms 후)",
      std::string("процесс 4242 продолжает ожидать в режиме ShareLock блокировку ") +
          "\"транзакция 737\" в течение 1000.123 мс",
      "process 4242 väntar fortfarande på ShareLock för transaktion 737 efter 1000.123 ms",
      "процес 4242 все ще чекає в режимі ShareLock блокування транзакція 737 після 1000.123 мс",
      "进程4242在1000.123 ms仍然等待在事务 737上的ShareLock",
  };
  for (const std::string& message : translated) {
    SCOPED_TRACE(message);
    const LogRecord r = WaitLine(4242, message, "Prozess, der die Sperre hält: 4241.");
    EXPECT_FALSE(ClassifyLockRecord(r));
    EXPECT_TRUE(LooksLikeTranslatedLockWait(r));
  }
  // Not wait lines: another pid, no lock mode, no time, not LOG.
  for (const LogRecord& r : {
           WaitLine(4242, "Dauer: 1000,123 ms  Anweisung: SELECT pg_sleep(1)"),
           WaitLine(4242, "Anweisung: LOCK TABLE t IN SHARE MODE -- 4242 1000.123"),
           WaitLine(4242, "Prozess 4243 wartet immer noch auf ShareLock-Sperre nach 1000,123 ms"),
           WaitLine(4242, "Prozess 42424 wartet immer noch auf ShareLock-Sperre nach 1000,123 ms"),
           WaitLine(4242, "Prozess 4242 erlangte ShareLock-Sperre auf Transaktion 737"),
           WaitLine(4242,
                    "process 4242 still waiting for ShareLock on transaction 737 after "
                    "1000.123 ms"),
           ClientRecord(4242, "ERROR", "55P03",
                        "Prozess 4242 wartet auf ShareLock-Sperre nach 1000,123 ms"),
       }) {
    SCOPED_TRACE(r.message);
    EXPECT_FALSE(LooksLikeTranslatedLockWait(r));
  }
}

}  // namespace
}  // namespace pglock
