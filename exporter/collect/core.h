// The core collectors of one poll: server identity and clock, sessions (pg_stat_activity),
// advisory locks (pg_locks), timeout settings (pg_settings, pg_db_role_setting) and session end
// counters (pg_stat_database). Their SQL (queries/*.sql) runs as ONE simple-protocol round trip in
// one implicit transaction, so every row shares the same now(). Thread-compatible: one call at a
// time per connection.
#pragma once

#include <string>
#include <vector>

#include "exporter/pg/connection.h"
#include "exporter/snapshot/poll_data.h"

namespace pglock {

struct CoreQueryOptions {
  int server_version_num = 0;  // chooses the SQL variants (12/13 vs 14+)
  int statement_timeout_ms = 3000;
  int lock_timeout_ms = 500;
  bool inventory = true;  // read every advisory lock; false: only when someone waits on one
};

// Runs the core statements and fills the core part of *data. False and *error on any failure.
bool CollectCore(PgConnection& conn, const CoreQueryOptions& options,
                 SteadyClock::time_point deadline, PollData* data, std::string* error);

// Parsers, one per statement, exposed for tests. Each returns false with *error on a result whose
// shape is not what the SQL promises.
bool ParseServer(const PgResult& r, PollData* data, std::string* error);
bool ParseActivity(const PgResult& r, PollData* data, std::string* error);
bool ParseAdvisoryLocks(const PgResult& r, PollData* data, std::string* error);
bool ParseSettings(const PgResult& r, PollData* data, std::string* error);
bool ParseSettingOverrides(const PgResult& r, PollData* data, std::string* error);
bool ParseDatabaseStats(const PgResult& r, PollData* data, std::string* error);

// Replaces {name} placeholders in a query template.
std::string FillTemplate(std::string sql,
                         const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace pglock
