// A throwaway PgBouncer in front of the test server (tests/support/pg_environment.h): its own
// directory and a free port on 127.0.0.1, trust authentication, `postgres` as admin user, run as
// the postgres user when the tests run as root (it refuses root as PostgreSQL does). Stopped and
// removed on destruction. Not thread-safe.
#pragma once

#include <string>

namespace pglock::testing {

struct PgbouncerOptions {
  std::string pool_mode = "transaction";
  int default_pool_size = 20;  // PgBouncer's own default
  // PgBouncer hands out the server connection released last (LIFO) unless this is set: then the
  // one released first, so every connection of the pool takes turns.
  bool server_round_robin = false;
};

class Pgbouncer {
 public:
  explicit Pgbouncer(const PgbouncerOptions& options = {});
  ~Pgbouncer();
  Pgbouncer(const Pgbouncer&) = delete;
  Pgbouncer& operator=(const Pgbouncer&) = delete;

  bool started() const { return started_; }
  // A client DSN for database `db` of the pooler ("pgbouncer" is its admin console).
  std::string Dsn(const std::string& db) const;

 private:
  int port_ = 0;
  std::string dir_;
  bool started_ = false;
};

}  // namespace pglock::testing
