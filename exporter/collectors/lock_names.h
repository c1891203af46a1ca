// Resolves [[targets.locks]] names to the keys pg_locks shows, with the server's own hash
// functions (hashtextextended, hashtext) or the operator's SQL expressions (key_sql, key1_sql,
// key2_sql), once per connection. Thread-compatible.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/pg/batch.h"
#include "exporter/pg/connection.h"

namespace pglock {

// (classid, objid, objsubid) -> name; the database is not part of a configured name.
using LockNames = std::map<std::tuple<uint32_t, uint32_t, int>, std::string>;

// Adds the key of a bigint lock (objsubid 1) or an int4 pair (objsubid 2).
void AddBigintName(int64_t key, const std::string& name, LockNames* names);
void AddPairName(int32_t key1, int32_t key2, const std::string& name, LockNames* names);

// Resolves every configured name on `conn` into *names (cleared first). An SQL expression that
// fails leaves its lock unnamed and adds "file:line: targets.locks.<key>: lock "<name>": <error>"
// to *problems; the Status is not ok only when the connection failed.
Status ResolveLockNames(PgConnection& conn, const std::vector<LockNameConfig>& locks,
                        const QueryTimeouts& timeouts, SteadyClock::time_point deadline,
                        LockNames* names, std::vector<std::string>* problems);

}  // namespace pglock
