#include "exporter/poll/server_identity.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "exporter/pg/batch.h"
#include "exporter/pg/columns.h"
#include "exporter/queries.h"

namespace pglock {

Status ReadServerIdentity(PgConnection& conn, const QueryTimeouts& timeouts,
                          SteadyClock::time_point deadline, ServerIdentity* out) {
  *out = ServerIdentity{};
  StatementBatch batch;
  batch.Add("server_identity", queries::kServerIdentity);
  BatchResults results;
  if (Status s = batch.Run(conn, timeouts, deadline, &results); !s.ok()) {
    // Without the right to read pg_control_system() the server stays anonymous.
    if (conn.Broken()) return s;
    spdlog::debug("server identity unknown: {}", s.message());
    return Status::Ok();
  }
  const PgResult& r = *results.Find("server_identity");
  Columns c(r, "server_identity");
  const int sysid = c["system_identifier"], port = c["port"], datadir = c["data_directory"],
            started = c["started"];
  if (Status s = c.status(); !s.ok() || r.Rows() != 1 || r.IsNull(0, sysid)) return Status::Ok();
  // Not data_directory: its visibility depends on the role, and two targets may use two roles.
  out->key = r.String(0, sysid) + "|" + r.String(0, port) + "|" + r.String(0, started);
  out->description = "system_identifier " + r.String(0, sysid) + ", port " + r.String(0, port);
  if (!r.IsNull(0, datadir)) out->description += ", data directory " + r.String(0, datadir);
  return Status::Ok();
}

void ServerRegistry::Report(uint64_t poller, const std::string& target,
                            const ServerIdentity& identity) {
  MutexLock lock(&mu_);
  if (retired_.count(poller) != 0) return;
  Entry& e = entries_[poller];
  e = Entry{target, identity};
  WarnPairsOf(e);
}

void ServerRegistry::Retire(uint64_t poller) {
  MutexLock lock(&mu_);
  retired_.insert(poller);
  entries_.erase(poller);
}

void ServerRegistry::BeginReload() {
  MutexLock lock(&mu_);
  warned_.clear();
}

void ServerRegistry::WarnAll() {
  MutexLock lock(&mu_);
  for (const auto& [poller, e] : entries_) WarnPairsOf(e);
}

void ServerRegistry::WarnPairsOf(const Entry& entry) {
  if (entry.identity.key.empty()) return;
  for (const auto& [poller, other] : entries_) {
    if (&other == &entry || other.target == entry.target ||
        other.identity.key != entry.identity.key) {
      continue;
    }
    const auto pair = std::minmax(entry.target, other.target);
    if (!warned_.emplace(pair.first, pair.second).second) continue;
    spdlog::warn(
        "targets {} and {} poll the same PostgreSQL server ({}): its locks, sessions and "
        "events are reported, and page, once per target; use one target per server, with "
        "`database = \"...\"` in [[targets.leases]] for lease tables in other databases",
        pair.first, pair.second, entry.identity.description);
  }
}

}  // namespace pglock
