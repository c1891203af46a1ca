#include "exporter/poll/server_identity.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

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
  out->server = r.String(0, sysid) + "|" + r.String(0, port);
  out->description = "system_identifier " + r.String(0, sysid) + ", port " + r.String(0, port);
  if (!r.IsNull(0, datadir)) out->description += ", data directory " + r.String(0, datadir);
  return Status::Ok();
}

void ServerRegistry::Report(uint64_t poller, const std::string& target,
                            const ServerIdentity& identity) {
  MutexLock lock(&mu_);
  if (retired_.count(poller) != 0) return;
  entries_[poller] = Entry{target, identity};
  WarnServer(identity);
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
  std::map<std::string, ServerIdentity> servers;
  for (const auto& [poller, e] : entries_) servers.emplace(e.identity.key, e.identity);
  for (const auto& [key, identity] : servers) WarnServer(identity);
}

void ServerRegistry::WarnServer(const ServerIdentity& identity) {
  if (identity.key.empty()) return;
  std::set<std::string> targets;
  for (const auto& [poller, e] : entries_) {
    if (e.identity.key == identity.key) targets.insert(e.target);
  }
  std::set<std::string>& warned = warned_[identity.key];
  if (targets.size() < 2 ||
      std::includes(warned.begin(), warned.end(), targets.begin(), targets.end())) {
    return;
  }
  warned.insert(targets.begin(), targets.end());
  // "a and b", "a, b and c", "a, b, ..., h and 192 more".
  constexpr size_t kNamed = 8;
  std::vector<std::string> names(targets.begin(), targets.end());
  const size_t shown = names.size() > kNamed ? kNamed : names.size() - 1;
  std::string list;
  for (size_t i = 0; i < shown; ++i) list += (i > 0 ? ", " : "") + names[i];
  list += " and " +
          (names.size() > kNamed ? std::to_string(names.size() - kNamed) + " more" : names.back());
  spdlog::warn(
      "targets {} poll the same PostgreSQL server ({}): its locks, sessions and events are "
      "reported, and page, once per target; use one target per server, with `database = "
      "\"...\"` in [[targets.leases]] for lease tables in other databases",
      list, identity.description);
}

}  // namespace pglock
