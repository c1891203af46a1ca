// The pglock_exporter binary as a user runs it: config errors and exit codes, /metrics and the
// other endpoints over real HTTP, a database that stops and comes back, a target that accepts
// TCP but never answers, the exporter's own session terminated, SIGHUP reload, SIGTERM, TLS and
// basic auth with a real certificate, secrets that never leak, and the warning about two targets
// on one server.
#include <crypt.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "exporter/http/server.h"
#include "tests/support/build_paths.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/sanitizers.h"

namespace pglock {
namespace {

// How much the exporter's resident size may grow over 2,000 scrapes. Under AddressSanitizer freed
// memory waits in its quarantine (256 MB by default) before reuse, so the resident size grows with
// every allocation, leak or not: that build bounds it loosely and LeakSanitizer checks for leaks.
#if defined(PGLOCK_UNDER_ASAN)
constexpr long kScrapeRssGrowthKb = 64 * 1024;
#else
constexpr long kScrapeRssGrowthKb = 8 * 1024;
#endif

using testing::Pg;
using testing::Sample;
using testing::TestSession;
using testing::Value;
using testing::WaitFor;

std::string Binary() {
  const char* env = std::getenv("PGLOCK_EXPORTER_BINARY");
  return env != nullptr ? env : testing::ExporterBinaryDefault();
}

std::string TempDir() {
  char tmpl[] = "/tmp/pglock_proc_XXXXXX";
  return mkdtemp(tmpl);
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CommandResult {
  int status = -1;
  std::string output;
};

CommandResult RunCommand(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n = 0;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = p != nullptr ? pclose(p) : -1;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

struct HttpResponse {
  int code = 0;
  std::string body;
  std::string headers;
  double seconds = 0;
};

HttpResponse Get(const std::string& url, const std::string& curl_args = "") {
  const auto start = std::chrono::steady_clock::now();
  char hdr[] = "/tmp/pglock_hdr_XXXXXX";
  close(mkstemp(hdr));
  const CommandResult r = RunCommand("curl -s --max-time 5 -D " + std::string(hdr) + " " +
                                     curl_args + " -w '\\n%{http_code}' '" + url + "'");
  HttpResponse out;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.headers = ReadFile(hdr);
  unlink(hdr);
  const auto nl = r.output.rfind('\n');
  if (nl != std::string::npos) {
    out.body = r.output.substr(0, nl);
    out.code = std::atoi(r.output.c_str() + nl + 1);
  }
  return out;
}

// A listener that completes TCP handshakes (the kernel does) but never reads or answers: a
// server that hangs.
class StalledListener {
 public:
  StalledListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 64);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~StalledListener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A running exporter process with its log captured. It listens on `listen_host`:<a free port>.
class Exporter {
 public:
  Exporter(const std::string& config_path, const std::vector<std::string>& extra = {},
           const std::string& listen_host = "127.0.0.1") {
    port_ = testing::FreePort();
    dir_ = TempDir();
    log_ = dir_ + "/exporter.log";
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<std::string> args = {
          Binary(), "--config.file=" + config_path,
          "--web.listen-address=" + listen_host + ":" + std::to_string(port_), "--log.level=debug"};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      freopen(log_.c_str(), "w", stderr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Exporter() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Url(const std::string& path, bool tls = false) const {
    return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + path;
  }
  bool WaitServing(const std::string& curl_args = "", bool tls = false) const {
    return WaitFor(10, [&] { return Get(Url("/-/healthy", tls), curl_args).code == 200; });
  }
  std::vector<Sample> Scrape(const std::string& curl_args = "", bool tls = false) const {
    const HttpResponse r = Get(Url("/metrics", tls), curl_args);
    return testing::ParseSamples(r.body);
  }
  void Signal(int sig) const { kill(pid_, sig); }
  // Waits for exit; returns the exit status or -1 on timeout.
  int WaitExit(double seconds) {
    int status = 0;
    const bool done = WaitFor(seconds, [&] { return waitpid(pid_, &status, WNOHANG) == pid_; });
    if (!done) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Log() const { return ReadFile(log_); }
  int pid() const { return pid_; }
  int port() const { return port_; }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
  std::string dir_;
  std::string log_;
};

std::string MainTarget(const std::string& name = "main", const std::string& extra_dsn = "") {
  return "[[targets]]\nname = \"" + name + "\"\ndsn = \"" + Pg().Dsn() + extra_dsn + "\"\n";
}

TEST(Process, BadConfigNamesFileLineKeyAndExits2) {
  const std::string dir = TempDir();
  const std::string path = dir + "/bad.toml";
  WriteFile(path,
            "[web]\nlisten_address = \":9716\"\ncolour = \"blue\"\n[poll]\ninterval = \"5 "
            "seconds\"\n[[targets]]\nname = \"a\"\n[[targets]]\nname = \"a\"\n");
  const auto check = RunCommand(Binary() + " --check-config --config.file=" + path);
  EXPECT_EQ(check.status, 2) << check.output;
  EXPECT_NE(check.output.find(path + ":3: web.colour: unknown key"), std::string::npos)
      << check.output;
  EXPECT_NE(check.output.find(path + ":5: poll.interval:"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("duplicate target name \"a\""), std::string::npos) << check.output;
  // Without --check-config: the same errors and exit 2 before listening.
  const auto run = RunCommand(Binary() + " --config.file=" + path);
  EXPECT_EQ(run.status, 2);
  EXPECT_EQ(RunCommand(Binary() + " --no-such-flag").status, 2);
  EXPECT_EQ(RunCommand(Binary() + " --config.file=" + dir + "/missing.toml").status, 2);
  WriteFile(path, MainTarget());
  const auto ok = RunCommand(Binary() + " --check-config --config.file=" + path);
  EXPECT_EQ(ok.status, 0) << ok.output;
  std::filesystem::remove_all(dir);
}

// --check-targets from the command line: 0 when everything resolves, 1 with one line per problem
// naming the file, line and key, 2 for a config that does not validate (before connecting).
TEST(Process, CheckTargetsExitsZeroOneOrTwo) {
  const std::string dir = TempDir();
  const std::string path = dir + "/targets.toml";
  WriteFile(path, MainTarget() + "  [[targets.locks]]\n  name = \"sweep\"\n  key = 42\n");
  const auto good = RunCommand(Binary() + " --check-targets --config.file=" + path);
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("lock \"sweep\": key 42 (key), not held now"), std::string::npos)
      << good.output;
  WriteFile(path, MainTarget() + "  [[targets.leases]]\n  table = \"no_such_table\"\n");
  const auto broken = RunCommand(Binary() + " --check-targets --config.file=" + path);
  EXPECT_EQ(broken.status, 1) << broken.output;
  EXPECT_NE(broken.output.find("PROBLEM " + path +
                               ":5: targets.leases.table: lease table \"no_such_table\" does not "
                               "exist"),
            std::string::npos)
      << broken.output;
  WriteFile(path, MainTarget() + "colour = \"blue\"\n");
  const auto bad = RunCommand(Binary() + " --check-targets --config.file=" + path);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find(path + ":4: targets.colour: unknown key"), std::string::npos)
      << bad.output;
  std::filesystem::remove_all(dir);
}

// A config of the main target and one named "stalled" at `stalled`, polled every `every` with
// that deadline.
std::string StalledConfig(const StalledListener& stalled, const std::string& every) {
  return "[poll]\ninterval = \"" + every + "\"\ntimeout = \"" + every + "\"\n" + MainTarget() +
         "[[targets]]\nname = \"stalled\"\ndsn = \"host=127.0.0.1 port=" +
         std::to_string(stalled.port()) + " dbname=x user=x\"\n";
}

TEST(Process, ServesMetricsWhileAStalledTargetTimesOut) {
  StalledListener stalled;
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  WriteFile(path, StalledConfig(stalled, "1s"));
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing()) << exporter.Log();
  std::vector<Sample> samples;
  // Until its first poll has failed, the stalled target is down with no duration yet.
  ASSERT_TRUE(WaitFor(10, [&] {
    samples = exporter.Scrape();
    return Value(samples, "pglock_up", {{"target", "main"}}) == 1 &&
           Value(samples, "pglock_up", {{"target", "stalled"}}) == 0 &&
           Value(samples, "pglock_poll_errors_total", {{"target", "stalled"}}) >= 1;
  })) << exporter.Log();
  // The hung target costs the deadline (1 s), not a second one, and never slows the other target
  // or the scrape: either, if it waited for the hung one, would take at least its deadline, so each
  // must end before the hung poll did (an ordering, not a bound a loaded machine can break).
  const double stalled_poll =
      *Value(samples, "pglock_poll_duration_seconds", {{"target", "stalled"}});
  EXPECT_GT(stalled_poll, 0.9);
  EXPECT_LT(stalled_poll, 2.0);
  EXPECT_LT(*Value(samples, "pglock_poll_duration_seconds", {{"target", "main"}}), stalled_poll);
  const HttpResponse metrics = Get(exporter.Url("/metrics"));
  EXPECT_LT(metrics.seconds, stalled_poll);
  std::string out;
  EXPECT_TRUE(testing::PromtoolCheck(metrics.body, &out)) << out;
  EXPECT_EQ(Get(exporter.Url("/-/ready")).code, 200);
  const HttpResponse landing = Get(exporter.Url("/"));
  EXPECT_EQ(landing.code, 200);
  EXPECT_NE(landing.body.find("stalled"), std::string::npos);
  EXPECT_NE(landing.body.find("href=\"/metrics\""), std::string::npos);
  EXPECT_EQ(Get(exporter.Url("/nope")).code, 404);
  // Logged once per state change, not once per failed poll.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::string log = exporter.Log();
  size_t failures = 0;
  for (size_t p = log.find("target stalled: poll failed"); p != std::string::npos;
       p = log.find("target stalled: poll failed", p + 1)) {
    ++failures;
  }
  EXPECT_EQ(failures, 1u) << log;
  exporter.Signal(SIGTERM);
  EXPECT_EQ(exporter.WaitExit(5), 0);
  std::filesystem::remove_all(dir);
}

// SIGTERM ends a poll stuck on a target that never answers: the exit does not wait for the poll's
// deadline. The deadline here is 20 s and the exit must come within 10, so a machine busy with the
// whole test run (a sanitizer build's exit alone can take a second) cannot make it fail.
TEST(Process, SigtermEndsAStalledPollBeforeItsDeadline) {
  StalledListener stalled;
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  WriteFile(path, StalledConfig(stalled, "20s"));
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing()) << exporter.Log();
  // The main target's first poll has ended; the stalled one's began with it and lasts 20 s.
  ASSERT_TRUE(WaitFor(10, [&] {
    return Value(exporter.Scrape(), "pglock_up", {{"target", "main"}}) == 1;
  })) << exporter.Log();
  exporter.Signal(SIGTERM);
  EXPECT_EQ(exporter.WaitExit(10), 0) << exporter.Log();
  std::filesystem::remove_all(dir);
}

TEST(Process, DatabaseDownThenBackAndOwnSessionTerminated) {
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  WriteFile(path, "[poll]\ninterval = \"500ms\"\ntimeout = \"400ms\"\n" + MainTarget());
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing());
  ASSERT_TRUE(WaitFor(5, [&] { return Value(exporter.Scrape(), "pglock_up") == 1; }));

  // The exporter's own session killed: it reconnects by itself.
  Pg().Exec(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
      "'pglock_exporter'");
  ASSERT_TRUE(WaitFor(10, [&] {
    return Pg().Scalar(
               "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
               "'pglock_exporter'") == "1";
  }));
  ASSERT_TRUE(WaitFor(5, [&] { return Value(exporter.Scrape(), "pglock_up") == 1; }));
  // Its session is read-only, autocommit, and never idle in transaction.
  EXPECT_EQ(Pg().Scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                        "'pglock_exporter' AND state LIKE 'idle in transaction%'"),
            "0");

  ASSERT_TRUE(Pg().StopServer());
  std::vector<Sample> samples;
  EXPECT_TRUE(WaitFor(10, [&] {
    samples = exporter.Scrape();
    return Value(samples, "pglock_up") == 0;
  }));
  // Down: the lock series are gone, health and counters stay; /metrics answers quickly.
  EXPECT_TRUE(testing::Select(samples, "pglock_advisory_locks_held").empty());
  EXPECT_GE(*Value(samples, "pglock_poll_errors_total"), 1);
  EXPECT_LT(Get(exporter.Url("/metrics")).seconds, 1.0);
  ASSERT_TRUE(Pg().StartServer());
  EXPECT_TRUE(WaitFor(20, [&] { return Value(exporter.Scrape(), "pglock_up") == 1; }))
      << exporter.Log();
  const std::string log = exporter.Log();
  EXPECT_NE(log.find("recovered"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

TEST(Process, SighupAddsTargetsAndKeepsTheOldConfigWhenTheNewOneIsBad) {
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  WriteFile(path, "[poll]\ninterval = \"500ms\"\n" + MainTarget("one"));
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing());
  ASSERT_TRUE(WaitFor(5, [&] {
    return Value(exporter.Scrape(), "pglock_up", {{"target", "one"}}) == 1;
  }));
  WriteFile(path, "[poll]\ninterval = \"500ms\"\n" + MainTarget("one") + MainTarget("two"));
  exporter.Signal(SIGHUP);
  EXPECT_TRUE(WaitFor(5, [&] {
    return Value(exporter.Scrape(), "pglock_up", {{"target", "two"}}) == 1;
  }));
  WriteFile(path, "[poll]\ninterval = \"soon\"\n");
  exporter.Signal(SIGHUP);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto samples = exporter.Scrape();
  EXPECT_EQ(Value(samples, "pglock_up", {{"target", "one"}}), 1);
  EXPECT_EQ(Value(samples, "pglock_up", {{"target", "two"}}), 1);
  EXPECT_NE(exporter.Log().find("keeping the running configuration"), std::string::npos);
  WriteFile(path, "[poll]\ninterval = \"500ms\"\n" + MainTarget("two"));
  exporter.Signal(SIGHUP);
  EXPECT_TRUE(WaitFor(5, [&] {
    const auto s = exporter.Scrape();
    return !Value(s, "pglock_up", {{"target", "one"}}).has_value() &&
           Value(s, "pglock_up", {{"target", "two"}}) == 1;
  }));
  std::filesystem::remove_all(dir);
}

TEST(Process, SighupWithChangedSettingsKeepsUpAndCountersUnlessTheDsnChanged) {
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  const std::string poll = "[poll]\ninterval = \"1s\"\n";
  WriteFile(path, poll + MainTarget("one"));
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing());
  auto released = [&](const std::vector<Sample>& s) {
    return Value(s, "pglock_advisory_lock_releases_total",
                 {{"target", "one"}, {"reason", "unlocked"}, {"lock", "unnamed"}});
  };
  TestSession s(Pg().Dsn());
  ASSERT_TRUE(WaitFor(15, [&] { return Value(exporter.Scrape(), "pglock_up") == 1; }));
  s.Query("SELECT pg_advisory_lock(7171)");
  ASSERT_TRUE(WaitFor(15, [&] {
    return Value(exporter.Scrape(), "pglock_advisory_locks_held", {{"datname", "postgres"}}) >= 1;
  }));
  s.Query("SELECT pg_advisory_unlock(7171)");
  ASSERT_TRUE(WaitFor(15, [&] { return released(exporter.Scrape()) >= 1; }));
  const double before = *released(exporter.Scrape());

  // Settings change (a named lock, top_n): every scrape through the reload keeps the target up
  // and its counters.
  WriteFile(path, "[poll]\ninterval = \"1s\"\ntop_n = 5\n" + MainTarget("one") +
                      "  [[targets.locks]]\n  name = \"sweep\"\n  key = 7171\n");
  exporter.Signal(SIGHUP);
  int scrapes = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    const auto samples = exporter.Scrape();
    EXPECT_EQ(Value(samples, "pglock_up", {{"target", "one"}}), 1) << "scrape " << scrapes;
    EXPECT_EQ(released(samples), before) << "scrape " << scrapes;
    ++scrapes;
  }
  EXPECT_GT(scrapes, 5);
  EXPECT_NE(exporter.Log().find("settings reloaded; connection and counters kept"),
            std::string::npos);
  // The new lock name is in force on the same connection.
  s.Query("SELECT pg_advisory_lock(7171)");
  EXPECT_TRUE(WaitFor(15, [&] {
    return Value(exporter.Scrape(), "pglock_advisory_lock_held_seconds", {{"lock", "sweep"}})
        .has_value();
  }));
  s.Query("SELECT pg_advisory_unlock(7171)");

  // A new DSN is a new server as far as the exporter knows: counters start again.
  WriteFile(path, poll + MainTarget("one", " application_name=other"));
  exporter.Signal(SIGHUP);
  EXPECT_TRUE(WaitFor(15, [&] {
    const auto samples = exporter.Scrape();
    // Counters start again (absent until a lock is seen held, then 0).
    return Value(samples, "pglock_up", {{"target", "one"}}) == 1 &&
           released(samples).value_or(0) == 0;
  }));
  std::filesystem::remove_all(dir);
}

std::string BcryptHash(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  crypt_gensalt_rn("$2b$", 5, nullptr, 0, salt, sizeof salt);
  crypt_data data;
  std::memset(&data, 0, sizeof data);
  return crypt_r(password.c_str(), salt, &data);
}

// How many lines of `log` contain `text`.
int CountLines(const std::string& log, const std::string& text) {
  std::istringstream lines(log);
  int n = 0;
  for (std::string line; std::getline(lines, line);) n += line.find(text) != std::string::npos;
  return n;
}

TEST(Process, TwoTargetsOnOneServerAreWarnedAboutOnceAtStartAndAfterEachReload) {
  constexpr char kWarning[] = "targets one and two poll the same PostgreSQL server";
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  const std::string poll = "[poll]\ninterval = \"1s\"\n";
  // One target, with a lease table in another database: its extra session is not a target.
  Pg().Exec("DROP DATABASE IF EXISTS warn_other");
  Pg().Exec("CREATE DATABASE warn_other");
  const std::string one = MainTarget("one") +
                          "  [[targets.leases]]\n  table = \"leases\"\n  database = "
                          "\"warn_other\"\n";
  WriteFile(path, poll + one);
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing());
  ASSERT_TRUE(WaitFor(15, [&] { return Value(exporter.Scrape(), "pglock_up") == 1; }));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(CountLines(exporter.Log(), "poll the same PostgreSQL server"), 0) << exporter.Log();

  // A second target on the same server: one warning naming both, not one per poll.
  WriteFile(path, poll + one + MainTarget("two"));
  exporter.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor(15, [&] { return CountLines(exporter.Log(), kWarning) >= 1; }))
      << exporter.Log();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(CountLines(exporter.Log(), kWarning), 1) << exporter.Log();
  EXPECT_NE(exporter.Log().find("use one target per server"), std::string::npos);
  // Reconnects are not reloads: no new warning.
  Pg().Exec(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
      "'pglock_exporter'");
  ASSERT_TRUE(WaitFor(10, [&] {
    const auto s = exporter.Scrape();
    return Value(s, "pglock_up", {{"target", "one"}}) == 1 &&
           Value(s, "pglock_up", {{"target", "two"}}) == 1 &&
           Value(s, "pglock_poll_errors_total", {{"target", "two"}}) >= 1;
  }));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(CountLines(exporter.Log(), kWarning), 1) << exporter.Log();

  // Each reload warns once more, even when both targets keep their connection.
  exporter.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor(15, [&] { return CountLines(exporter.Log(), kWarning) >= 2; }))
      << exporter.Log();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(CountLines(exporter.Log(), kWarning), 2) << exporter.Log();

  // Back to one target per server: quiet.
  WriteFile(path, poll + one);
  exporter.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor(15, [&] {
    return !Value(exporter.Scrape(), "pglock_up", {{"target", "two"}}).has_value();
  }));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(CountLines(exporter.Log(), kWarning), 2) << exporter.Log();
  exporter.Signal(SIGTERM);
  EXPECT_EQ(exporter.WaitExit(5), 0);
  Pg().Exec("DROP DATABASE IF EXISTS warn_other WITH (FORCE)");
  std::filesystem::remove_all(dir);
}

TEST(Process, TwoTargetsOnOneServerFromTheStartAreWarnedAboutOnce) {
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  WriteFile(path, "[poll]\ninterval = \"1s\"\n" + MainTarget("b") + MainTarget("a"));
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing());
  ASSERT_TRUE(WaitFor(15, [&] {
    return CountLines(exporter.Log(), "targets a and b poll the same PostgreSQL server") == 1;
  })) << exporter.Log();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const std::string log = exporter.Log();
  EXPECT_EQ(CountLines(log, "poll the same PostgreSQL server"), 1) << log;
  EXPECT_NE(log.find("system_identifier " +
                     Pg().Scalar("SELECT system_identifier FROM "
                                 "pg_control_system()") +
                     ", port " + std::to_string(Pg().port())),
            std::string::npos)
      << log;
  std::filesystem::remove_all(dir);
}

TEST(Process, TlsAndBasicAuthWithRealCertificate) {
  const std::string dir = TempDir();
  ASSERT_EQ(RunCommand("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                       "-addext subjectAltName=IP:127.0.0.1 -keyout " +
                       dir + "/tls.key -out " + dir + "/tls.crt")
                .status,
            0);
  const std::string path = dir + "/c.toml";
  WriteFile(path, "[web]\ntls_cert_file = \"" + dir + "/tls.crt\"\ntls_key_file = \"" + dir +
                      "/tls.key\"\n[web.basic_auth_users]\nprometheus = \"" +
                      BcryptHash("hunter2") + "\"\n" + MainTarget());
  Exporter exporter(path);
  const std::string ca = "--cacert " + dir + "/tls.crt";
  ASSERT_TRUE(exporter.WaitServing(ca, true)) << exporter.Log();
  const HttpResponse anonymous = Get(exporter.Url("/metrics", true), ca);
  EXPECT_EQ(anonymous.code, 401);
  EXPECT_NE(anonymous.headers.find("WWW-Authenticate: Basic"), std::string::npos);
  EXPECT_EQ(Get(exporter.Url("/metrics", true), ca + " -u prometheus:wrong").code, 401);
  EXPECT_EQ(Get(exporter.Url("/metrics", true), ca + " -u nobody:hunter2").code, 401);
  EXPECT_EQ(Get(exporter.Url("/", true), ca).code, 401);
  const HttpResponse ok = Get(exporter.Url("/metrics", true), ca + " -u prometheus:hunter2");
  EXPECT_EQ(ok.code, 200);
  EXPECT_NE(ok.body.find("pglock_up"), std::string::npos);
  EXPECT_EQ(Get(exporter.Url("/-/healthy", true), ca).code, 200);  // open for probes
  EXPECT_EQ(Get(exporter.Url("/metrics", false), "-u prometheus:hunter2").code, 0);  // no HTTP
  std::filesystem::remove_all(dir);
}

TEST(Process, PasswordsNeverLeakToLogsMetricsOrLandingPage) {
  Pg().Exec("DROP ROLE IF EXISTS secretive");
  Pg().Exec("CREATE ROLE secretive LOGIN PASSWORD 'Sup3r-s3cret-pw' IN ROLE pg_monitor");
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  WriteFile(path, "[poll]\ninterval = \"500ms\"\n[[targets]]\nname = \"s\"\ndsn = \"" +
                      Pg().Dsn("postgres", "secretive") +
                      " password=Sup3r-s3cret-pw\"\n[[targets]]\nname = \"uri\"\ndsn = "
                      "\"postgresql://secretive:Sup3r-s3cret-pw@127.0.0.1:1/postgres\"\n");
  chmod(path.c_str(), 0644);
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing());
  ASSERT_TRUE(WaitFor(5, [&] {
    return Value(exporter.Scrape(), "pglock_up", {{"target", "s"}}) == 1;
  }));
  const std::string metrics = Get(exporter.Url("/metrics")).body;
  const std::string landing = Get(exporter.Url("/")).body;
  const std::string log = exporter.Log();
  for (const std::string* text : {&metrics, &landing, &log}) {
    EXPECT_EQ(text->find("Sup3r-s3cret-pw"), std::string::npos) << *text;
  }
  EXPECT_NE(log.find("password=******"), std::string::npos) << log;
  EXPECT_NE(log.find("readable by other users"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

// Whether `fd` (a TCP socket) connected to 127.0.0.1:`port`.
bool ConnectLocal(int fd, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

// Opens `n` TCP connections to the exporter; each sends `request` (maybe empty) and never reads.
std::vector<int> OpenIdleClients(int port, int n, const std::string& request) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (ConnectLocal(fd, port) && !request.empty()) {
      (void)!write(fd, request.data(), request.size());
    }
    fds.push_back(fd);
  }
  return fds;
}

// One GET of `path` on its own connection, as curl does it, read to the end in this process: the
// status code (0: no answer within `timeout_s`). Thousands of scrapes through curl cost a process
// start each (two minutes of a loaded machine for 2,200); these cost the exporter the same work.
int Scrape(int port, const std::string& path, int timeout_s = 20) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string response;
  if (ConnectLocal(fd, port)) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[16384];
      ssize_t n = 0;
      while ((n = read(fd, buf, sizeof buf)) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  // "HTTP/1.1 200 OK"
  return response.rfind("HTTP/1.", 0) == 0 && response.size() > 12 ? std::atoi(&response[9]) : 0;
}

// `clients` threads scraping `per_client` times each, one after the other: how many answers had
// each status code, "200 x200" for 200 answered with 200.
std::string ScrapeConcurrently(int port, const std::string& path, int clients, int per_client) {
  std::mutex mu;
  std::map<int, int> codes;
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < per_client; ++j) {
        const int code = Scrape(port, path);
        const std::lock_guard<std::mutex> lock(mu);
        ++codes[code];
      }
    });
  }
  for (auto& t : threads) t.join();
  std::string o;
  for (const auto& [code, n] : codes)
    o += (o.empty() ? "" : ", ") + std::to_string(code) + " x" + std::to_string(n);
  return o;
}

long RssKb(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

TEST(Process, ManyConcurrentAndSlowClientsDoNotStallTheExporter) {
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  WriteFile(path,
            "[web]\nmax_connections = 16\nrequest_timeout = \"2s\"\n[poll]\ninterval = "
            "\"500ms\"\n" +
                MainTarget());
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing());
  ASSERT_TRUE(WaitFor(5, [&] { return Value(exporter.Scrape(), "pglock_up") == 1; }));
  const long rss_before = RssKb(exporter.pid());

  // 200 concurrent scrapes: every one answered.
  const std::string url = exporter.Url("/metrics");
  const int port = std::atoi(url.substr(url.rfind(':') + 1).c_str());
  EXPECT_EQ(ScrapeConcurrently(port, "/metrics", 200, 1), "200 x200");

  // Clients that send a request and never read, and clients that send nothing, fewer than the
  // worker threads: scrapes stay fast.
  auto readers = OpenIdleClients(port, 20, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  auto silent = OpenIdleClients(port, 8, "");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const HttpResponse during = Get(url);
  EXPECT_EQ(during.code, 200);
  // Answered while the silent clients still held their connections (they are dropped only at
  // request_timeout): not queued behind them. An ordering, where a bound in seconds would be
  // broken by a machine busy with the whole test run.
  for (int fd : silent) {
    char c;
    EXPECT_EQ(recv(fd, &c, 1, MSG_DONTWAIT), -1) << "silent client dropped before the scrape ended";
  }
  // Silent clients are dropped after request_timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  for (int fd : silent) {
    char c;
    EXPECT_EQ(recv(fd, &c, 1, MSG_DONTWAIT), 0) << "silent client still connected";
  }
  for (int fd : readers) close(fd);
  for (int fd : silent) close(fd);

  // Memory stays flat across another 2,000 scrapes.
  EXPECT_EQ(ScrapeConcurrently(port, "/metrics", 8, 250), "200 x2000");
  const long rss_after = RssKb(exporter.pid());
  EXPECT_LT(rss_after - rss_before, kScrapeRssGrowthKb)
      << rss_before << " kB -> " << rss_after << " kB";
  std::filesystem::remove_all(dir);
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

TEST(Process, MetricsAreGzippedWhenAcceptedAndCompressedOncePerSnapshot) {
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  // One poll an hour: the snapshot, and so the body, stays the same for the whole test.
  WriteFile(path, "[poll]\ninterval = \"1h\"\n" + MainTarget());
  Exporter exporter(path);
  ASSERT_TRUE(exporter.WaitServing()) << exporter.Log();
  ASSERT_TRUE(WaitFor(5, [&] { return Value(exporter.Scrape(), "pglock_up") == 1; }));
  const std::string url = exporter.Url("/metrics");

  const HttpResponse plain = Get(url);
  EXPECT_EQ(plain.code, 200);
  EXPECT_EQ(plain.headers.find("Content-Encoding"), std::string::npos) << plain.headers;
  EXPECT_NE(plain.headers.find("Vary: Accept-Encoding"), std::string::npos) << plain.headers;

  // What Prometheus and curl --compressed do: the decoded body is the plain text.
  const HttpResponse compressed = Get(url, "--compressed");
  EXPECT_EQ(compressed.code, 200);
  EXPECT_NE(compressed.headers.find("Content-Encoding: gzip"), std::string::npos)
      << compressed.headers;
  EXPECT_NE(compressed.headers.find("Vary: Accept-Encoding"), std::string::npos);
  EXPECT_EQ(compressed.body, plain.body);
  std::string out;
  EXPECT_TRUE(testing::PromtoolCheck(compressed.body, &out)) << out;

  // The raw bytes are gzip, smaller, decode to the same text, and are the same bytes every time.
  std::vector<std::string> raw;
  for (int i = 0; i < 5; ++i) {
    const std::string file = dir + "/raw" + std::to_string(i) + ".gz";
    ASSERT_EQ(
        RunCommand("curl -sf -H 'Accept-Encoding: gzip' -o " + file + " '" + url + "'").status, 0);
    raw.push_back(ReadFile(file));
    EXPECT_EQ(raw.back(), raw.front());
    EXPECT_EQ(RunCommand("gzip -dc < " + file).output, plain.body);
  }
  EXPECT_LT(raw.front().size(), plain.body.size() / 2);
  // One compression for every gzip scrape of this snapshot (the log says each one).
  EXPECT_EQ(Count(exporter.Log(), "metrics: compressed"), 1u) << exporter.Log();

  // gzip refused with q=0, or not offered: plain text.
  for (const char* header : {"gzip;q=0", "identity", "gzip;q=0, *;q=1"}) {
    const HttpResponse refused = Get(url, std::string("-H 'Accept-Encoding: ") + header + "'");
    EXPECT_EQ(refused.headers.find("Content-Encoding"), std::string::npos) << header;
    EXPECT_EQ(refused.body, plain.body) << header;
  }
  std::filesystem::remove_all(dir);
}

// Connects to the health endpoint at host:port; the HTTP code, or 0 when nothing answers.
int HealthCode(const std::string& host, int port) {
  return Get("http://" + host + ":" + std::to_string(port) + "/-/healthy").code;
}

TEST(Process, ListenAddressForms) {
  const std::string dir = TempDir();
  const std::string path = dir + "/c.toml";
  WriteFile(path, MainTarget());
  const std::string no_ipv6 = Ipv6Unavailable();
  {
    // ":PORT": every address, IPv6 and IPv4 where both work.
    Exporter all(path, {}, "");
    ASSERT_TRUE(WaitFor(10, [&] { return HealthCode("127.0.0.1", all.port()) == 200; }))
        << all.Log();
    if (no_ipv6.empty()) {
      EXPECT_EQ(HealthCode("[::1]", all.port()), 200) << all.Log();
    } else {
      EXPECT_NE(all.Log().find("listening on IPv4 only: " + no_ipv6), std::string::npos)
          << all.Log();
    }
  }
  {
    Exporter v4(path, {}, "127.0.0.1");
    ASSERT_TRUE(WaitFor(10, [&] { return HealthCode("127.0.0.1", v4.port()) == 200; }));
    EXPECT_EQ(HealthCode("[::1]", v4.port()), 0);
  }
  {
    Exporter v6(path, {}, "[::1]");
    if (no_ipv6.empty()) {
      ASSERT_TRUE(WaitFor(10, [&] { return HealthCode("[::1]", v6.port()) == 200; })) << v6.Log();
      EXPECT_EQ(HealthCode("127.0.0.1", v6.port()), 0);
    } else {
      // Not silently something else: a clear error and a non-zero exit before serving.
      EXPECT_EQ(v6.WaitExit(10), 1);
      EXPECT_NE(
          v6.Log().find("cannot listen on [::1]:" + std::to_string(v6.port()) + ": " + no_ipv6),
          std::string::npos)
          << v6.Log();
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pglock
