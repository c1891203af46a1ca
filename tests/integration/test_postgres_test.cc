// The test harness's own promise (tests/support/test_postgres.h): a test binary killed before
// its destructors run leaves no server and no directory behind. This binary runs itself again as
// a child that starts a server and sleeps, kills it with SIGKILL, and waits for the watchdog.
#include "tests/support/test_postgres.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace pglock::testing {
namespace {

constexpr char kChildEnv[] = "PGLOCK_TEST_POSTGRES_CHILD";

// Run by the child only: starts a server, writes "<port> <dir>" to the file kChildEnv names,
// and sleeps until killed.
TEST(TestPostgresChild, StartsAServerAndSleeps) {
  const char* out = std::getenv(kChildEnv);
  if (out == nullptr) GTEST_SKIP() << "run by TestPostgres.KilledTestBinaryLeavesNoServer only";
  std::string error;
  auto pg = TestPostgres::Start(&error);
  ASSERT_NE(pg, nullptr) << error;
  {
    std::ofstream f(std::string(out) + ".tmp");
    f << pg->port() << " " << pg->dir() << "\n";
  }
  std::filesystem::rename(std::string(out) + ".tmp", out);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

bool ServerAnswers(int port) {
  const std::string dsn =
      "host=127.0.0.1 port=" + std::to_string(port) + " dbname=postgres connect_timeout=2";
  return PQping(dsn.c_str()) == PQPING_OK;
}

template <typename F>
bool WaitUntil(std::chrono::seconds limit, F done) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

TEST(TestPostgres, KilledTestBinaryLeavesNoServer) {
  if (std::getenv(kChildEnv) != nullptr) GTEST_SKIP() << "the child";
  char tmpl[] = "/tmp/pglock_watchdog_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string report = std::string(tmpl) + "/child";
  const std::string env = std::string(kChildEnv) + "=" + report;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(const_cast<char*>(env.c_str()));
  envp.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::string filter = "--gtest_filter=TestPostgresChild.StartsAServerAndSleeps";
  char* argv[] = {self.data(), filter.data(), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);

  int port = 0;
  std::string dir;
  const bool reported = WaitUntil(std::chrono::seconds(120), [&] {
    std::ifstream f(report);
    return static_cast<bool>(f >> port >> dir);
  });
  if (!reported) kill(child, SIGKILL);
  ASSERT_TRUE(reported) << "the child never reported its server";
  EXPECT_TRUE(ServerAnswers(port));
  ASSERT_TRUE(std::filesystem::exists(dir + "/data"));

  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  // The watchdog looks once a second; pg_ctl's immediate stop takes well under a second.
  const bool stopped = WaitUntil(std::chrono::seconds(30), [&] { return !ServerAnswers(port); });
  EXPECT_TRUE(stopped) << "the server on port " << port << " outlived its killed test binary";
  if (!stopped) {  // not left running for the rest of the run: SIGQUIT is an immediate shutdown
    std::ifstream pidfile(dir + "/data/postmaster.pid");
    if (pid_t postmaster = 0; pidfile >> postmaster && postmaster > 0) kill(postmaster, SIGQUIT);
    WaitUntil(std::chrono::seconds(30), [&] { return !ServerAnswers(port); });
  }
  const bool removed =
      WaitUntil(std::chrono::seconds(30), [&] { return !std::filesystem::exists(dir); });
  EXPECT_TRUE(removed) << dir << " outlived its killed test binary";
  if (!removed) std::filesystem::remove_all(dir);
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace pglock::testing
