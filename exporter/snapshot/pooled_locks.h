// Session advisory locks on pooled server connections (PgBouncer in transaction or statement mode,
// seed 002): a state machine per (pooler, server connection, key). A lock becomes known to be
// session-scoped at the first poll that proves it — held while the connection is outside a
// transaction, or held across two different transactions — and stays so until it is released,
// whatever the connection is doing at later poll instants: traffic through the pool must not make
// the count flicker. While such a lock stays held, the connection serving another client
// (application_name or the linked PgBouncer client changed) is an inheritance: that client holds
// the lock without having taken it. Thread-compatible: owned by one poller.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/collectors/lock_names.h"
#include "exporter/snapshot/event_log.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

struct PooledLock {
  std::string pooler;
  std::string database;  // the pool's
  std::string user;
  int pid = 0;  // the server connection's backend
  double backend_start = 0;
  AdvisoryKey key;
  bool session_scoped = false;  // proven; until then a candidate
  std::optional<double> last_xact_start;
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

 private:
  using Id = std::tuple<std::string, int, double, AdvisoryKey>;  // pooler, pid, start, key
  std::map<Id, PooledLock> locks_;
};

}  // namespace pglock
