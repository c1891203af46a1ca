// Reads a PgBouncer admin console (SHOW POOLS, SHOW SERVERS) to find the server connections of
// pools in transaction or statement mode: a session advisory lock held by one of them outlives the
// client that took it (seed 002). The admin connection is kept between polls by the caller and
// reopened after an error. Thread-compatible.
#pragma once

#include "exporter/config/config.h"
#include "exporter/pg/connection.h"
#include "exporter/snapshot/poll_data.h"

namespace pglock {

// *conn is the pooler's admin connection from the previous poll (or null); it is (re)opened as
// needed and reset after a failure. `abort` as in PgConnection::Connect (may be null).
PoolerData CollectPooler(const PoolerConfig& pooler, std::unique_ptr<PgConnection>* conn,
                         SteadyClock::time_point deadline,
                         const std::atomic<bool>* abort = nullptr);

// Parses SHOW POOLS + SHOW SERVERS results (exposed for tests).
bool ParsePgbouncer(const PgResult& pools, const PgResult& servers, PoolerData* data,
                    std::string* error);

}  // namespace pglock
