// The shared lock table's nominal size per server version, and which failed polls mean it is
// full. Pure logic: the integration test (tests/integration/lock_table_test.cc) checks both on a
// real server of each supported major.
#include <gtest/gtest.h>

#include "exporter/collectors/lock_table.h"

namespace pglock {
namespace {

LockTableSettings Defaults() {
  LockTableSettings s;
  s.max_locks_per_transaction = 64;
  s.max_connections = 100;
  s.autovacuum_max_workers = 3;
  s.autovacuum_worker_slots = 16;  // 18+
  s.max_worker_processes = 8;
  s.max_wal_senders = 10;
  s.max_prepared_transactions = 0;
  return s;
}

TEST(LockTableSlots, TwelveToSixteenCountTheAutovacuumLauncher) {
  for (int version : {120022, 130023, 140023, 150018, 160014}) {
    EXPECT_EQ(LockTableSlots(version, Defaults()), 64 * (100 + 3 + 1 + 8 + 10)) << version;
  }
}

TEST(LockTableSlots, SeventeenAddsTheSlotSyncWorker) {
  EXPECT_EQ(LockTableSlots(170010, Defaults()), 64 * (100 + 3 + 2 + 8 + 10));
}

TEST(LockTableSlots, EighteenSizesAutovacuumByItsWorkerSlots) {
  EXPECT_EQ(LockTableSlots(180004, Defaults()), 64 * (100 + 16 + 2 + 8 + 10));
}

TEST(LockTableSlots, PreparedTransactionsHaveTheirOwnShare) {
  LockTableSettings s = Defaults();
  s.max_prepared_transactions = 5;
  s.max_connections = 20;
  EXPECT_EQ(LockTableSlots(150018, s), 64 * (20 + 3 + 1 + 8 + 10 + 5));
}

TEST(LockTableSlots, UnknownSettingsGiveNoSize) {
  EXPECT_EQ(LockTableSlots(150018, LockTableSettings{}), 0);
}

TEST(LockTableFull, OnlyOutOfSharedMemory) {
  EXPECT_TRUE(LockTableFull(Status::StatementFailed("out of shared memory", "53200")));
  // A connection refused while the table is full: libpq's message, no SQLSTATE.
  EXPECT_TRUE(LockTableFull(
      Status::ConnectionLost("connection to server failed: FATAL:  out of shared memory")));
  EXPECT_FALSE(LockTableFull(Status::StatementFailed("permission denied", "42501")));
  EXPECT_FALSE(LockTableFull(Status::ConnectionLost("connection refused")));
  EXPECT_FALSE(LockTableFull(Status::Ok()));
}

}  // namespace
}  // namespace pglock
