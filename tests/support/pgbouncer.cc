#include "tests/support/pgbouncer.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/support/pg_environment.h"

namespace pglock::testing {

Pgbouncer::Pgbouncer(const PgbouncerOptions& options) {
  port_ = FreePort();
  char tmpl[] = "/tmp/pglock_test_pgb_XXXXXX";
  dir_ = mkdtemp(tmpl);
  std::ofstream(dir_ + "/users.txt") << "\"postgres\" \"\"\n";
  std::ofstream(dir_ + "/pgbouncer.ini")
      << "[databases]\npostgres = host=127.0.0.1 port=" << Pg().port() << " dbname=postgres\n"
      << "* = host=127.0.0.1 port=" << Pg().port() << "\n"
      << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port_
      << "\nunix_socket_dir =\nauth_type = trust\nauth_file = " << dir_
      << "/users.txt\nadmin_users = postgres\npool_mode = " << options.pool_mode
      << "\ndefault_pool_size = " << options.default_pool_size
      << "\nserver_round_robin = " << (options.server_round_robin ? 1 : 0)
      << "\nserver_reset_query =\nlogfile = " << dir_ << "/pgbouncer.log\npidfile = " << dir_
      << "/pgbouncer.pid\n";
  if (geteuid() == 0) std::system(("chown -R postgres " + dir_).c_str());
  const std::string cmd = (geteuid() == 0 ? "runuser -u postgres -- " : "") +
                          std::string("pgbouncer -d ") + dir_ + "/pgbouncer.ini";
  started_ =
      std::system(cmd.c_str()) == 0 && WaitFor(10, [&] { return CanConnect(Dsn("pgbouncer")); });
}

Pgbouncer::~Pgbouncer() {
  std::ifstream pidfile(dir_ + "/pgbouncer.pid");
  int pid = 0;
  if (pidfile >> pid && pid > 0) kill(pid, SIGTERM);
  // It writes its log until it exits: removing the directory before then can leave it behind.
  if (pid > 0) WaitFor(5, [&] { return kill(pid, 0) != 0; });
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string Pgbouncer::Dsn(const std::string& db) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=" + db +
         " user=postgres connect_timeout=5";
}

}  // namespace pglock::testing
