#include "exporter/events/event_log.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(contents->back()->lock, "999");
}

}  // namespace
}  // namespace pglock
