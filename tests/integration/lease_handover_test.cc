// Lease hand-overs against overlaps on a real PostgreSQL, polled every second as in production:
// the leases table's own protocol (take with the upsert, work, give back with DELETE, the
// next round taking at once) must never count an overlap, alone or with two competing takers; a
// holder changed under a valid lease must. Each test prints its counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "exporter/events/events.h"
#include "exporter/poll/poller.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pg_environment.h"
#include "tests/support/test_poll.h"

namespace pglock {
namespace {

using testing::Pg;
using testing::Sample;
using testing::SumPresent;
using testing::TestSession;
using Clock = std::chrono::steady_clock;

// The leases table's statements (take, renew, give back); $1 name, $2 holder, $3 seconds.
constexpr char kTake[] =
    "INSERT INTO leases (name, holder, taken_at, expires_at) "
    "VALUES ($1, $2, now(), now() + make_interval(secs => $3)) "
    "ON CONFLICT (name) DO UPDATE "
    "SET holder = excluded.holder, taken_at = excluded.taken_at, expires_at = excluded.expires_at "
    "WHERE leases.expires_at < now() "
    "RETURNING true";
constexpr char kRenew[] =
    "UPDATE leases SET expires_at = now() + make_interval(secs => $3) "
    "WHERE name = $1 AND holder = $2";
constexpr char kGiveBack[] = "DELETE FROM leases WHERE name = $1 AND holder = $2";
// The other way some protocols give a lease back.
constexpr char kGiveBackByExpiry[] =
    "UPDATE leases SET expires_at = now() WHERE name = $1 AND holder = $2";

// `sql` with $1, $2, $3 replaced by the lease name, the holder (quoted) and the seconds.
std::string Bind(const char* sql, const std::string& holder, int secs = 120) {
  std::string out;
  for (const char* p = sql; *p != '\0'; ++p) {
    if (p[0] == '$' && p[1] >= '1' && p[1] <= '3') {
      out += p[1] == '1' ? "'sweep'" : p[1] == '2' ? "'" + holder + "'" : std::to_string(secs);
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

// "host:pid:64 random bits", new for every call, as the applications do.
std::string NewHolder(const std::string& host) {
  static std::mt19937_64 rng{std::random_device{}()};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  char bits[17];
  std::snprintf(bits, sizeof bits, "%016llx", static_cast<unsigned long long>(rng()));
  return host + ":" + std::to_string(getpid()) + ":" + bits;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class Cycle;

// The fixture's polls, counted for the workers: a worker keeps its lease until a poll that began
// after its take has ended, so that every holder is read at least once however slow a poll is (a
// sanitizer build on a loaded machine took more than the 0.5 s between a 1.5 s hold and a 1 s
// poll interval, and a holder no poll read is a hand-over no one could count).
struct PollCount {
  std::atomic<int> begun{0};
  std::atomic<int> ended{0};
};

// One lease table, polled every second by a poller in the test's thread.
class LeaseHandover : public ::testing::Test {
 protected:
  void SetUp() override {
    Pg().Exec("DROP TABLE IF EXISTS leases");
    Pg().Exec(
        "CREATE TABLE leases (name text PRIMARY KEY, holder text NOT NULL, "
        "taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)");
    TargetConfig t;
    t.name = "lh";
    t.dsn = Pg().Dsn();
    LeaseTableConfig lease;
    lease.table = lease.relation = "leases";
    t.leases = {lease};
    poller_ = std::make_unique<Poller>(t, testing::TestPoll());
    Poll();
  }

  // Polls once, at least a second after the previous poll; returns the scraped samples.
  std::vector<Sample> Poll() {
    std::this_thread::sleep_until(next_poll_);
    next_poll_ = Clock::now() + std::chrono::seconds(1);
    ++polls_.begun;
    poller_->PollOnceForTest();
    ++polls_.ended;
    samples_ = testing::ParseSamples(testing::Serialize({poller_->Latest()}));
    return samples_;
  }

  // Runs each worker on a thread of its own and polls until all have ended: the workers wait
  // for polls until their last give-back.
  void PollWhileWorking(std::vector<std::function<void()>> workers) {
    std::atomic<size_t> done{0};
    std::vector<std::thread> threads;
    for (auto& work : workers) {
      threads.emplace_back([&done, work = std::move(work)] {
        work();
        ++done;
      });
    }
    while (done < threads.size()) Poll();
    for (std::thread& t : threads) t.join();
  }

  // Keeps polling until every pending holder change has been judged.
  void Settle() {
    const auto until = Clock::now() + std::chrono::duration<double>(kLeaseWritesDelaySeconds + 2);
    while (Clock::now() < until) Poll();
  }

  // nullopt when the series is missing: the exporter starts every kind at 0 once it has read
  // the lease, so an expected 0 is not met by a series that is gone.
  std::optional<double> Kind(const char* kind) const {
    return SumPresent(samples_, "pglock_lease_transitions_total",
                      {{"lease", "sweep"}, {"kind", kind}});
  }

  void Report(const std::string& scenario, int rounds) const {
    std::string counts;
    for (const char* kind :
         {"acquired", "released", "renewed", "handover", "expired_takeover", "overlap"}) {
      counts += std::string(" ") + kind + "=" + ::testing::PrintToString(Kind(kind));
    }
    std::printf("[counts] %s: rounds=%d%s\n", scenario.c_str(), rounds, counts.c_str());
  }

  void ExpectOnlyHandovers(const std::string& scenario, const Cycle& cycle);

  PollCount polls_;
  std::unique_ptr<Poller> poller_;
  Clock::time_point next_poll_ = Clock::now();
  std::vector<Sample> samples_;
};

constexpr int kRounds = 20;

// The leases table's cycle: take, 1.5 s of work, give back; the next round takes within 100 ms. One
// worker on a pool of two connections, or two workers competing for every round.
class Cycle {
 public:
  Cycle(const char* give_back, const PollCount& polls) : give_back_(give_back), polls_(polls) {}

  // One worker: every round takes the lease at once.
  void RunAlone(int rounds) {
    TestSession pool[2] = {TestSession(Pg().Dsn()), TestSession(Pg().Dsn())};
    for (int i = 0; i < rounds; ++i) {
      TestSession& conn = pool[i % 2];
      const std::string holder = NewHolder("host-a");
      EXPECT_EQ(conn.Query(Bind(kTake, holder)), "t") << "round " << i;
      const int seen_after = Taken();
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      AwaitPoll(seen_after);
      conn.Query(Bind(give_back_, holder));
      Released();
    }
  }

  // One of two competing workers: retries every 20 ms, renews once in the middle of its work.
  void RunCompeting(const std::string& host, int rounds) {
    TestSession conn(Pg().Dsn());
    while (taken_ < rounds) {
      const std::string holder = NewHolder(host);
      if (conn.Query(Bind(kTake, holder)) != "t") {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      const int seen_after = Taken();
      std::this_thread::sleep_for(std::chrono::milliseconds(750));
      conn.Query(Bind(kRenew, holder));
      std::this_thread::sleep_for(std::chrono::milliseconds(750));
      AwaitPoll(seen_after);
      conn.Query(Bind(give_back_, holder));
      Released();
    }
  }

  int taken() const { return taken_; }
  double longest_gap() const { return longest_gap_; }

 private:
  // Counts a take; returns the number of polls begun by then.
  int Taken() {
    std::lock_guard<std::mutex> lock(mu_);
    ++taken_;
    if (released_at_) longest_gap_ = std::max(longest_gap_, Seconds(Clock::now() - *released_at_));
    released_at_.reset();
    return polls_.begun;
  }
  // Waits until a poll begun after the take (the one after `begun_at_take`) has ended.
  void AwaitPoll(int begun_at_take) const {
    while (polls_.ended <= begun_at_take) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  void Released() {
    std::lock_guard<std::mutex> lock(mu_);
    released_at_ = Clock::now();
  }

  const char* const give_back_;
  const PollCount& polls_;
  std::mutex mu_;
  std::atomic<int> taken_{0};
  std::optional<Clock::time_point> released_at_;
  double longest_gap_ = 0;  // from a give-back to the next take
};

// After a cycle of DELETE give-backs: once every pending change is judged, no overlap and no
// expired takeover; every round after the first is a hand-over, or a release and an acquire when
// a poll fell between the DELETE and the next take (the last DELETE is a release).
void LeaseHandover::ExpectOnlyHandovers(const std::string& scenario, const Cycle& cycle) {
  Settle();
  Report(scenario, cycle.taken());
  std::printf("[gap] longest give-back -> take: %.3f s\n", cycle.longest_gap());
  // Each take follows its give-back at once, as a round trip allows; on a loaded machine (1.5 s
  // once, under the sanitizers) a poll may fall in the gap, and the round is then a release and an
  // acquire, which the count below accepts: the gap is reported, not bounded.
  EXPECT_EQ(Kind("overlap"), 0);
  EXPECT_EQ(Kind("expired_takeover"), 0);
  EXPECT_GE(Kind("handover"), 1);
  EXPECT_EQ(Kind("handover").value_or(0) + Kind("released").value_or(0), cycle.taken());
}

TEST_F(LeaseHandover, DeleteGiveBackCycleIsHandedOverNeverOverlapped) {
  Cycle cycle(kGiveBack, polls_);
  PollWhileWorking({[&] { cycle.RunAlone(kRounds); }});
  ExpectOnlyHandovers("DELETE give-back cycle, one worker", cycle);
}

TEST_F(LeaseHandover, DeleteGiveBackCycleWithTwoCompetingTakers) {
  Cycle cycle(kGiveBack, polls_);
  PollWhileWorking({[&] { cycle.RunCompeting("host-a", kRounds); },
                    [&] { cycle.RunCompeting("host-b", kRounds); }});
  ExpectOnlyHandovers("DELETE give-back cycle, two competing takers", cycle);
}

TEST_F(LeaseHandover, GivenBackByMovingTheExpiryToThePast) {
  constexpr int kExpiryRounds = 12;
  Cycle cycle(kGiveBackByExpiry, polls_);
  PollWhileWorking({[&] { cycle.RunAlone(kExpiryRounds); }});
  Settle();
  Report("give-back by expiry, one worker", cycle.taken());
  EXPECT_EQ(Kind("overlap"), 0);
  EXPECT_EQ(Kind("expired_takeover"), 0);
  // Every round after the first takes a lease its predecessor gave back.
  EXPECT_EQ(Kind("handover"), kExpiryRounds - 1);
}

TEST_F(LeaseHandover, HolderChangedByAPlainUpdateIsAnOverlapWithinTwoPolls) {
  TestSession worker(Pg().Dsn());
  EXPECT_EQ(worker.Query(Bind(kTake, NewHolder("host-a"))), "t");
  Poll();
  Pg().Exec("UPDATE leases SET holder = 'hand-edited' WHERE name = 'sweep'");
  const auto changed = Clock::now();
  for (int polls = 0; polls < 2 && Kind("overlap").value_or(0) == 0; ++polls) Poll();
  std::printf("[delay] plain UPDATE SET holder -> overlap counted: %.2f s\n",
              Seconds(Clock::now() - changed));
  Report("plain UPDATE SET holder", 1);
  EXPECT_EQ(Kind("overlap"), 1);
  EXPECT_EQ(Kind("handover"), 0);
}

TEST_F(LeaseHandover, TakeWithoutTheExpiryGuardIsAnOverlapOnceTheCountersAreIn) {
  TestSession worker(Pg().Dsn());
  EXPECT_EQ(worker.Query(Bind(kTake, NewHolder("host-a"))), "t");
  Poll();
  // The take upsert without its `WHERE leases.expires_at < now()`: takes a valid lease.
  std::string unguarded = Bind(kTake, NewHolder("host-b"));
  const std::string guard = "WHERE leases.expires_at < now() ";
  unguarded.erase(unguarded.find(guard), guard.size());
  TestSession intruder(Pg().Dsn());
  EXPECT_EQ(intruder.Query(unguarded), "t");
  const auto changed = Clock::now();
  const auto limit = changed + std::chrono::duration<double>(kLeaseWritesDelaySeconds + 3);
  while (Kind("overlap").value_or(0) == 0 && Clock::now() < limit) Poll();
  std::printf("[delay] unguarded upsert -> overlap counted: %.2f s\n",
              Seconds(Clock::now() - changed));
  Report("unguarded upsert", 1);
  EXPECT_EQ(Kind("overlap"), 1);
  EXPECT_EQ(Kind("handover"), 0);
}

TEST_F(LeaseHandover, LeaseNotRenewedPastItsExpiryThenTakenIsAnExpiredTakeover) {
  TestSession crashed(Pg().Dsn());
  EXPECT_EQ(crashed.Query(Bind(kTake, NewHolder("host-a"), 2)), "t");
  Poll();
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  Poll();
  TestSession next(Pg().Dsn());
  EXPECT_EQ(next.Query(Bind(kTake, NewHolder("host-b"))), "t");
  Poll();
  Settle();
  Report("expired then taken", 1);
  EXPECT_EQ(Kind("expired_takeover"), 1);
  EXPECT_EQ(Kind("overlap"), 0);
  EXPECT_EQ(Kind("handover"), 0);
}

}  // namespace
}  // namespace pglock
