// Session advisory locks on pooled server connections (PgBouncer in transaction or statement
// mode): a state machine per (pooler, server connection, key), judged at inventory polls only
// (a tiered poll's locks are the last inventory's, not a fresh read).
//
//   (not tracked) --granted on a pooled connection--> candidate --proof--> session lock
//        ^                                               |                  |      |
//        +--------- gone from a complete read -----------+------------------+      |
//                                                          another client served --+ (inherited,
//                                                          while it stays held      counted, stays)
//
// Proof of a session lock, the one rule: the lock was granted in a read of pg_locks during which
// the server connection stayed idle outside any transaction (pg_stat_activity before and after
// that read show state 'idle' with the same state_change: AdvisoryLock::outside_transaction). A
// transaction lock cannot meet it: PostgreSQL releases a transaction's locks before it reports the
// session idle, and any statement run since moves state_change. Not proof, and why:
//   - "held in two different transactions" (xact_start changed while the key stayed held): a hot
//     key re-taken by the next transaction on the same connection looks exactly like that;
//   - "no transaction at the activity read": the connection can begin one and take a transaction
//     lock before pg_locks is read.
// Once proven, a lock stays a session lock until it is released, whatever the connection does at
// later polls: traffic through the pool must not make the count flicker. While it stays held,
// the connection serving another client (application_name or the linked PgBouncer client changed)
// is an inheritance: that client holds the lock without having taken it.
// Limit: a proven session lock unlocked and its key taken again by another client on the same
// connection between two polls (as a session or a transaction lock) is taken for the same lock,
// and that client for an heir.
// Thread-compatible: owned by one poller.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// The states of the diagram above (a lock not tracked has no entry).
enum class PooledLockState {
  kCandidate,    // granted on a pooled connection, not proven session-scoped yet
  kSessionLock,  // proven: held outside any transaction; counted, its heirs are inheritances
};

struct PooledLock {
  std::string pooler;
  std::string database;  // the pool's
  std::string user;
  int pid = 0;  // the server connection's backend
  double backend_start = 0;
  AdvisoryKey key;
  PooledLockState state = PooledLockState::kCandidate;
  std::string first_client;    // the client when the lock was first seen
  std::string current_client;  // the latest client seen on the connection
  std::string last_application_name;
  std::string last_linked_client;  // "addr:port" of the last PgBouncer client seen linked
  double first_seen = 0;           // server epoch seconds
  int64_t inherited = 0;           // clients that got the lock without taking it
};

class PooledLockTracker {
 public:
  // Updates the state from one successful poll; counts inheritances into *counters (may be null)
  // and appends each as an event to *events (may be null; `names` names the lock there).
  // A pooler that could not be read keeps its state; so does every lock on a tiered poll.
  void Observe(const PollData& data, const LockNames* names, Counters* counters,
               std::vector<Event>* events = nullptr);

  // Every tracked lock, candidates included, ordered by pooler, database, user, pid, key.
  std::vector<const PooledLock*> Locks() const;

  // Takes the locks saved before a restart of the exporter (exporter/storage/): a lock proven
  // session-scoped then stays proven while the same backend (pid and start) holds its key, so a
  // restart does not wait for a new proof; one gone or on another backend is dropped at the
  // next complete read, as any other.
  void Restore(const std::vector<PooledLock>& locks);

 private:
  // The transitions of one inventory poll.
  void Judge(const PollData& data, const LockNames* names, Counters* counters,
             std::vector<Event>* events);

  using Id = std::tuple<std::string, int, double, AdvisoryKey>;  // pooler, pid, start, key
  std::map<Id, PooledLock> locks_;
};

}  // namespace pglock
