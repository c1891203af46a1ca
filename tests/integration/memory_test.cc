// The exporter's resident size follows the load: the real binary polls a server whose held
// advisory locks go 15k -> 20k -> 80k -> 20k. At 15k it stays under 20 MB; after the fall it is
// back within 1.25x of its own steady 20k size within 60 s. About 35 s; its own main() (a lock
// table of 150k entries). Resident size under AddressSanitizer says nothing: skipped there.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/pg_environment.h"
#include "tests/support/sanitizers.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::TestSession;
using testing::WaitFor;

constexpr double kSteady15kLimitMb = 20;
constexpr double kAfterDropRatio = 1.25;

std::string Binary() {
  const char* env = std::getenv("PGLOCK_EXPORTER_BINARY");
  return env != nullptr ? env : testing::ExporterBinaryDefault();
}

double RssMb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024;
  }
  return -1;
}

// The exporter, polling every second (full polls) with its log in `dir`.
class ExporterProcess {
 public:
  explicit ExporterProcess(const std::string& dir) {
    const std::string config = dir + "/config.toml";
    std::ofstream(config) << "[web]\nlisten_address = \"127.0.0.1:" << testing::FreePort()
                          << "\"\n[poll]\ninterval = \"1s\"\ntimeout = \"900ms\"\n"
                          << "inventory_interval = \"0s\"\n[[targets]]\nname = \"memory\"\n"
                          << "dsn = \"" << Pg().Dsn() << "\"\n";
    pid_ = fork();
    if (pid_ == 0) {
      std::string binary = Binary(), flag = "--config.file=" + config;
      char* argv[] = {binary.data(), flag.data(), nullptr};
      freopen((dir + "/exporter.log").c_str(), "w", stderr);
      execv(argv[0], argv);
      _exit(127);
    }
  }
  ~ExporterProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  ExporterProcess(const ExporterProcess&) = delete;
  ExporterProcess& operator=(const ExporterProcess&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Waits until the exporter's backend starts a statement `n` seconds after now: the exporter
// polls (every second) and has polled the server as it is now for about n polls.
void WaitPolls(int n) {
  TestSession watch(Pg().Dsn());
  const std::string t0 = watch.Query("SELECT now()::text");
  ASSERT_TRUE(WaitFor(30 + n * 5, [&] {
    return watch.Query(
               "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
               "'pglock_exporter' AND query_start >= '" +
               t0 + "'::timestamptz + interval '" + std::to_string(n) + " s'") == "1";
  }));
}

// The median of `n` samples of the resident size, two a second: some fall inside a poll, most
// between two.
double SteadyMb(pid_t pid, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    v.push_back(RssMb(pid));
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Hold(TestSession* s, int first, int n) {
  s->Query("SELECT count(pg_advisory_lock(k)) FROM generate_series(" + std::to_string(first) +
           ", " + std::to_string(first + n - 1) + ") k");
}

TEST(Memory, FollowsTheHeldLocksDown) {
#if defined(PGLOCK_UNDER_ASAN)
  GTEST_SKIP() << "resident size under AddressSanitizer is its quarantine's";
#endif
  char tmpl[] = "/tmp/pglock_memory_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  TestSession base(Pg().Dsn()), more(Pg().Dsn());
  Hold(&base, 1, 15000);
  ExporterProcess exporter(dir);
  WaitPolls(5);
  const double at15k = SteadyMb(exporter.pid(), 10);
  EXPECT_LE(at15k, kSteady15kLimitMb);

  Hold(&more, 100001, 5000);
  WaitPolls(5);
  const double at20k = SteadyMb(exporter.pid(), 10);

  double peak = 0;
  {
    std::vector<std::unique_ptr<TestSession>> spike;
    for (int i = 0; i < 3; ++i) {
      spike.push_back(std::make_unique<TestSession>(Pg().Dsn()));
      Hold(spike.back().get(), 200001 + i * 20000, 20000);
    }
    WaitPolls(5);
    peak = SteadyMb(exporter.pid(), 6);
  }  // the three sessions close: 20k again
  const auto dropped = std::chrono::steady_clock::now();
  double now = 0;
  bool back = false;
  while (!back && std::chrono::steady_clock::now() - dropped < std::chrono::seconds(60)) {
    now = SteadyMb(exporter.pid(), 6);
    back = now <= at20k * kAfterDropRatio;
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - dropped).count();
  std::printf("resident MB: 15k %.1f, 20k %.1f, 80k %.1f, after the fall %.1f (%.0f s)\n", at15k,
              at20k, peak, now, took);
  EXPECT_TRUE(back) << "still " << now
                    << " MB 60 s after 80k locks fell to 20k; steady 20k: " << at20k << " MB";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pglock

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(
      new pglock::testing::PgEnvironment({"max_locks_per_transaction = 512"}));
  return RUN_ALL_TESTS();
}
