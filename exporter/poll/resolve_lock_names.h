// Resolves [[targets.locks]] names to the keys pg_locks shows, with the server's own hash
// functions (hashtextextended, hashtext) or the operator's SQL expressions (key_sql, key1_sql,
// key2_sql), once per connection. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/pg/batch.h"
#include "exporter/pg/connection.h"
#include "exporter/snapshot/lock_names.h"

namespace pglock {

// Resolves every configured name on `conn` into *names (cleared first). An SQL expression that
// fails leaves its lock unnamed and adds "file:line: targets.locks.<key>: lock "<name>": <error>"
// to *problems; the Status is not ok only when the connection failed.
Status ResolveLockNames(PgConnection& conn, const std::vector<LockNameConfig>& locks,
                        const QueryTimeouts& timeouts, SteadyClock::time_point deadline,
                        LockNames* names, std::vector<std::string>* problems);

}  // namespace pglock
