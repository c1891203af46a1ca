// The server log reader of a target, fed a real file on disk: a burst of 30,000 wait lines
// between two polls keeps at most kMaxQueuedLockRecords for the poller and counts the rest as
// dropped; the reader's status says what it read. No database.
#include "exporter/serverlog/server_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace pglock {
namespace {

std::string WaitLine(int i) {
  const int pid = 1000 + i % 5000;
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "{\"timestamp\":\"2026-12-02 10:00:00.000 UTC\",\"user\":\"app\",\"dbname\":\"shop\","
      "\"pid\":%d,\"session_id\":\"65f00000.%x\",\"error_severity\":\"LOG\","
      "\"state_code\":\"00000\",\"message\":\"process %d still waiting for ShareLock on "
      "transaction %d after 1000.123 ms\",\"detail\":\"Process holding the lock: 7. Wait "
      "queue: %d.\",\"backend_type\":\"client backend\"}\n",
      pid, pid, pid, 500 + i, pid);
  return buf;
}

TEST(ServerLogReader, ABurstOfWaitLinesIsBoundedAndCounted) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("pglock_serverlog_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/postgresql-2026-12-02_100000.json";
  std::ofstream(file).close();
  ServerLogConfig config;
  config.path = dir;
  config.format = "jsonlog";
  ServerLog log("burst", config, "");
  log.ReadOnceForTest();  // starts at the end of the (empty) file
  {
    std::ofstream out(file, std::ios::app);
    for (int i = 0; i < 30'000; ++i) out << WaitLine(i);
  }
  log.ReadOnceForTest();
  const auto status = log.Status();
  EXPECT_TRUE(status->up) << status->error;
  EXPECT_EQ(status->records, 30'000);
  EXPECT_EQ(status->unparsed, 0);
  EXPECT_EQ(status->dropped, 30'000 - static_cast<double>(kMaxQueuedLockRecords));
  const std::vector<LockRecord> records = log.TakeLockRecords();
  ASSERT_EQ(records.size(), kMaxQueuedLockRecords);
  EXPECT_EQ(records.front().kind, LockRecordKind::kStillWaiting);
  EXPECT_EQ(records.front().pid, 1000);
  EXPECT_TRUE(log.TakeLockRecords().empty());  // taken once
  EXPECT_EQ(log.reads_through(), 2u);
  std::filesystem::remove_all(dir);
}

TEST(ServerLogReader, EnglishMessagesByLocaleName) {
  for (const char* english : {"", "C", "C.UTF-8", "POSIX", "en_US.UTF-8", "en_GB"}) {
    EXPECT_TRUE(EnglishMessages(english)) << english;
  }
  for (const char* other : {"de_DE.UTF-8", "fr_FR", "ja_JP.eucJP"}) {
    EXPECT_FALSE(EnglishMessages(other)) << other;
  }
}

}  // namespace
}  // namespace pglock
