// The exporter's own database session, opened the same way wherever one is needed: a target's
// connection, and the connection of lease tables in another database of the target's server.
// application_name = 'pglock_exporter', read-only (queries/session_setup.sql), its backend made to
// keep a poll's memory for the next (queries/backend_memory.sql, best effort), the connect bounded
// by the poll's deadline; each statement batch adds the poll's statement and lock timeouts
// (batch.h). The session never leaves a transaction open. Thread-compatible.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "exporter/pg/connection.h"
#include "exporter/util/status.h"

namespace pglock {

// Opens and sets up a session from `dsn` into *out; `dbname`, when not empty, replaces the DSN's
// database (same server, user and options). `abort` as in PgConnection::Connect.
Status OpenSession(const std::string& dsn, const std::string& dbname,
                   SteadyClock::time_point deadline, const std::atomic<bool>* abort,
                   std::unique_ptr<PgConnection>* out);

}  // namespace pglock
