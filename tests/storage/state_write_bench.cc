// What keeping a target's state costs ([storage] path): a state of N held locks (each its own
// session, the worst case for the file's size; plus a full event log) encoded, written
// atomically (fsync included) and read back, on this machine's disk. Run by hand, not by ctest:
//   build/tests/state_write_bench [LOCKS [DIR [EVENTS]]]   (defaults: 20000, /tmp, 1000)
// Prints the file's size and the CPU and wall time of each step (median of 5).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "exporter/storage/saved_state.h"
#include "exporter/storage/state_store.h"

namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Cost {
  double cpu_ms;
  double wall_ms;
};

template <typename F>
Cost Median(F f) {
  std::vector<Cost> runs;
  for (int i = 0; i < 5; ++i) {
    const double c0 = CpuSeconds(), w0 = WallSeconds();
    f();
    runs.push_back({(CpuSeconds() - c0) * 1e3, (WallSeconds() - w0) * 1e3});
  }
  std::sort(runs.begin(), runs.end(),
            [](const Cost& a, const Cost& b) { return a.wall_ms < b.wall_ms; });
  return runs[2];
}

}  // namespace

int main(int argc, char** argv) {
  const int locks = argc > 1 ? std::atoi(argv[1]) : 20000;
  const std::string dir = argc > 2 ? argv[2] : "/tmp";
  const int events = argc > 3 ? std::atoi(argv[3]) : 1000;
  pglock::SavedTarget s;
  s.target = "bench";
  s.server = "7312345678901234567|5432";
  auto poll = std::make_shared<pglock::PollData>();
  poll->now = 1796400000;
  for (int i = 0; i < locks; ++i) {
    pglock::Session session;
    session.pid = 100000 + i;
    session.datid = 5;
    session.datname = "app";
    session.usename = "worker";
    session.application_name = "job-runner-" + std::to_string(i % 50);
    session.client_addr = "10.0.3." + std::to_string(i % 250);
    session.state = "idle";
    session.backend_start = 1796300000.123456 + i;
    session.state_change = 1796399000.654321 + i;
    poll->sessions.push_back(session);
    pglock::AdvisoryLock lock;
    lock.key = {5, 0, static_cast<uint32_t>(i), 1};
    lock.pid = session.pid;
    poll->locks.push_back(lock);
    s.first_seen.push_back({session.pid, session.backend_start, lock.key, 1796300001.5 + i});
  }
  s.inventory = poll;
  for (int i = 0; i < events; ++i) {
    pglock::Event e;
    e.time = 1796399999.5 + i;
    e.target = "bench";
    e.kind = pglock::EventKind::kLockReleased;
    e.cause = pglock::CauseOf(pglock::HoldEnd::kCleanClose);
    e.evidence = pglock::EndEvidence::kLog;
    e.lock = "job:" + std::to_string(i);
    e.previous.pid = 100000 + i;
    e.previous.application_name = "job-runner";
    s.events.push_back(e);
  }
  std::string bytes;
  const Cost encode = Median([&] { bytes = pglock::EncodeSavedTarget(s); });
  const std::string path = pglock::StateFilePath(dir, "bench");
  const Cost write = Median([&] {
    if (!pglock::WriteFileAtomically(path, bytes).ok()) std::abort();
  });
  pglock::SavedTarget back;
  const Cost decode = Median([&] {
    if (!pglock::DecodeSavedTarget(bytes, &back).ok()) std::abort();
  });
  std::printf("locks %d, events %d: file %.2f MB (%zu bytes)\n", locks, events,
              static_cast<double>(bytes.size()) / 1e6, bytes.size());
  std::printf("encode  cpu %7.2f ms  wall %7.2f ms\n", encode.cpu_ms, encode.wall_ms);
  std::printf("write   cpu %7.2f ms  wall %7.2f ms (temporary file, fsync, rename)\n", write.cpu_ms,
              write.wall_ms);
  std::printf("decode  cpu %7.2f ms  wall %7.2f ms (once, at start)\n", decode.cpu_ms,
              decode.wall_ms);
  pglock::RemoveFile(path).ok();
  return 0;
}
