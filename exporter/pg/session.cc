#include "exporter/pg/session.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "exporter/queries.h"

namespace pglock {

Status OpenSession(const std::string& dsn, const std::string& dbname,
                   SteadyClock::time_point deadline, const std::atomic<bool>* abort,
                   std::unique_ptr<PgConnection>* out) {
  out->reset();
  // Keywords after the DSN win over it (libpq expands only the first dbname).
  std::vector<std::pair<std::string, std::string>> overrides = {
      {"application_name", "pglock_exporter"}};
  if (!dbname.empty()) overrides.emplace_back("dbname", dbname);
  std::unique_ptr<PgConnection> conn;
  if (Status s = PgConnection::Connect(dsn, overrides, deadline, &conn, abort); !s.ok()) return s;
  std::vector<PgResult> ignored;
  if (Status s = conn->Exec(queries::kSessionSetup, {}, deadline, &ignored); !s.ok()) return s;
  // Best effort: a backend that refuses it costs its polls a little CPU, nothing else.
  if (Status s = conn->Exec(queries::kBackendMemory, {}, deadline, &ignored); !s.ok()) {
    if (s.kind() != Status::Kind::kStatementFailed) return s;
    spdlog::info(
        "session setup: the server refused the allocation that keeps a poll's memory in its "
        "backend (queries/backend_memory.sql), polls go on without it: {}",
        s.message());
  }
  *out = std::move(conn);
  return Status::Ok();
}

}  // namespace pglock
