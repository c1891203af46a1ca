// The README's recipes that several integration tests configure, verbatim, and the tables the
// tools they describe create. Constants only.
#pragma once

namespace pglock::testing {

// The README recipe for knex's lock table.
inline constexpr char kKnexRecipe[] = R"(
  [[targets.leases]]
  table = "knex_migrations_lock"
  name_sql = "'migrations-' || index"
  held_sql = "is_locked = 1"
  row_lock = true
  max_hold = "30m"
)";

// knex's lock table as its first migration creates it, with its one row, not locked.
inline constexpr char kKnexLockTableSql[] =
    "CREATE TABLE knex_migrations_lock (index serial PRIMARY KEY, is_locked integer); "
    "INSERT INTO knex_migrations_lock (is_locked) VALUES (0)";

}  // namespace pglock::testing
