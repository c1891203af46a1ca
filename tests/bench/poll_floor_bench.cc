// What a full (inventory) poll costs the server next to the floor: the backend CPU per call of
// `SELECT count(*) FROM pg_locks` (the cheapest read that sees every lock), of each statement of
// a full poll exactly as the poller sends it (its prepared statements, EXECUTEd one at a time),
// and of the poll's whole batch, at several numbers of held advisory locks. One throwaway
// PostgreSQL (tests/support/test_postgres.h) with the benchmark's lock table
// (max_connections = 300, max_locks_per_transaction = 1024); half the locks bigint keys, half
// two-int keys, held by two sessions, next to --sessions idle ones. Every case runs --calls times
// per round, the cases one after the other within a round, so that each round's cases share the
// machine's background load; CPU is user+system of the backend (/proc/<pid>/schedstat), medians
// over --rounds with min-max, and ratios to the floor are the medians of each round's ratio. Run as
// root or as a user that may read the backend's /proc entry.
//
//   poll_floor_bench [--locks=300,3000,15000] [--rounds=9] [--calls=20] [--sessions=50]
//                    [--variant=NAME=FILE]... [--binary]
//
// A variant is one statement, prepared and EXECUTEd on the exporter's connection as the poll's
// statements are (text results), to time another way of writing a statement ({holders} in it: the
// holding sessions' pids, an int4[]). --binary also runs
// the inventory statement on a second connection set up the same way, with text and with binary
// results (PQexecParams, resultFormat = 1), next to the floor on that connection. Prints Markdown
// (docs/performance.md).
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "exporter/collectors/registry.h"
#include "exporter/pg/batch.h"
#include "exporter/pg/connection.h"
#include "exporter/pg/session.h"
#include "exporter/queries.h"
#include "tests/support/test_postgres.h"

namespace pglock {
namespace {

constexpr char kFloor[] = "SELECT count(*) FROM pg_locks";

struct Flags {
  std::vector<int> locks = {300, 3000, 15000};
  int rounds = 9;
  int calls = 20;
  int sessions = 50;
  std::vector<std::pair<std::string, std::string>> variants;  // name, SQL
  bool binary = false;
};

SteadyClock::time_point Deadline() { return SteadyClock::now() + std::chrono::seconds(60); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "poll_floor_bench: %s\n", what.c_str());
  std::exit(1);
}

// User+system nanoseconds of process `pid` so far.
long long CpuNs(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  long long ns = 0;
  if (!(in >> ns)) Die("cannot read /proc/" + std::to_string(pid) + "/schedstat");
  return ns;
}

// NAME=FILE -> (NAME, the file's text).
std::pair<std::string, std::string> ReadVariant(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos) Die("a variant is NAME=FILE: " + spec);
  std::ifstream in(spec.substr(eq + 1));
  if (!in) Die("cannot read " + spec.substr(eq + 1));
  std::stringstream text;
  text << in.rdbuf();
  std::string sql = text.str();
  while (!sql.empty() &&
         (std::isspace(static_cast<unsigned char>(sql.back())) || sql.back() == ';')) {
    sql.pop_back();
  }
  return {spec.substr(0, eq), sql};
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* name) -> std::optional<std::string> {
      const std::string prefix = std::string("--") + name + "=";
      if (a.rfind(prefix, 0) != 0) return std::nullopt;
      return a.substr(prefix.size());
    };
    if (auto v = value("locks")) {
      f.locks.clear();
      std::stringstream list(*v);
      for (std::string n; std::getline(list, n, ',');) f.locks.push_back(std::stoi(n));
    } else if (auto v = value("rounds")) {
      f.rounds = std::max(1, std::stoi(*v));
    } else if (auto v = value("calls")) {
      f.calls = std::max(1, std::stoi(*v));
    } else if (auto v = value("sessions")) {
      f.sessions = std::stoi(*v);
    } else if (auto v = value("variant")) {
      f.variants.push_back(ReadVariant(*v));
    } else if (a == "--binary") {
      f.binary = true;
    } else {
      Die("unknown argument " + a + " (see the header of tests/bench/poll_floor_bench.cc)");
    }
  }
  return f;
}

// One thing to time: `run` sends it once; `pid` is the backend that does the work.
struct Case {
  std::string name;
  int pid = 0;
  std::function<void()> run;
  std::vector<double> ms;  // backend CPU per call, one value per round
};

int BackendPid(PgConnection& conn) {
  std::optional<PgResult> r;
  if (Status s = conn.ExecOne("SELECT pg_backend_pid()", {}, Deadline(), &r); !s.ok()) {
    Die(s.message());
  }
  return static_cast<int>(r->Int(0, 0).value_or(0));
}

// A raw libpq connection set up as the exporter's session is, for results in binary.
class BinaryConnection {
 public:
  explicit BinaryConnection(const std::string& dsn) : conn_(PQconnectdb(dsn.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) Die(PQerrorMessage(conn_));
    Simple(std::string(queries::kSessionSetup) + ";\n" + queries::kBackendMemory);
    PGresult* r = PQexec(conn_, "SELECT pg_backend_pid()");
    pid_ = std::atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  ~BinaryConnection() { PQfinish(conn_); }
  BinaryConnection(const BinaryConnection&) = delete;
  BinaryConnection& operator=(const BinaryConnection&) = delete;

  int pid() const { return pid_; }
  void Simple(const std::string& sql) { Drain(PQsendQuery(conn_, sql.c_str())); }
  void Binary(const std::string& sql) {
    Drain(PQsendQueryParams(conn_, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 1));
  }

 private:
  void Drain(int sent) {
    if (sent == 0) Die(PQerrorMessage(conn_));
    while (PGresult* r = PQgetResult(conn_)) {
      if (PQresultStatus(r) == PGRES_FATAL_ERROR) Die(PQresultErrorMessage(r));
      PQclear(r);
    }
  }
  PGconn* conn_;
  int pid_ = 0;
};

// Holds `n` advisory locks: half bigint keys in one session, half two-int keys in the other.
void Hold(testing::TestSession& bigint, testing::TestSession& pairs, int n) {
  bigint.Query("SELECT pg_advisory_unlock_all()");
  pairs.Query("SELECT pg_advisory_unlock_all()");
  bigint.Query("SELECT count(pg_advisory_lock(1000000000 + k)) FROM generate_series(1, " +
               std::to_string(n - n / 2) + ") k");
  pairs.Query("SELECT count(pg_advisory_lock(k, k)) FROM generate_series(1, " +
              std::to_string(n / 2) + ") k");
}

void RunRounds(std::vector<Case>& cases, const Flags& f) {
  for (Case& c : cases) c.ms.clear();
  for (int round = -1; round < f.rounds; ++round) {  // round -1 warms up
    for (Case& c : cases) {
      const long long before = CpuNs(c.pid);
      for (int i = 0; i < f.calls; ++i) c.run();
      const long long after = CpuNs(c.pid);
      if (round >= 0) c.ms.push_back(static_cast<double>(after - before) / 1e6 / f.calls);
    }
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Ms(const Case& c) {
  const auto [lo, hi] = std::minmax_element(c.ms.begin(), c.ms.end());
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3f (%.3f–%.3f)", Median(c.ms), *lo, *hi);
  return buf;
}

// The median over rounds of c's time over base's in the same round: a change of the machine's
// load between rounds moves both.
double RatioOf(const Case& c, const Case& base) {
  std::vector<double> r;
  for (size_t i = 0; i < c.ms.size(); ++i) r.push_back(c.ms[i] / base.ms[i]);
  return Median(r);
}

std::string Ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", r);
  return buf;
}

struct Point {
  int locks = 0;
  double floor = 0, inventory = 0, poll = 0, quiet_inventory = 0, quiet_poll = 0;
  // To the floor, medians of the rounds' ratios.
  double inventory_ratio = 0, poll_ratio = 0, quiet_inventory_ratio = 0, quiet_poll_ratio = 0;
};

int Main(int argc, char** argv) {
  const Flags f = ParseFlags(argc, argv);
  std::string error;
  const auto pg = testing::TestPostgres::Start(
      &error, {"max_connections = 300", "max_locks_per_transaction = 1024"});
  if (!pg) Die(error);
  testing::TestSession bigint(pg->Dsn()), pairs(pg->Dsn());
  // A variant's {holders}: the two holding sessions' pids, an int4[] literal.
  const std::string holders = "'{" + bigint.Query("SELECT pg_backend_pid()") + "," +
                              pairs.Query("SELECT pg_backend_pid()") + "}'::int4[]";
  std::vector<std::unique_ptr<testing::TestSession>> idle;
  for (int i = 0; i < f.sessions; ++i) {
    idle.push_back(std::make_unique<testing::TestSession>(pg->Dsn()));
    idle.back()->Query("SELECT 1");
  }

  std::unique_ptr<PgConnection> conn;
  if (Status s = OpenSession(pg->Dsn(), "", Deadline(), nullptr, &conn); !s.ok()) {
    Die(s.message());
  }
  std::vector<PreparedStatement> prepared;
  for (const Collector* c : Collectors()) {
    for (PreparedStatement& p : c->Prepared(conn->ServerVersionNum())) {
      prepared.push_back(std::move(p));
    }
  }
  if (Status s = PrepareStatements(*conn, prepared, Deadline()); !s.ok()) Die(s.message());
  const int pid = BackendPid(*conn);

  // The full poll as the poller plans it once its connection has read the settings: the
  // settings statement then reads them again only after a reload.
  PollPlan plan;
  plan.server_version_num = conn->ServerVersionNum();
  plan.inventory = true;
  SettingsRead settings_read;
  {
    StatementBatch first;
    for (const Collector* c : Collectors()) c->Plan(plan, &first);
    BatchResults results;
    if (Status s = first.Run(*conn, QueryTimeouts{}, Deadline(), &results); !s.ok()) {
      Die(s.message());
    }
    PollData data;
    for (const Collector* c : Collectors()) {
      if (Status s = c->Parse(plan, results, &data); !s.ok()) Die(s.message());
    }
    settings_read = {data.settings, data.settings_loaded_us};
  }
  plan.settings_read = &settings_read;
  StatementBatch batch;
  for (const Collector* c : Collectors()) c->Plan(plan, &batch);
  const QueryTimeouts timeouts = QueryTimeouts::ForPoll(std::chrono::milliseconds(900));

  const auto exec = [&](std::string sql) {
    return [&conn, sql = std::move(sql)] {
      std::vector<PgResult> results;
      if (Status s = conn->Exec(sql, {}, Deadline(), &results); !s.ok()) Die(s.message());
    };
  };
  std::vector<Case> cases;
  cases.push_back({"floor: " + std::string(kFloor), pid, exec(kFloor), {}});
  std::string inventory_name;
  for (const auto& [name, sql] : batch.Statements()) {
    cases.push_back({name + ": " + sql, pid, exec(sql), {}});
    if (name == "advisory_locks") inventory_name = cases.back().name;
  }
  cases.push_back({"poll timeouts (SET LOCAL)",
                   pid,
                   exec(FillTemplate(queries::kPollTimeouts,
                                     {{"statement_ms", std::to_string(timeouts.statement_ms)},
                                      {"lock_ms", std::to_string(timeouts.lock_ms)}})),
                   {}});
  cases.push_back({"full poll (the batch, one round trip)",
                   pid,
                   [&] {
                     BatchResults results;
                     if (Status s = batch.Run(*conn, timeouts, Deadline(), &results); !s.ok()) {
                       Die(s.message());
                     }
                   },
                   {}});
  const size_t poll_case = cases.size() - 1;
  // The same with the last inventory as the baseline of its quiet holders (PollPlan::
  // quiet_baseline): the two holders stay idle, so the server sums their keys instead of sending
  // them. Rebuilt at each number of locks.
  PollData baseline;
  StatementBatch quiet_batch;
  std::string quiet_sql;
  cases.push_back({"advisory_locks, its idle holders quiet",
                   pid,
                   [&] {
                     std::vector<PgResult> results;
                     if (Status s = conn->Exec(quiet_sql, {}, Deadline(), &results); !s.ok()) {
                       Die(s.message());
                     }
                   },
                   {}});
  const size_t quiet_statement_case = cases.size() - 1;
  cases.push_back({"full poll, its idle holders quiet (one round trip)",
                   pid,
                   [&] {
                     BatchResults results;
                     if (Status s = quiet_batch.Run(*conn, timeouts, Deadline(), &results);
                         !s.ok()) {
                       Die(s.message());
                     }
                   },
                   {}});
  const size_t quiet_poll_case = cases.size() - 1;
  std::vector<PreparedStatement> variants;
  for (const auto& [name, sql] : f.variants) {
    variants.push_back(
        {"variant_" + std::to_string(variants.size()), FillTemplate(sql, {{"holders", holders}})});
    cases.push_back({"variant " + name, pid, exec("EXECUTE " + variants.back().name), {}});
  }
  prepared.insert(prepared.end(), variants.begin(), variants.end());
  if (Status s = PrepareStatements(*conn, prepared, Deadline()); !s.ok()) Die(s.message());
  // The inventory statement on a second connection, with text and with binary results.
  std::unique_ptr<BinaryConnection> binary;
  size_t binary_floor = 0;
  if (f.binary) {
    binary = std::make_unique<BinaryConnection>(pg->Dsn());
    for (const PreparedStatement& p : prepared) {
      if (p.name == "advisory_locks_inventory") binary->Simple("PREPARE inventory AS " + p.sql);
    }
    binary_floor = cases.size();
    cases.push_back(
        {"floor, second connection", binary->pid(), [&] { binary->Simple(kFloor); }, {}});
    cases.push_back({"advisory_locks, text results, second connection",
                     binary->pid(),
                     [&] { binary->Simple("EXECUTE inventory"); },
                     {}});
    cases.push_back({"advisory_locks, binary results, second connection",
                     binary->pid(),
                     [&] { binary->Binary("EXECUTE inventory"); },
                     {}});
  }

  std::vector<Point> points;
  for (const int n : f.locks) {
    Hold(bigint, pairs, n);
    {
      BatchResults results;
      if (Status s = batch.Run(*conn, timeouts, Deadline(), &results); !s.ok()) Die(s.message());
      baseline = PollData{};
      for (const Collector* c : Collectors()) {
        if (Status s = c->Parse(plan, results, &baseline); !s.ok()) Die(s.message());
      }
      PollPlan quiet_plan = plan;
      quiet_plan.quiet_baseline = &baseline;
      quiet_batch = StatementBatch{};
      for (const Collector* c : Collectors()) c->Plan(quiet_plan, &quiet_batch);
      for (const auto& [name, sql] : quiet_batch.Statements()) {
        if (name == "advisory_locks") quiet_sql = sql;
      }
      if (quiet_sql.find("_quiet(") == std::string::npos) Die("no quiet holder: " + quiet_sql);
    }
    RunRounds(cases, f);
    std::printf(
        "\n### %d held advisory locks\n\nbackend CPU ms per call, median (min–max) of %d "
        "rounds of %d calls\n\n| statement | ms | ÷ floor |\n|---|---:|---:|\n",
        n, f.rounds, f.calls);
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& base = cases[binary && i >= binary_floor ? binary_floor : 0];
      std::string name = cases[i].name;
      std::replace(name.begin(), name.end(), '|', '/');
      std::printf("| %s | %s | %s |\n", name.c_str(), Ms(cases[i]).c_str(),
                  Ratio(RatioOf(cases[i], base)).c_str());
    }
    Point p;
    p.locks = n;
    p.floor = Median(cases[0].ms);
    p.poll = Median(cases[poll_case].ms);
    p.poll_ratio = RatioOf(cases[poll_case], cases[0]);
    p.quiet_inventory = Median(cases[quiet_statement_case].ms);
    p.quiet_inventory_ratio = RatioOf(cases[quiet_statement_case], cases[0]);
    p.quiet_poll = Median(cases[quiet_poll_case].ms);
    p.quiet_poll_ratio = RatioOf(cases[quiet_poll_case], cases[0]);
    for (const Case& c : cases) {
      if (c.name != inventory_name) continue;
      p.inventory = Median(c.ms);
      p.inventory_ratio = RatioOf(c, cases[0]);
    }
    points.push_back(p);
    std::fflush(stdout);
  }
  std::printf(
      "\n### Summary\n\nEvery holder read, then the idle holders quiet (the last inventory as "
      "their baseline).\n\n| held locks | floor ms | inventory statement ms | full poll ms | "
      "inventory ÷ floor | full poll ÷ floor | quiet: statement ms | full poll ms | "
      "statement ÷ floor | full poll ÷ floor |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Point& p : points) {
    std::printf("| %d | %.3f | %.3f | %.3f | %s | %s | %.3f | %.3f | %s | %s |\n", p.locks, p.floor,
                p.inventory, p.poll, Ratio(p.inventory_ratio).c_str(), Ratio(p.poll_ratio).c_str(),
                p.quiet_inventory, p.quiet_poll, Ratio(p.quiet_inventory_ratio).c_str(),
                Ratio(p.quiet_poll_ratio).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace pglock

int main(int argc, char** argv) { return pglock::Main(argc, argv); }
