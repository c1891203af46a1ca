// What one target shows on the on-call view (/locks and /api/v1/locks, oncall.h) once the
// request's filter has narrowed it: its lock waits and their wait forest, the holders, the
// idle-in-transaction sessions, the pooled session locks and the leases needing a look (capped
// and ordered as the page shows them), the lock table when it fills, and its events. A TargetPart
// borrows from its snapshot, which must outlive it. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exporter/http/oncall.h"
#include "exporter/http/wait_forest.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// A lease needing a look: its table, the lease and why it needs one.
struct LeaseItem {
  std::string table;
  const LeaseView* lease;
  const char* state;  // "expired", "expiring", "held too long"
};

// What one target shows after ?lock= narrowed it.
struct TargetPart {
  const TargetSnapshot* snap = nullptr;
  size_t index = 0;  // among the targets shown: names the page's anchors
  LocksFilter filter;
  std::vector<LockWaitEdge> waits;  // of every lock type
  std::vector<WaitNode> forest;
  std::vector<const HeldLock*> held;
  std::vector<const IdleHolder*> idle;
  std::vector<std::pair<std::string, const PooledLockRow*>> pooled;  // pooler, lock
  size_t pooled_total = 0;                                           // before kPagePooledLocks
  std::vector<LeaseItem> leases;
  size_t leases_total = 0;  // needing a look, before kPageLeases
  int64_t leases_fine = 0;  // held leases needing no look
  std::vector<const RowLockHolder*> row_locks;
  std::vector<const Event*> events;           // oldest first
  const LockTableView* lock_table = nullptr;  // when full or filling (ShowLockTable)
  int64_t waiters = 0;                        // advisory, exact, over the target's databases
  int64_t lock_waiters = 0;                   // every lock type, exact
  int64_t held_total = 0;
};

// The targets that match filter.target, in the order of `snapshots`, each narrowed by
// filter.lock.
std::vector<TargetPart> SelectTargetParts(const SnapshotList& snapshots, const LocksFilter& filter);

// The session with the most entries among the top ones, with its entries; null when none but
// prepared transactions (no session to end).
std::pair<const SessionLockTableEntries*, int64_t> TopFiller(const LockTableView& v);

// A lock wait, lock timeout or deadlock that the server's log told (the poll-seen deadlock
// cycle of a target without a log is a blocking-episode row instead).
bool FromServerLog(const Event& e);

// The newest events the server's log told, newest first, as many as the page shows.
std::vector<const Event*> LoggedEvents(const TargetPart& t);

}  // namespace pglock
