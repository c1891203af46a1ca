// Which targets poll the same PostgreSQL server. pg_locks, pg_stat_activity and pg_stat_database
// are cluster-wide, so two targets on one server report every wait, holder and loss twice (and
// page twice). Each poller reports the identity of its server when it connects
// (queries/server_identity.sql); a pair of targets on one server is warned about once at start
// and once again after each reload, never at every poll. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "exporter/pg/batch.h"
#include "exporter/pg/connection.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

struct ServerIdentity {
  std::string key;          // equal for two connections to the same server; "" when unknown
  std::string description;  // for the log: system_identifier, port, data directory
  // The same server across its restarts (system identifier and port); "" when unknown.
  std::string server;
};

// Reads the identity of the server on `conn`. The key stays empty when the role may not read it
// (pg_control_system()); only a lost connection is an error.
Status ReadServerIdentity(PgConnection& conn, const QueryTimeouts& timeouts,
                          SteadyClock::time_point deadline, ServerIdentity* out);

class ServerRegistry {
 public:
  ServerRegistry() = default;
  ServerRegistry(const ServerRegistry&) = delete;
  ServerRegistry& operator=(const ServerRegistry&) = delete;

  // Poller `poller` of `target` is connected to `identity`. When that server has targets not yet
  // warned about together, logs one warning naming all the server's targets (so 200 targets on
  // one server log at most 199 lines, not one per pair). Ignored once the poller is retired.
  void Report(uint64_t poller, const std::string& target, const ServerIdentity& identity)
      EXCLUDES(mu_);
  // The poller is being replaced or removed (a reload): its target no longer counts, and a late
  // report from it is ignored.
  void Retire(uint64_t poller) EXCLUDES(mu_);
  // A reload begins: every server with several targets may be warned about once more.
  void BeginReload() EXCLUDES(mu_);
  // A reload is complete: warns about every server whose targets were not warned about together
  // since BeginReload() (pollers that kept their connection do not report again).
  void WarnAll() EXCLUDES(mu_);

 private:
  struct Entry {
    std::string target;
    ServerIdentity identity;
  };
  void WarnServer(const ServerIdentity& identity) REQUIRES(mu_);

  Mutex mu_;
  std::map<uint64_t, Entry> entries_ GUARDED_BY(mu_);  // by poller
  std::set<uint64_t> retired_ GUARDED_BY(mu_);
  // By identity key: targets named together in a warning since the last BeginReload(). A server
  // restart changes the key, so its targets are warned about once more.
  std::map<std::string, std::set<std::string>> warned_ GUARDED_BY(mu_);
};

}  // namespace pglock
