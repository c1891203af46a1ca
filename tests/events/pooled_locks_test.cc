// The pooled-lock state machine (exporter/events/pooled_locks.h) on hand-made polls: which
// evidence proves a session lock, and which transitions count an inheritance.
#include "exporter/events/pooled_locks.h"

#include <gtest/gtest.h>

namespace pglock {
namespace {

constexpr double kStart = 1.7e9;
const AdvisoryKey kKey{16384, 0, 42, 1};

// One poll of one server connection (pid 100) of pool app/alice in PgBouncer "pgb": `app` is the
// client's application_name, `xact_start` its transaction (nullopt: none), `proof` whether the lock
// read saw the key held while the connection stayed idle across it.
PollData Poll(double now, const std::string& app, std::optional<double> xact_start, bool held,
              bool proof, bool inventory = true) {
  PollData d;
  d.now = now;
  d.inventory = inventory;
  Session s;
  s.pid = 100;
  s.backend_start = kStart;
  s.application_name = app;
  s.state = xact_start ? "active" : "idle";
  s.xact_start = xact_start;
  d.sessions = {s};
  if (held) {
    AdvisoryLock l;
    l.pid = 100;
    l.key = kKey;
    l.outside_transaction = proof;
    d.locks = {l};
  }
  PoolerData p;
  p.name = "pgb";
  p.ok = true;
  p.servers = {{"app", "alice", 100, ""}};
  d.poolers = {p};
  return d;
}

double Inherited(const Counters& c) { return c.pooled_inherited.at({"pgb", "app", "alice"}); }

bool Proven(const PooledLockTracker& t) {
  const auto locks = t.Locks();
  return locks.size() == 1 && locks[0]->state == PooledLockState::kSessionLock;
}

// A hot key re-taken by each transaction on the connection: held at every poll, each time in
// another transaction of another client. Without the proof it stays a candidate: no inheritance.
TEST(PooledLocks, HotTransactionLockInEveryTransactionIsNeverProven) {
  PooledLockTracker t;
  Counters c;
  std::vector<Event> events;
  const std::vector<std::string> clients = {"a", "b", "a", "c", "b"};
  for (size_t i = 0; i < clients.size(); ++i) {
    const double now = kStart + 10 + static_cast<double>(i);
    t.Observe(Poll(now, clients[i], now - 0.05, true, false), nullptr, &c, &events);
  }
  EXPECT_FALSE(Proven(t));
  EXPECT_EQ(Inherited(c), 0);
  EXPECT_TRUE(events.empty());
}

// Idle at the activity read but not across the lock read (it began a transaction in between):
// the state alone proves nothing.
TEST(PooledLocks, IdleAtTheActivityReadAloneIsNoProof) {
  PooledLockTracker t;
  Counters c;
  t.Observe(Poll(kStart + 10, "a", std::nullopt, true, false), nullptr, &c);
  t.Observe(Poll(kStart + 11, "b", std::nullopt, true, false), nullptr, &c);
  EXPECT_FALSE(Proven(t));
  EXPECT_EQ(Inherited(c), 0);
}

// candidate -> session lock (proof) -> inherited (another client while held) -> gone (released).
TEST(PooledLocks, ProvenLockServingAnotherClientIsInheritedUntilReleased) {
  PooledLockTracker t;
  Counters c;
  std::vector<Event> events;
  t.Observe(Poll(kStart + 10, "leaker", std::nullopt, true, true), nullptr, &c, &events);
  EXPECT_TRUE(Proven(t));
  // Traffic of the same client in a transaction: still proven, nothing inherited.
  t.Observe(Poll(kStart + 11, "leaker", kStart + 10.9, true, false), nullptr, &c, &events);
  EXPECT_TRUE(Proven(t));
  EXPECT_EQ(Inherited(c), 0);
  t.Observe(Poll(kStart + 12, "heir", kStart + 11.9, true, false), nullptr, &c, &events);
  EXPECT_EQ(Inherited(c), 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kPooledLockInherited);
  EXPECT_EQ(events[0].previous_holder, "leaker");
  EXPECT_EQ(events[0].current_holder, "heir");
  t.Observe(Poll(kStart + 13, "heir", std::nullopt, false, false), nullptr, &c, &events);
  EXPECT_TRUE(t.Locks().empty());
}

// A tiered poll carries the last inventory's locks, proof included: it judges nothing, or a lock
// released since that inventory would be inherited by the connection's next client.
// After a restart of the exporter: a lock proven before it stays proven, and counted, at the
// first poll although that poll cannot prove it (the connection is in a transaction); one saved
// for another backend (pid reused) is not taken for it.
TEST(PooledLocks, ARestoredProofNeedsNoNewProof) {
  PooledLockTracker before;
  Counters c;
  before.Observe(Poll(kStart + 10, "a", std::nullopt, true, true), nullptr, &c);
  ASSERT_TRUE(Proven(before));
  std::vector<PooledLock> saved;
  for (const PooledLock* l : before.Locks()) saved.push_back(*l);

  PooledLockTracker after;
  after.Restore(saved);
  after.Observe(Poll(kStart + 60, "a", kStart + 59.9, true, false), nullptr, &c);
  EXPECT_TRUE(Proven(after));

  PooledLockTracker reused;
  saved[0].backend_start = kStart - 100;  // the same pid, an earlier backend
  reused.Restore(saved);
  reused.Observe(Poll(kStart + 60, "a", kStart + 59.9, true, false), nullptr, &c);
  ASSERT_EQ(reused.Locks().size(), 1u);
  EXPECT_EQ(reused.Locks()[0]->state, PooledLockState::kCandidate);
}

TEST(PooledLocks, TieredPollJudgesNothing) {
  PooledLockTracker t;
  Counters c;
  t.Observe(Poll(kStart + 10, "leaker", std::nullopt, true, true), nullptr, &c);
  ASSERT_TRUE(Proven(t));
  t.Observe(Poll(kStart + 11, "other", kStart + 10.9, true, true, /*inventory=*/false), nullptr,
            &c);
  EXPECT_EQ(Inherited(c), 0);
  t.Observe(Poll(kStart + 12, "other", std::nullopt, false, false), nullptr, &c);
  EXPECT_TRUE(t.Locks().empty());
  EXPECT_EQ(Inherited(c), 0);
}

}  // namespace
}  // namespace pglock
