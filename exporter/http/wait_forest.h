// The wait forest of the on-call view (oncall.h): the waiter -> blocker edges of every lock type
// as trees whose roots block and wait for nothing, with the roots' counts of blocked sessions and
// their verdicts. /locks draws it, /api/v1/locks gives it as JSON. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exporter/snapshot/snapshot.h"

namespace pglock {

// One party in the wait forest with the sessions waiting for it: a client session, a background
// process (who.backend_type) or a prepared transaction (pid 0, state "prepared", who.gid). A root
// blocks and waits for nothing (or, in a cycle, is the first blocker met); each child waits for its
// parent: for `mode` of a lock of `locktype` on `relation` (schema.table, else the OID, else "")
// or on the advisory lock `lock`.
struct WaitNode {
  LockParticipant who;
  std::string locktype;  // "" for a root
  std::string mode;
  std::string relation;
  std::string lock;
  double seconds = 0;   // how long it has waited
  int64_t blocked = 0;  // roots: sessions blocked through it, directly or not; 0 when not known
  std::vector<WaitNode> waiters;
  const Verdict* verdict = nullptr;  // roots: what to do (borrowed from the snapshot's roots)
};

// The forest of waiter -> blocker edges of every lock type (TargetView::lock_waits); `roots`
// give the roots' counts of blocked sessions.
std::vector<WaitNode> BuildWaitForest(const std::vector<LockWaitEdge>& edges,
                                      const std::vector<BlockingRoot>& roots = {});

// A party's node in the forest: its pid; for a prepared transaction (pid 0) its gid and database.
std::string NodeKey(const LockParticipant& p);

}  // namespace pglock
