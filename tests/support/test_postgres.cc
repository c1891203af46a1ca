#include "tests/support/test_postgres.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <thread>

namespace pglock::testing {
namespace {

std::string FindBindir() {
  if (const char* env = std::getenv("PGLOCK_PG_BINDIR")) return env;
  for (const char* v : {"17", "16", "15", "14"}) {
    const std::string dir = std::string("/usr/lib/postgresql/") + v + "/bin";
    if (std::filesystem::exists(dir + "/pg_ctl")) return dir;
  }
  return "";
}

// "session-<n>", a new n for every TestSession of the test binary (sessions may be opened from
// several threads).
std::string NextSessionName() {
  static std::atomic<int> sessions{0};
  return "session-" + std::to_string(++sessions);
}

// Connects with `dsn`, as a client named `name` (a new session name by default): libpq uses
// fallback_application_name only where neither the dsn nor PGAPPNAME names the application. It
// comes before dbname (the dsn, expanded) so that a fallback_application_name in the dsn wins as
// well.
PGconn* ConnectAsOwnClient(const std::string& dsn, const std::string& name = NextSessionName()) {
  const char* const keywords[] = {"fallback_application_name", "dbname", nullptr};
  const char* const values[] = {name.c_str(), dsn.c_str(), nullptr};
  return PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
}

// Runs `sql` on `c`: false and *error on failure; *value gets the first column of the first row
// ("" if none).
bool RunOne(PGconn* c, const std::string& sql, std::string* value, std::string* error) {
  PGresult* r = PQexec(c, sql.c_str());
  const auto st = PQresultStatus(r);
  const bool ok = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
  if (!ok) {
    *error = PQerrorMessage(c);
  } else if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0) {
    *value = PQgetvalue(r, 0, 0);
  }
  PQclear(r);
  return ok;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// pg_ctl detaches the server: a test binary killed before its destructors run (a ctest timeout,
// a closed pipe, SIGKILL) would leave its server running and its directory behind, for the rest
// of the run. So every directory gets a watchdog, a shell detached as well (its own session; it
// outlives this process): it waits, a second at a time, for this process or the directory to
// go. The directory first: the destructor did its work, the watchdog exits. This process first:
// the watchdog stops the server (immediate) and removes the directory (kept with
// PGLOCK_KEEP_TEST_PG, as the destructor keeps it).
void StartWatchdog(const std::string& dir, const std::string& stop_command) {
  std::string script = "while kill -0 " + std::to_string(getpid()) + " 2>/dev/null && [ -d " +
                       Quote(dir) + " ]; do sleep 1; done; [ -d " + Quote(dir) + " ] || exit 0; " +
                       stop_command;
  if (std::getenv("PGLOCK_KEEP_TEST_PG") == nullptr) script += "; rm -rf -- " + Quote(dir);
  const std::string launch = "setsid sh -c " + Quote(script) + " </dev/null >/dev/null 2>&1 &";
  if (std::system(launch.c_str()) != 0) {
    std::fprintf(stderr, "test_postgres: no watchdog for %s\n", dir.c_str());
  }
}

// initdb's options for every test server. WAL segments of 1 MB, not 16: a new cluster's one
// segment was 17 of the template's 40 MB, which every test server copies (about 140 copies a run).
constexpr const char* kInitdbOptions =
    " -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 --wal-segsize=1";

// A cluster fresh from initdb for the server binaries in `bindir`, made once per binaries and
// machine and copied by every test server after it: initdb took 2 s of CPU on an idle machine and
// up to 30 s of real time beside a parallel test run, a copy of its 24 MB a tenth of a second.
// `run` runs a command as the servers' user. The key names the binaries (their directory, the
// postgres binary's size and time) and the options, so a new package or server makes a new
// template; the first test binary makes it under a lock while the others wait. Empty on failure,
// with `error` set.
std::string TemplateCluster(const std::string& bindir, bool as_postgres_user,
                            const std::function<bool(const std::string&)>& run,
                            std::string* error) {
  const std::string root = "/tmp/pglock_test_templates";
  mkdir(root.c_str(), 0755);
  struct stat st {};
  stat((bindir + "/postgres").c_str(), &st);
  const size_t key = std::hash<std::string>{}(bindir + "|" + std::to_string(st.st_size) + "|" +
                                              std::to_string(st.st_mtime) + "|" + kInitdbOptions);
  const std::string dir = root + "/" + std::to_string(key);
  const int lock = open((dir + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    *error = "cannot lock " + dir + ".lock";
    if (lock >= 0) close(lock);
    return "";
  }
  std::string made = dir + "/data";
  if (!std::filesystem::exists(made + "/PG_VERSION")) {
    const std::string building = dir + ".new";
    std::error_code ec;
    std::filesystem::remove_all(building, ec);
    std::filesystem::create_directory(building, ec);
    if (as_postgres_user && std::system(("chown postgres " + Quote(building)).c_str()) != 0) {
      *error = "cannot chown " + building + " to postgres";
      made.clear();
    } else if (!run(bindir + "/initdb -D " + Quote(building + "/data") + kInitdbOptions + " >" +
                    Quote(building + "/initdb.log") + " 2>&1")) {
      *error = "initdb failed, see " + building + "/initdb.log";
      made.clear();
    } else {
      std::filesystem::remove_all(dir, ec);
      std::filesystem::rename(building, dir, ec);
      if (ec) {
        *error = "cannot rename " + building + ": " + ec.message();
        made.clear();
      }
    }
  }
  flock(lock, LOCK_UN);
  close(lock);
  return made;
}

}  // namespace

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

std::unique_ptr<TestPostgres> TestPostgres::Start(std::string* error,
                                                  const std::vector<std::string>& settings) {
  std::unique_ptr<TestPostgres> pg(new TestPostgres());
  pg->bindir_ = FindBindir();
  if (pg->bindir_.empty()) {
    *error = "no PostgreSQL server binaries (install postgresql-15)";
    return nullptr;
  }
  if (!MakeDir(pg.get(), error)) return nullptr;
  const std::string cluster = TemplateCluster(
      pg->bindir_, pg->as_postgres_user_,
      [&](const std::string& command) { return pg->Run(command); }, error);
  if (cluster.empty()) return nullptr;
  // As the servers' user, so that the copy is theirs with initdb's modes.
  if (!pg->Run("cp -a " + Quote(cluster) + " " + Quote(pg->dir_ + "/data"))) {
    *error = "cannot copy " + cluster + " to " + pg->dir_ + "/data";
    return nullptr;
  }
  std::ofstream conf(pg->dir_ + "/data/postgresql.conf", std::ios::app);
  conf << "listen_addresses = '127.0.0.1'\nfsync = off\nsynchronous_commit = off\n"
       << "full_page_writes = off\nmax_connections = 300\n"
       << "unix_socket_directories = '" << pg->dir_ << "'\n";
  // The server's structured log, as an operator turns it on for the exporter's exact session
  // ends, waits and deadlocks: csvlog everywhere, jsonlog too from 15 on, in data/log.
  std::ifstream version_file(pg->dir_ + "/data/PG_VERSION");
  int major = 0;
  version_file >> major;
  conf << "logging_collector = on\nlog_directory = 'log'\nlog_min_messages = warning\n"
       << "log_destination = '" << (major >= 15 ? "csvlog,jsonlog" : "csvlog") << "'\n"
       << "log_disconnections = on\nlog_lock_waits = on\nlog_file_mode = 0644\n";
  for (const std::string& s : settings) conf << s << "\n";
  conf.close();
  for (int attempt = 0; attempt < 5; ++attempt) {
    pg->port_ = FreePort();
    if (pg->StartServer()) return pg;
  }
  *error = "pg_ctl start failed, see " + pg->dir_ + "/server.log";
  return nullptr;
}

bool TestPostgres::MakeDir(TestPostgres* pg, std::string* error) {
  char tmpl[] = "/tmp/pglock_test_pg_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *error = "mkdtemp failed";
    return false;
  }
  pg->dir_ = tmpl;
  pg->as_postgres_user_ = geteuid() == 0;
  if (pg->as_postgres_user_ && std::system(("chown postgres " + Quote(pg->dir_)).c_str()) != 0) {
    *error = "cannot chown the data directory to postgres";
    return false;
  }
  StartWatchdog(pg->dir_, pg->Command(pg->bindir_ + "/pg_ctl -D " + Quote(pg->dir_ + "/data") +
                                      " -m immediate -w -t 60 stop >/dev/null 2>&1"));
  return true;
}

std::unique_ptr<TestPostgres> TestPostgres::StartStandby(std::string* error) const {
  std::unique_ptr<TestPostgres> standby(new TestPostgres());
  standby->bindir_ = bindir_;
  if (!MakeDir(standby.get(), error)) return nullptr;
  // initdb's pg_hba.conf lets 127.0.0.1 replicate (trust); wal_level's default is replica.
  if (!standby->Run(bindir_ + "/pg_basebackup -R -X stream -c fast -D " +
                    Quote(standby->dir_ + "/data") + " -d " + Quote(Dsn()) + " >" +
                    Quote(standby->dir_ + "/basebackup.log") + " 2>&1")) {
    *error = "pg_basebackup failed, see " + standby->dir_ + "/basebackup.log";
    return nullptr;
  }
  std::ofstream conf(standby->dir_ + "/data/postgresql.conf", std::ios::app);
  conf << "unix_socket_directories = '" << standby->dir_ << "'\nhot_standby = on\n";
  conf.close();
  for (int attempt = 0; attempt < 5; ++attempt) {
    standby->port_ = FreePort();
    if (!standby->StartServer()) continue;
    // Caught up: the standby has replayed everything the primary had written when it started.
    const std::string lsn = Scalar("SELECT pg_current_wal_lsn()");
    if (WaitFor(60, [&] {
          return standby->Scalar("SELECT pg_last_wal_replay_lsn() >= '" + lsn + "'::pg_lsn") == "t";
        })) {
      return standby;
    }
    *error = "the standby never caught up, see " + standby->dir_ + "/server.log";
    return nullptr;
  }
  *error = "pg_ctl start of the standby failed, see " + standby->dir_ + "/server.log";
  return nullptr;
}

TestPostgres::~TestPostgres() {
  CloseKeptSessions();
  if (running_) StopServer("immediate");
  if (!dir_.empty() && std::getenv("PGLOCK_KEEP_TEST_PG") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string TestPostgres::Command(const std::string& command) const {
  return as_postgres_user_ ? "runuser -u postgres -- sh -c " + Quote(command) : command;
}

bool TestPostgres::Run(const std::string& command) const {
  return std::system(Command(command).c_str()) == 0;
}

bool TestPostgres::StartServer() {
  running_ = Run(bindir_ + "/pg_ctl -D " + Quote(dir_ + "/data") + " -o " +
                 Quote("-p " + std::to_string(port_)) + " -l " + Quote(dir_ + "/server.log") +
                 " -w -t 60 start >/dev/null 2>&1");
  return running_;
}

bool TestPostgres::StopServer(const std::string& mode) {
  CloseKeptSessions();  // a smart shutdown waits for its clients
  const bool ok = Run(bindir_ + "/pg_ctl -D " + Quote(dir_ + "/data") + " -m " + mode +
                      " -w -t 60 stop >/dev/null 2>&1");
  if (ok) running_ = false;
  return ok;
}

bool TestPostgres::RestartServer() {
  CloseKeptSessions();
  const bool ok = Run(bindir_ + "/pg_ctl -D " + Quote(dir_ + "/data") + " -o " +
                      Quote("-p " + std::to_string(port_)) + " -l " + Quote(dir_ + "/server.log") +
                      " -m fast -w -t 60 restart >/dev/null 2>&1");
  running_ = ok;
  return ok;
}

std::string TestPostgres::LogDir() const { return dir_ + "/data/log"; }

std::string TestPostgres::Dsn(const std::string& dbname, const std::string& user) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=" + dbname + " user=" + user +
         " connect_timeout=5";
}

void TestPostgres::CloseKeptSessions() const {
  std::multimap<std::string, PGconn*> kept;
  {
    const std::lock_guard<std::mutex> lock(kept_mu_);
    kept.swap(kept_);
  }
  for (auto& [db, c] : kept) PQfinish(c);
}

bool TestPostgres::RunKept(const std::string& sql, const std::string& dbname, std::string* value,
                           std::string* error, bool* connect_failed) const {
  value->clear();
  *connect_failed = false;
  static const std::regex kAboutSessions(R"(\b(CREATE|DROP|ALTER)\s+(DATABASE|ROLE|USER)\b)",
                                         std::regex::icase);
  const bool about_sessions = std::regex_search(sql, kAboutSessions);
  if (about_sessions) CloseKeptSessions();
  for (int attempt = 0;; ++attempt) {
    PGconn* c = nullptr;
    {
      const std::lock_guard<std::mutex> lock(kept_mu_);
      const auto it = kept_.find(dbname);
      if (it != kept_.end()) {
        c = it->second;
        kept_.erase(it);
      }
    }
    const bool was_kept = c != nullptr;
    if (c == nullptr) {
      c = ConnectAsOwnClient(Dsn(dbname), "harness");
      if (PQstatus(c) != CONNECTION_OK) {
        *error = PQerrorMessage(c);
        *connect_failed = true;
        PQfinish(c);
        return false;
      }
    }
    const bool ok = RunOne(c, sql, value, error);
    if (!ok && was_kept && attempt == 0 && PQstatus(c) == CONNECTION_BAD) {
      // Ended by the server while it was kept: the statement never reached it.
      PQfinish(c);
      continue;
    }
    // Kept only when it is as a new session would be: no transaction left open, nothing of the
    // statement's session state left behind.
    const bool keep =
        !about_sessions && PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) == PQTRANS_IDLE;
    std::string ignored_value, ignored_error;
    if (keep && RunOne(c, "DISCARD ALL", &ignored_value, &ignored_error)) {
      const std::lock_guard<std::mutex> lock(kept_mu_);
      kept_.emplace(dbname, c);
    } else {
      PQfinish(c);
    }
    return ok;
  }
}

void TestPostgres::Exec(const std::string& sql, const std::string& dbname) const {
  std::string value, error;
  bool connect_failed = false;
  if (!RunKept(sql, dbname, &value, &error, &connect_failed)) {
    if (connect_failed) {
      std::fprintf(stderr, "TestPostgres::Exec connect: %s\n", error.c_str());
    } else {
      std::fprintf(stderr, "TestPostgres::Exec %s: %s\n", sql.c_str(), error.c_str());
    }
    std::abort();
  }
}

std::string TestPostgres::Scalar(const std::string& sql, const std::string& dbname) const {
  std::string value, error;
  bool connect_failed = false;
  if (!RunKept(sql, dbname, &value, &error, &connect_failed)) {
    if (connect_failed) {
      ADD_FAILURE() << "connect: " << error;
    } else {
      ADD_FAILURE() << "query failed: " << sql << ": " << error;
    }
    return "<error>";
  }
  return value;
}

int TestPostgres::VersionNum() const { return std::stoi(Scalar("SHOW server_version_num")); }

TestSession::TestSession(const std::string& dsn) : conn_(ConnectAsOwnClient(dsn)) {
  if (PQstatus(conn_) != CONNECTION_OK) {
    ADD_FAILURE() << "connect: " << PQerrorMessage(conn_);
  }
}

TestSession::~TestSession() { Close(); }

void TestSession::AbandonSocket() {
  if (conn_ == nullptr) return;
  shutdown(PQsocket(conn_), SHUT_RDWR);  // the server reads EOF, with no Terminate message
  PQfinish(conn_);
  conn_ = nullptr;
}

void TestSession::Close() {
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
}

bool TestSession::ok() const { return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK; }

int TestSession::Pid() const { return conn_ != nullptr ? PQbackendPID(conn_) : 0; }

std::string TestSession::Query(const std::string& sql) {
  std::string value, error;
  if (!TryQuery(sql, &value, &error)) {
    ADD_FAILURE() << "query failed: " << sql << ": " << error;
    return "<error>";
  }
  return value;
}

std::string TestSession::QueryError(const std::string& sql) {
  std::string value, error;
  return TryQuery(sql, &value, &error) ? "" : error;
}

bool TestSession::TryQuery(const std::string& sql, std::string* value, std::string* error) {
  value->clear();
  if (conn_ == nullptr) {
    *error = "no connection";
    return false;
  }
  return RunOne(conn_, sql, value, error);
}

void TestSession::Send(const std::string& sql) {
  if (conn_ == nullptr || PQsendQuery(conn_, sql.c_str()) == 0) {
    ADD_FAILURE() << "send failed: " << sql;
  }
}

bool TestSession::SendDone() {
  if (conn_ == nullptr) return true;
  PQconsumeInput(conn_);
  if (PQisBusy(conn_) != 0) return false;
  while (PGresult* r = PQgetResult(conn_)) PQclear(r);
  return true;
}

bool CanConnect(const std::string& dsn) {
  PGconn* c = PQconnectdb(dsn.c_str());
  const bool ok = PQstatus(c) == CONNECTION_OK;
  PQfinish(c);
  return ok;
}

bool WaitFor(double seconds, const std::function<bool()>& condition) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

}  // namespace pglock::testing
