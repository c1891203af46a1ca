#include "exporter/events/event_log.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pglock {
namespace {

Event Of(EventKind kind, int pid, const std::string& lock, double time = 100) {
  Event e;
  e.kind = kind;
  e.time = time;
  e.datname = "app";
  e.lock = lock;
  e.previous.pid = pid;
  e.cause = kind == EventKind::kLockReleased ? CauseOf(HoldEnd::kCleanClose) : EventCause::kNone;
  return e;
}

TEST(CoalesceEvents, ASessionsThousandsOfLocksAreOneEventWithACount) {
  std::vector<Event> events;
  for (int i = 0; i < 6087; ++i)
    events.push_back(Of(EventKind::kLockReleased, 42, std::to_string(i)));
  events.push_back(Of(EventKind::kLockReleased, 43, "other-session"));
  events.push_back(Of(EventKind::kLockLost, 42, "nightly"));
  CoalesceEvents(&events);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].count, 6087);
  EXPECT_EQ(events[0].lock, "0, 1, 2, 3, 4 and 6082 more");
  EXPECT_EQ(events[1].count, 1);
  EXPECT_EQ(events[1].lock, "other-session");
  EXPECT_EQ(events[2].kind, EventKind::kLockLost);
  EXPECT_NE(EventJson(events[0]).find("\"count\":6087"), std::string::npos) << EventJson(events[0]);
  EXPECT_EQ(EventJson(events[1]).find("\"count\""), std::string::npos);
}

TEST(CoalesceEvents, DifferentPollsOrSessionsOrEpisodesStayApart) {
  std::vector<Event> events = {
      Of(EventKind::kLockReleased, 42, "a", 100), Of(EventKind::kLockReleased, 42, "b", 105),
      Of(EventKind::kBlockingEpisode, 42, ""), Of(EventKind::kBlockingEpisode, 42, "")};
  CoalesceEvents(&events);
  EXPECT_EQ(events.size(), 4u);
}

// The events journal's appends: what was added since a sequence number, in the order appended,
// across kinds and chunks, without what the log no longer keeps.
TEST(EventLog, SinceGivesTheKeptEventsAddedAfterASequenceNumber) {
  EventLog log(100);
  uint64_t next = 99;
  EXPECT_TRUE(log.Since(0, &next).empty());
  EXPECT_EQ(next, 0u);
  std::vector<Event> first;
  for (int i = 0; i < 150; ++i) {
    first.push_back(
        Of(i % 3 == 0 ? EventKind::kLockLost : EventKind::kLockReleased, i, std::to_string(i), i));
  }
  log.Append(first);
  uint64_t mark = 0;
  const auto all = log.Since(0, &mark);
  EXPECT_EQ(mark, 150u);
  ASSERT_EQ(all.size(), 150u);
  for (int i = 0; i < 150; ++i) EXPECT_EQ(all[i]->previous.pid, i);
  std::vector<Event> second;
  for (int i = 150; i < 230; ++i) second.push_back(Of(EventKind::kLockReleased, i, "x", i));
  log.Append(second);
  const auto added = log.Since(mark, &next);
  EXPECT_EQ(next, 230u);
  ASSERT_EQ(added.size(), 80u);
  EXPECT_EQ(added.front()->previous.pid, 150);
  EXPECT_EQ(added.back()->previous.pid, 229);
  EXPECT_TRUE(log.Since(next, &next).empty());
  // 100 releases kept of 180: the first 80 are gone; every loss (50) stays. From 0: what the log
  // keeps, in the order of Contents().
  const auto kept = log.Since(0, &next);
  const auto contents = log.Contents();
  ASSERT_EQ(kept.size(), contents->size());
  EXPECT_EQ(kept.size(), 150u);
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i], (*contents)[i]) << i;
  // An event handed out keeps the chunk it is kept in after the log has let the chunk go (the
  // sanitizer build reads freed memory here otherwise).
  std::vector<Event> flood;
  for (int i = 0; i < 500; ++i) flood.push_back(Of(EventKind::kLockLost, 1000 + i, "y", i));
  log.Append(std::move(flood));
  for (const auto& e : log.Since(0, &next)) ASSERT_NE(e->previous.pid, 0);
  EXPECT_EQ(all[0]->previous.pid, 0);
  EXPECT_EQ(all[0]->lock, "0");
}

// A restart's events, read into a log of their own, are taken whole by an empty log (the very
// event objects, numbered as appended) and appended after its own by one that has some.
TEST(EventLog, AdoptTakesAnotherLogsEventsInTheirOrder) {
  EventLog restored(100);
  std::vector<Event> read;
  for (int i = 0; i < 130; ++i) {
    read.push_back(Of(i % 2 == 0 ? EventKind::kLockLost : EventKind::kLockReleased, i, "k", i));
  }
  restored.Append(read);
  uint64_t next = 0;
  const auto before = restored.Since(0, &next);
  ASSERT_EQ(before.size(), 130u);
  EventLog empty(100);
  EXPECT_EQ(empty.Adopt(&restored), 130u);
  const auto adopted = empty.Since(0, &next);
  EXPECT_EQ(next, 130u);
  ASSERT_EQ(adopted.size(), before.size());
  for (size_t i = 0; i < adopted.size(); ++i) EXPECT_EQ(adopted[i], before[i]) << "copied: " << i;
  EXPECT_EQ(empty.Contents()->size(), 130u);
  EXPECT_TRUE(restored.Since(0, &next).empty());
  EXPECT_EQ(next, 0u);
  EXPECT_EQ(restored.Contents()->size(), 0u);

  EventLog busy(100);
  busy.Append({Of(EventKind::kLockLost, 1000, "own", 1000)});
  EventLog more(100);
  more.Append({Of(EventKind::kLockLost, 7, "k", 7), Of(EventKind::kLockLost, 8, "k", 8)});
  EXPECT_EQ(busy.Adopt(&more), 2u);
  const auto all = busy.Since(0, &next);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->previous.pid, 1000);
  EXPECT_EQ(all[1]->previous.pid, 7);
  EXPECT_EQ(all[2]->previous.pid, 8);
  EXPECT_EQ(next, 3u);
  EXPECT_TRUE(more.Since(0, &next).empty());
}

TEST(EventLog, AFloodOfRoutineEventsKeepsTheLossesBeforeIt) {
  EventLog log(10);
  log.Append(
      {Of(EventKind::kLockLost, 1, "nightly", 1), Of(EventKind::kBlockingEpisode, 1, "", 2)});
  std::vector<Event> flood;
  for (int i = 0; i < 1000; ++i)
    flood.push_back(Of(EventKind::kLockReleased, 2, std::to_string(i), 3));
  log.Append(std::move(flood));
  const auto contents = log.Contents();
  ASSERT_EQ(contents->size(), 12u);  // 10 releases, the loss, the episode
  EXPECT_EQ((*contents)[0]->kind, EventKind::kLockLost);
  EXPECT_EQ((*contents)[1]->kind, EventKind::kBlockingEpisode);
  EXPECT_EQ((*contents)[2]->lock, "990");  // the newest ten releases, oldest first
  EXPECT_EQ(contents->newest()->lock, "999");
}

// The lock names of a list, oldest first.
std::vector<std::string> Names(const EventList& list) {
  std::vector<std::string> out;
  for (const auto& e : list) out.push_back(e->lock);
  return out;
}

// Against a plain model (the last `capacity` of each kind, in the order appended), over appends
// of every size across the chunks' edges: each published list has what the model had then, and
// keeps it while later appends evict its events and drop its chunks.
TEST(EventLog, ListsMatchTheLastEventsOfEachKindAndOutliveLaterAppends) {
  for (const size_t capacity : {size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{63},
                                size_t{64}, size_t{65}, size_t{150}}) {
    EventLog log(capacity);
    std::vector<std::pair<EventKind, std::string>> appended;
    std::vector<std::pair<std::shared_ptr<const EventList>, std::vector<std::string>>> published;
    const EventKind kinds[] = {EventKind::kLockReleased, EventKind::kLockReleased,
                               EventKind::kLockHandover, EventKind::kLockLost};
    int n = 0;
    for (int round = 0; round < 60; ++round) {
      std::vector<Event> batch;
      for (int i = 0; i < (round * 7) % 23; ++i, ++n) {
        const EventKind kind = kinds[(n * 5 + round) % 4];
        batch.push_back(Of(kind, 1, std::to_string(n), n));
        appended.emplace_back(kind, std::to_string(n));
      }
      log.Append(std::move(batch));
      std::map<EventKind, size_t> left;
      std::vector<std::string> model;
      for (auto it = appended.rbegin(); it != appended.rend(); ++it) {
        if (left[it->first]++ < capacity) model.insert(model.begin(), it->second);
      }
      const auto contents = log.Contents();
      ASSERT_EQ(Names(*contents), model) << "capacity " << capacity << ", round " << round;
      ASSERT_EQ(contents->size(), model.size());
      if (!model.empty()) {
        EXPECT_EQ(contents->newest()->lock, model.back());
      }
      published.emplace_back(contents, model);
    }
    for (const auto& [list, model] : published) EXPECT_EQ(Names(*list), model);
  }
}

TEST(EventLog, AListIsTheSameObjectUntilSomethingIsAdded) {
  EventLog log(5);
  const auto empty = log.Contents();
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(empty->newest(), nullptr);
  log.Append({});
  EXPECT_EQ(log.Contents(), empty);
  log.Append({Of(EventKind::kLockLost, 1, "a")});
  const auto one = log.Contents();
  EXPECT_NE(one, empty);
  EXPECT_EQ(log.Contents(), one);
}

TEST(EventList, OfKeepsTheGivenOrderAcrossChunks) {
  std::vector<std::shared_ptr<const Event>> events;
  for (int i = 0; i < 150; ++i) {
    events.push_back(std::make_shared<const Event>(Of(EventKind::kLockLost, 1, std::to_string(i))));
  }
  const auto list = EventList::Of(std::move(events));
  ASSERT_EQ(list->size(), 150u);
  EXPECT_EQ((*list)[0]->lock, "0");
  EXPECT_EQ((*list)[149]->lock, "149");
  EXPECT_EQ(list->newest()->lock, "149");
}

// A party keeps the five texts of a session as one: each comes back as it was, empty ones and
// any bytes included, and parties of the same description share their storage.
TEST(EventParty, KeepsASessionsTextsAsOneSharedText) {
  const Identity full{.pid = 42,
                      .application_name = "billing-worker",
                      .client_addr = "10.0.0.7",
                      .usename = std::string("us\0er", 6),
                      .state = "idle in transaction",
                      .query = std::string(2000, 'q')};
  const EventParty party(full);
  EXPECT_EQ(party.pid, 42);
  EXPECT_EQ(party.application_name(), "billing-worker");
  EXPECT_EQ(party.client_addr(), "10.0.0.7");
  EXPECT_EQ(party.usename(), std::string("us\0er", 6));
  EXPECT_EQ(party.state(), "idle in transaction");
  EXPECT_EQ(party.query(), full.query);
  const Identity back = party;
  EXPECT_EQ(back.pid, full.pid);
  EXPECT_EQ(back.application_name, full.application_name);
  EXPECT_EQ(back.usename, full.usename);
  EXPECT_EQ(back.query, full.query);

  const EventParty only_state(Identity{7, "", "", "", "active", ""});
  EXPECT_EQ(only_state.application_name(), "");
  EXPECT_EQ(only_state.state(), "active");
  EXPECT_EQ(only_state.query(), "");
  const EventParty none(Identity{9, "", "", "", "", ""});
  EXPECT_EQ(none.pid, 9);
  EXPECT_EQ(none.application_name(), "");
  EXPECT_EQ(none.query(), "");

  const size_t distinct = SharedText::Distinct();
  std::vector<EventParty> pool;
  for (int pid = 100; pid < 200; ++pid) {
    Identity id = full;
    id.pid = pid;
    pool.emplace_back(id);
  }
  EXPECT_EQ(SharedText::Distinct(), distinct);  // the same description as `party`
  EXPECT_EQ(pool.back().pid, 199);
  EXPECT_EQ(pool.back().query(), full.query);
}

// At its bound (every kind full, as an hour of busy traffic leaves it) the log's events cost
// their numbers and one pointer per text: the texts that recur across events (the target, the
// database, the lock, a session's application, address, user and state, a holder) are kept once,
// and the events are kept in place in their chunks.
TEST(EventLog, AtItsBoundEachRecurringTextIsKeptOnce) {
  constexpr int kCapacity = 1000;
  constexpr int kKinds = static_cast<int>(EventKind::kLockTimeout) + 1;
  const size_t heap_before = mallinfo2().uordblks;
  size_t kept = 0;
  {
    EventLog log(kCapacity);
    for (int poll = 0; poll < kCapacity + 200; ++poll) {
      std::vector<Event> events;
      for (int k = 0; k < kKinds; ++k) {
        Event e;
        e.time = 1.7e9 + poll;
        e.target = "orders-primary-eu-west-1";
        e.kind = static_cast<EventKind>(k);
        e.datname = "orders_production";
        e.lock = "billing-run-" + std::to_string(poll % 20);
        e.previous = Identity{1000 + poll,           "billing-worker (sidekiq 7.1.2)",
                              "10.12.140.27",        "orders_application",
                              "idle in transaction", ""};
        e.current = Identity{2000 + poll,    "billing-worker (sidekiq 7.1.2)",
                             "10.12.140.28", "orders_application",
                             "active",       ""};
        e.previous_holder = "billing-7d9f8c6b5-x2x9q:4182";
        events.push_back(std::move(e));
      }
      log.Append(std::move(events));
    }
    const auto contents = log.Contents();
    kept = contents->size();
    ASSERT_EQ(kept, static_cast<size_t>(kCapacity * kKinds));
    // The heap in use, as glibc counts it (0 under AddressSanitizer, whose allocator it does
    // not see).
    const size_t heap_after = mallinfo2().uordblks;
    const double per_event =
        heap_after > heap_before ? static_cast<double>(heap_after - heap_before) / kept : 0;
    std::printf("%zu events at the bound: %.0f bytes of heap each, %.1f MB\n", kept, per_event,
                per_event * kept / 1e6);
    // Each text as a std::string of its own: about 1,100 bytes an event with these texts; each
    // event a block of its own beside its chunk's slot: 301. In place in their chunks: 264; with
    // a session's five texts as one, in chunks of 32: 200.
    EXPECT_LT(per_event, 230);
  }
}

}  // namespace
}  // namespace pglock
