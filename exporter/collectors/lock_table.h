// The server's shared lock table: how many entries are used (pg_locks rows outside the fast path,
// counted from the poll's one read of pg_locks, which the advisory collector's statement makes on
// inventory polls), its nominal size from the settings, the sessions holding the most entries by
// lock type, and the backends waiting on the lock manager's LWLock. Its own statement
// (queries/lock_table.sql) runs every poll and reads no catalog. Every series is exposed from
// TargetSnapshot::lock_table, which the poller keeps from the last good poll while polls fail
// with the table full (pglock_lock_table_full). Stateless; thread-safe.
//
// Freshness in the tiered mode: slots and lock-manager waiters every poll; entries and the top
// sessions at inventory polls only (a tiered poll carries the last inventory's, with their age).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exporter/collectors/collector.h"

namespace pglock {

// The settings that size the shared lock table, read every poll. autovacuum_worker_slots is 18+
// (0 before).
struct LockTableSettings {
  int64_t max_locks_per_transaction = 0;
  int64_t max_connections = 0;
  int64_t autovacuum_max_workers = 0;
  int64_t autovacuum_worker_slots = 0;
  int64_t max_worker_processes = 0;
  int64_t max_wal_senders = 0;
  int64_t max_prepared_transactions = 0;
};

// Entries one process holds or awaits in the server's shared lock table, of one lock type: its rows
// of pg_locks outside the fast path. pid 0: prepared transactions (they hold locks with no
// backend).
struct LockTableUse {
  int pid = 0;
  std::string locktype;
  int64_t entries = 0;
};

// What every poll reads of the lock table (PollData::parts).
struct LockTableReading {
  LockTableSettings settings;
  // Backends waiting on the lock manager's LWLock (LockManager; lock_manager on 12).
  int64_t lock_manager_waiters = 0;
  int own_pid = 0;  // the exporter's backend: its entries are not counted
};

// The entries counted from an inventory's pg_locks read (PollData::parts): a tiered poll carries
// the last inventory's (InventoryTier), with the time of that read.
struct LockTableCount {
  static constexpr bool kReadAtInventory = true;
  std::vector<LockTableUse> use;
  double read_at = 0;  // the server's now() of the pg_locks read that counted `use`
};

// SQLSTATE 53200, out of shared memory: what a backend gets when the shared lock table has no
// free entry left (HINT: You might need to increase max_locks_per_transaction).
inline constexpr char kOutOfSharedMemory[] = "53200";

// The nominal number of entries of the shared lock table, NLOCKENTS() in the server's lock.c:
// max_locks_per_transaction * (MaxBackends + max_prepared_transactions), where MaxBackends is
//   12-16: max_connections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders
//   17:    max_connections + autovacuum_max_workers + 2 + max_worker_processes + max_wal_senders
//   18+:   max_connections + autovacuum_worker_slots + 2 + max_worker_processes + max_wal_senders
// (+1: the autovacuum launcher; +2 from 17: and the slot sync worker). 0 when the settings are
// unknown. The server can hold somewhat more: the hash tables grow into shared memory's slack.
int64_t LockTableSlots(int server_version_num, const LockTableSettings& settings);

// True when a failed poll says the shared lock table is full: SQLSTATE 53200, or a connection
// refused with that message (a new backend needs an entry for its database lock).
bool LockTableFull(const Status& status);

// After a poll failed with the table full: reads the lock table alone, in a round trip of its own
// that needs no entry of the table (queries/lock_table_full.sql, no catalog read), into *view
// (entries, slots and the top_n sessions, fresh: age 0). Names the sessions' databases and users
// as `previous` (the last good poll's view, may be null) did, since reading them would need the
// shared catalogs. Not ok when even this read failed.
Status ReadFullLockTable(PgConnection& conn, const QueryTimeouts& timeouts,
                         SteadyClock::time_point deadline, size_t top_n,
                         const LockTableView* previous, LockTableView* view);

// Marks the top sessions of view->lock_table that are a pooler's server connection with a session
// lock known held on it (view->poolers), so that a page can say to RECONNECT rather than terminate
// even once polls fail with the table full. REQUIRES: the pooler collector's view is built.
void MarkPooledLockTableSessions(TargetView* view);

class LockTableCollector : public Collector {
 public:
  const char* name() const override { return "lock_table"; }
  std::vector<PreparedStatement> Prepared(int server_version_num) const override;
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  // After the advisory collector's Parse: counts its rows on an inventory poll.
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  // From TargetSnapshot::lock_table, whether or not the last poll succeeded.
  void ExposeCounters(const TargetSnapshot& snap, Families* out) const override;
};

}  // namespace pglock
