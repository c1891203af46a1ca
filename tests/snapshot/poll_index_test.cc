// The poll's look-ups: a session by pid, a database's name by datid (a session's own name over
// pg_stat_database's, the last given of either; a datid nobody names is its number).
#include "exporter/snapshot/poll_index.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pglock
