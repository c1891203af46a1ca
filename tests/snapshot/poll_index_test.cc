// The poll's look-ups: a session by pid, a database's name by datid (a session's own name over
// pg_stat_database's, the last given of either; a datid nobody names is its number); and the index
// a complete poll keeps: shared by every look-up of that poll, moved with it, never copied.
#include "exporter/snapshot/poll_index.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>

namespace pglock {
namespace {

Session SessionOf(int pid, uint32_t datid, std::string datname) {
  Session s;
  s.pid = pid;
  s.datid = datid;
  s.datname = std::move(datname);
  return s;
}

TEST(PollIndexTest, FindsSessionsByPidAndNamesDatabases) {
  PollData data;
  data.database_stats = std::vector<DatabaseStats>{{5, "stats_five"}, {7, "seven"}, {9, "nine"}};
  data.sessions = {SessionOf(300, 5, "five"), SessionOf(100, 7, ""), SessionOf(200, 11, "eleven"),
                   SessionOf(100, 9, "nine_again")};
  const PollIndex index(data);
  ASSERT_NE(index.Find(300), nullptr);
  EXPECT_EQ(index.Find(300)->datname, "five");
  EXPECT_EQ(index.Find(200), &data.sessions[2]);
  EXPECT_EQ(index.Find(100), &data.sessions[3]);  // the last session given with that pid
  EXPECT_EQ(index.Find(400), nullptr);
  EXPECT_EQ(index.Datname(5), "five");        // a session's name over the statistics'
  EXPECT_EQ(index.Datname(7), "seven");       // a session without one leaves the statistics'
  EXPECT_EQ(index.Datname(9), "nine_again");  // the last given
  EXPECT_EQ(index.Datname(11), "eleven");     // named by a session only
  EXPECT_EQ(index.Datname(13), "13");         // named by nobody
}

TEST(PollIndexTest, AnEmptyPollFindsNothing) {
  const PollData data;
  const PollIndex index(data);
  EXPECT_EQ(index.Find(1), nullptr);
  EXPECT_EQ(index.Datname(1), "1");
}

TEST(PollIndexTest, AnIndexedPollSharesItsIndexAndACopyBuildsItsOwn) {
  PollData data;
  data.sessions = {SessionOf(100, 5, "five"), SessionOf(200, 7, "seven")};
  std::optional<PollIndex> built;
  EXPECT_EQ(&IndexOf(data, &built), &*built);  // not indexed: one built for the caller

  IndexPoll(&data);
  ASSERT_NE(data.index.get(), nullptr);
  std::optional<PollIndex> unused;
  EXPECT_EQ(&IndexOf(data, &unused), data.index.get());  // the poll's own, every time
  EXPECT_FALSE(unused.has_value());

  // A copy's sessions are elsewhere: it starts without an index, and one built finds its own.
  PollData copy = data;
  EXPECT_EQ(copy.index.get(), nullptr);
  std::optional<PollIndex> for_copy;
  EXPECT_EQ(IndexOf(copy, &for_copy).Find(200), &copy.sessions[1]);
  IndexPoll(&copy);
  ASSERT_NE(copy.index.get(), nullptr);
  copy = data;  // assigned over: its sessions replaced, its own index dropped, none taken
  EXPECT_EQ(copy.index.get(), nullptr);

  // A move keeps the sessions where they were, and the index with them.
  const Session* second = &data.sessions[1];
  const PollIndex* index = data.index.get();
  PollData moved = std::move(data);
  EXPECT_EQ(moved.index.get(), index);
  EXPECT_EQ(moved.index.get()->Find(200), second);
  EXPECT_EQ(&moved.sessions[1], second);
  EXPECT_EQ(moved.index.get()->Datname(7), "seven");
}

}  // namespace
}  // namespace pglock
