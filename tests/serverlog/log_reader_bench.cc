// Throughput and memory of the server log reader: LogFollower + parsing + SessionEndFacts on one
// core, for jsonlog and csvlog, over a generated log of realistic records (connections, lock waits,
// lock timeouts, statements, terminations, disconnections, checkpoints); then the peak resident
// size while reading a large log that holds one huge record (skipped as oversized).
//
//   log_reader_bench [--mb=200] [--big-mb=1024] [--big-record-mb=64] [--dir=/tmp]
//
// --big-mb=0 skips the large log. The files are written to a temporary directory under --dir and
// removed at the end; they are read from the page cache, so this measures the CPU cost.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "exporter/serverlog/log_follower.h"
#include "exporter/serverlog/session_end_facts.h"

namespace pglock {
namespace {

struct Flags {
  size_t mb = 200;
  size_t big_mb = 1024;
  size_t big_record_mb = 64;
  std::string dir = "/tmp";
};

// The fields a generated record sets.
struct Fields {
  std::string severity = "LOG", sqlstate = "00000", message, detail, context, statement;
  std::string backend_type = "client backend";
  int pid = 0;
};

std::string JsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string CsvQuote(const std::string& s) {
  if (s.empty()) return "";
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string SessionId(int pid) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "66322eb0.%x", pid);
  return buf;
}

std::string ToJson(const Fields& f) {
  const bool client = f.backend_type == "client backend";
  std::string out = R"({"timestamp":"2024-05-01 12:00:05.123 UTC",)";
  if (client) out += R"("user":"app","dbname":"appdb",)";
  out += R"("pid":)" + std::to_string(f.pid) + ",";
  if (client) out += R"("remote_host":"10.0.3.17","remote_port":52144,)";
  out += R"("session_id":")" + SessionId(f.pid) + R"(","line_num":7,"ps":"UPDATE",)" +
         R"("session_start":"2024-05-01 11:59:44 UTC","vxid":"5/27","txid":7412,)" +
         R"("error_severity":")" + f.severity + R"(","state_code":")" + f.sqlstate +
         R"(","message":")" + JsonEscape(f.message) + "\"";
  if (!f.detail.empty()) out += R"(,"detail":")" + JsonEscape(f.detail) + "\"";
  if (!f.context.empty()) out += R"(,"context":")" + JsonEscape(f.context) + "\"";
  if (!f.statement.empty()) out += R"(,"statement":")" + JsonEscape(f.statement) + "\"";
  if (client) out += R"(,"application_name":"worker-17")";
  out += R"(,"backend_type":")" + f.backend_type + R"(","query_id":-4215830611416573000})";
  return out + "\n";
}

std::string ToCsv(const Fields& f) {
  const bool client = f.backend_type == "client backend";
  std::string out = "2024-05-01 12:00:05.123 UTC,";
  out += client ? "\"app\",\"appdb\"," : ",,";
  out += std::to_string(f.pid) + "," + (client ? "\"10.0.3.17:52144\"," : ",") + SessionId(f.pid) +
         ",7,\"UPDATE\",2024-05-01 11:59:44 UTC,5/27,7412," + f.severity + "," + f.sqlstate + "," +
         CsvQuote(f.message) + "," + CsvQuote(f.detail) + ",,,," + CsvQuote(f.context) + "," +
         CsvQuote(f.statement) + ",,," + (client ? "\"worker-17\"" : "") + ",\"" + f.backend_type +
         "\",,-4215830611416573000";
  return out + "\n";
}

// One of the kinds of records a busy server with log_lock_waits and log_connections writes.
Fields MakeRecord(std::mt19937& rng) {
  Fields f;
  f.pid = 40000 + static_cast<int>(rng() % 2000);
  const std::string pid = std::to_string(f.pid);
  switch (rng() % 8) {
    case 0:
      f.message = "connection received: host=10.0.3.17 port=52144";
      break;
    case 1:
      f.message = "connection authorized: user=app database=appdb application_name=worker-17";
      break;
    case 2:
      f.message = "process " + pid + " still waiting for ShareLock on transaction 7412 after " +
                  "1000.123 ms";
      f.detail = "Process holding the lock: 41200. Wait queue: " + pid + ".";
      f.context = "while updating tuple (0,1) in relation \"jobs\"";
      f.statement = "UPDATE jobs SET state = 'taken', taken_at = now()\n WHERE id = 1";
      break;
    case 3:
      f.severity = "ERROR";
      f.sqlstate = "55P03";
      f.message = "canceling statement due to lock timeout";
      f.statement = "ALTER TABLE orders ADD COLUMN note text";
      break;
    case 4:
      f.message =
          "duration: 12.345 ms  statement: SELECT id, payload FROM jobs WHERE state = "
          "'ready' ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED";
      break;
    case 5:
      f.severity = "FATAL";
      f.sqlstate = "57P01";
      f.message = "terminating connection due to administrator command";
      break;
    case 6:
      f.message =
          "disconnection: session time: 0:01:02.003 user=app database=appdb "
          "host=10.0.3.17 port=52144";
      break;
    default:
      f.backend_type = "checkpointer";
      f.message =
          "checkpoint complete: wrote 1234 buffers (7.5%); 0 WAL file(s) added, 0 "
          "removed, 3 recycled; write=26.943 s, sync=0.012 s, total=26.987 s";
      break;
  }
  return f;
}

std::string Render(const Fields& f, LogFormat format) {
  return format == LogFormat::kJsonlog ? ToJson(f) : ToCsv(f);
}

// Appends about `mb` MiB of records to `path`, with one record of `huge_mb` MiB in the middle when
// huge_mb > 0; written through a small buffer, so generating costs no memory.
void Generate(const std::string& path, LogFormat format, size_t mb, size_t huge_mb) {
  std::mt19937 rng(42);
  std::ofstream out(path, std::ios::app | std::ios::binary);
  const size_t total = mb << 20;
  size_t written = 0;
  bool huge_done = huge_mb == 0;
  std::string buffer;
  while (written < total) {
    buffer.clear();
    while (buffer.size() < (1 << 20)) buffer += Render(MakeRecord(rng), format);
    out << buffer;
    written += buffer.size();
    if (!huge_done && written >= total / 2) {
      // A statement logged whole (log_statement = all) of huge_mb MiB.
      out << (format == LogFormat::kJsonlog
                  ? R"({"timestamp":"2024-05-01 12:00:05.123 UTC","pid":40001,)"
                    R"("error_severity":"LOG","state_code":"00000","message":"statement: SELECT ')"
                  : "2024-05-01 12:00:05.123 UTC,\"app\",\"appdb\",40001,,66322eb0.9c41,1,"
                    "\"SELECT\",2024-05-01 11:59:44 UTC,5/27,0,LOG,00000,\"statement: SELECT '");
      const std::string piece(1 << 20, 'x');
      for (size_t i = 0; i < huge_mb; ++i) out << piece;
      out << (format == LogFormat::kJsonlog ? "'\"}\n"
                                            : "'\",,,,,,,,,\"psql\",\"client backend\",,0\n");
      written += huge_mb << 20;
      huge_done = true;
    }
  }
}

struct ReadResult {
  double seconds = 0;
  uint64_t bytes = 0;
  LogFollowerStats stats;
  size_t ends = 0;
};

// Follows `dir` from the start of `file` (created empty, positioned, then generated) to its end.
ReadResult ReadAll(const std::string& dir, const std::string& file, LogFormat format, size_t mb,
                   size_t huge_mb) {
  std::ofstream(dir + "/" + file).close();
  LogFollower follower(MakeFileLogSource(dir, format), format);
  SessionEndFacts facts;
  const auto on_record = [&](const LogRecord& r) { facts.Add(r); };
  if (Status s = follower.Poll(on_record); !s.ok())
    std::fprintf(stderr, "%s\n", s.message().c_str());
  Generate(dir + "/" + file, format, mb, huge_mb);
  const uint64_t size = std::filesystem::file_size(dir + "/" + file);
  ReadResult result;
  const auto start = std::chrono::steady_clock::now();
  while (follower.stats().bytes_read < size) {
    if (Status s = follower.Poll(on_record); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      break;
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.bytes = follower.stats().bytes_read;
  result.stats = follower.stats();
  result.ends = facts.size();
  std::filesystem::remove(dir + "/" + file);
  return result;
}

// A line of /proc/self/status ("VmHWM", "VmRSS") in KiB.
long StatusKib(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) == 0)
      return std::strtol(line.c_str() + std::strlen(key) + 1, nullptr, 10);
  }
  return -1;
}

// Resets VmHWM to the current resident size (Linux 4.0+).
void ResetPeak() { std::ofstream("/proc/self/clear_refs") << "5"; }

bool ParseFlag(const char* arg, const char* name, size_t* out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *out = std::strtoull(arg + n + 1, nullptr, 10);
  return true;
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    if (ParseFlag(argv[i], "--mb", &flags.mb) || ParseFlag(argv[i], "--big-mb", &flags.big_mb) ||
        ParseFlag(argv[i], "--big-record-mb", &flags.big_record_mb)) {
      continue;
    }
    if (std::strncmp(argv[i], "--dir=", 6) == 0) {
      flags.dir = argv[i] + 6;
      continue;
    }
    std::fprintf(stderr, "usage: %s [--mb=N] [--big-mb=N] [--big-record-mb=N] [--dir=PATH]\n",
                 argv[0]);
    return 2;
  }
  std::string pattern = flags.dir + "/log_reader_bench.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = pattern;
  std::printf("%-8s %8s %8s %9s %10s %9s %6s\n", "format", "MiB", "seconds", "MiB/s", "records",
              "unparsed", "ends");
  for (LogFormat format : {LogFormat::kJsonlog, LogFormat::kCsvlog}) {
    const char* file = format == LogFormat::kJsonlog ? "bench.json" : "bench.csv";
    const ReadResult r = ReadAll(dir, file, format, flags.mb, 0);
    std::printf("%-8s %8.1f %8.3f %9.1f %10llu %9llu %6zu\n", LogFormatName(format),
                r.bytes / 1048576.0, r.seconds, r.bytes / 1048576.0 / r.seconds,
                static_cast<unsigned long long>(r.stats.records),
                static_cast<unsigned long long>(r.stats.unparsed), r.ends);
  }
  for (LogFormat format : {LogFormat::kJsonlog, LogFormat::kCsvlog}) {
    if (flags.big_mb == 0) break;
    const char* file = format == LogFormat::kJsonlog ? "big.json" : "big.csv";
    ResetPeak();
    const long rss_before = StatusKib("VmRSS:");
    const ReadResult r = ReadAll(dir, file, format, flags.big_mb, flags.big_record_mb);
    std::printf(
        "%s: read %.1f MiB holding one %zu MiB record in %.2f s (%.1f MiB/s), "
        "unparsed %llu; VmRSS before %ld KiB, peak (VmHWM) %ld KiB\n",
        LogFormatName(format), r.bytes / 1048576.0, flags.big_record_mb, r.seconds,
        r.bytes / 1048576.0 / r.seconds, static_cast<unsigned long long>(r.stats.unparsed),
        rss_before, StatusKib("VmHWM:"));
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace pglock

int main(int argc, char** argv) { return pglock::Main(argc, argv); }
