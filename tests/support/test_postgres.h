// A throwaway PostgreSQL server for integration tests: initdb in a temporary directory, a free
// port on 127.0.0.1, started and stopped with pg_ctl (as the `postgres` user when the tests run
// as root, since PostgreSQL refuses to run as root), stopped and removed by the destructor or, if
// the test binary is killed first, by a watchdog (test_postgres.cc). Not thread-safe; one per
// test binary.
#pragma once

#include <libpq-fe.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pglock::testing {

// A free TCP port on 127.0.0.1 (bound once, then released).
int FreePort();

class TestPostgres {
 public:
  // Creates and starts a server. nullptr and *error on failure.
  static std::unique_ptr<TestPostgres> Start(std::string* error,
                                             const std::vector<std::string>& settings = {});
  ~TestPostgres();
  TestPostgres(const TestPostgres&) = delete;
  TestPostgres& operator=(const TestPostgres&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string Dsn(const std::string& dbname = "postgres",
                  const std::string& user = "postgres") const;

  // A hot standby streaming from this server (pg_basebackup -R; it inherits this server's
  // postgresql.conf, so max_connections and max_locks_per_transaction match), started on a free
  // port and caught up. nullptr and *error on failure.
  std::unique_ptr<TestPostgres> StartStandby(std::string* error) const;

  bool StopServer(const std::string& mode = "fast");
  bool StartServer();
  bool RestartServer();

  // server_version_num, for tests of features that older servers lack (12/13: no
  // pg_locks.waitstart, no pg_stat_database.sessions_*, no idle_session_timeout).
  int VersionNum() const;
  // The server's log directory (logging_collector on: csvlog everywhere, jsonlog from 15 on,
  // log_disconnections and log_lock_waits on).
  std::string LogDir() const;

  // Runs SQL as the superuser; aborts the test binary with a message on error. Exec and Scalar
  // run on sessions kept between calls (application_name "harness", one per database and
  // concurrent caller), each left as a new one would be (DISCARD ALL: no settings, advisory locks,
  // temporary tables or prepared statements carried over), since a connection costs the server
  // about 40 ms of CPU on the CI machines and the tests' waits ask the same question every 50 ms.
  // A CREATE, DROP or ALTER of a database, a role or a user ends every kept session first (a DROP
  // DATABASE is not refused for them; a new session reads ALTER ROLE ... SET); a kept session the
  // server ended meanwhile (a restart, pg_terminate_backend) is replaced and the statement run
  // again.
  void Exec(const std::string& sql, const std::string& dbname = "postgres") const;
  // The first column of the first row ("" if none); on error, a test failure and "<error>".
  std::string Scalar(const std::string& sql, const std::string& dbname = "postgres") const;
  // Ends the kept sessions of Exec and Scalar (before a test drops a database of its own, say).
  void CloseKeptSessions() const;

 private:
  TestPostgres() = default;
  // Makes pg->dir_, a temporary directory owned by the server's user; false and *error on failure.
  static bool MakeDir(TestPostgres* pg, std::string* error);
  // `command` as the server's user (runuser when the tests run as root), for sh -c.
  std::string Command(const std::string& command) const;
  bool Run(const std::string& command) const;
  // Runs `sql` on a kept session of `dbname`: false and *error on failure (*connect_failed when no
  // session could be opened); *value gets the first column of the first row.
  bool RunKept(const std::string& sql, const std::string& dbname, std::string* value,
               std::string* error, bool* connect_failed) const;

  std::string dir_;
  std::string bindir_;
  int port_ = 0;
  bool as_postgres_user_ = false;
  bool running_ = false;
  mutable std::mutex kept_mu_;
  mutable std::multimap<std::string, PGconn*> kept_;  // idle sessions by database
};

// A client session used to drive a scenario (hold a lock, wait, sit idle in transaction). Each
// session is a client of its own, as in production: unless the dsn (or PGAPPNAME) sets an
// application_name, it connects as "session-<n>", n counting the TestSessions of the test binary
// from 1, so a rule that tells clients apart by identity sees one client per session. A test about
// a particular application name, or about sessions sharing one, puts application_name in the dsn.
// One session is not thread-safe; different sessions may be opened and used from different threads.
class TestSession {
 public:
  explicit TestSession(const std::string& dsn);
  ~TestSession();
  TestSession(const TestSession&) = delete;
  TestSession& operator=(const TestSession&) = delete;

  bool ok() const;
  int Pid() const;
  // Runs SQL and waits for it; returns the first column of the first row ("" if none). Fails the
  // current test (ADD_FAILURE) on error and returns "<error>".
  std::string Query(const std::string& sql);
  // Runs SQL; false with *error on failure. *value gets the first column of the first row.
  bool TryQuery(const std::string& sql, std::string* value, std::string* error);
  // Runs SQL and returns the error message ("" if it succeeded).
  std::string QueryError(const std::string& sql);
  // Sends SQL without waiting for the result (for statements that block on a lock).
  void Send(const std::string& sql);
  // True once a Send()'s result has arrived (consumes it).
  bool SendDone();
  void Close();
  // Closes the connection as a killed client does: the socket goes, no Terminate message.
  void AbandonSocket();

 private:
  PGconn* conn_ = nullptr;
};

// True when a connection can be opened (no test failure otherwise).
bool CanConnect(const std::string& dsn);

// Polls `condition` every 50 ms until it holds or `seconds` pass.
bool WaitFor(double seconds, const std::function<bool()>& condition);

}  // namespace pglock::testing
