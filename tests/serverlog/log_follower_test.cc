// LogFollower (exporter/serverlog/log_follower.h) over real temporary files: where it starts,
// appends, rotation, rename and recreate, truncation, partial records, errors and recovery, the
// per-Poll budget, and a directory holding both formats.
#include "exporter/serverlog/log_follower.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace pglock {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "serverlog_test.XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string JsonLine(const std::string& message) {
  return R"({"timestamp":"2024-05-01 12:00:00.000 UTC","user":"app","dbname":"appdb",)"
         R"("pid":4242,"session_id":"66322eb0.1092","error_severity":"LOG","state_code":"00000",)"
         R"("message":")" +
         message + R"(","backend_type":"client backend"})" + "\n";
}

void Append(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

// Sets the file's modification time: the follower orders files by it.
void SetModified(const std::string& path, time_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// Polls once; the messages read, in order.
std::vector<std::string> PollMessages(LogFollower& follower) {
  std::vector<std::string> messages;
  const Status s = follower.Poll([&](const LogRecord& r) { messages.push_back(r.message); });
  EXPECT_TRUE(s.ok()) << s.message();
  return messages;
}

using Messages = std::vector<std::string>;

TEST(LogFollowerTest, StartsAtTheEndOfTheNewestFileAndReadsAppends) {
  TempDir dir;
  Append(dir / "postgresql-2024-05-01_000000.json", JsonLine("old 1"));
  Append(dir / "postgresql-2024-05-02_000000.json", JsonLine("old 2") + JsonLine("old 3"));
  SetModified(dir / "postgresql-2024-05-01_000000.json", 1714521600);
  SetModified(dir / "postgresql-2024-05-02_000000.json", 1714608000);
  LogFollower follower(MakeFileLogSource(dir.path(), LogFormat::kJsonlog), LogFormat::kJsonlog);
  EXPECT_EQ(PollMessages(follower), Messages{});
  EXPECT_EQ(follower.current_file(), "postgresql-2024-05-02_000000.json");
  Append(dir / "postgresql-2024-05-02_000000.json", JsonLine("new 1") + JsonLine("new 2"));
  EXPECT_EQ(PollMessages(follower), (Messages{"new 1", "new 2"}));
  EXPECT_EQ(PollMessages(follower), Messages{});
  EXPECT_EQ(follower.stats().records, 2u);
  EXPECT_EQ(follower.stats().bytes_read, 2 * JsonLine("new 1").size());
}

// A restart of the exporter: a follower resumed where an earlier one stopped reads what was
// written meanwhile, the rest of its file and two rotations after it, and nothing from before.
TEST(LogFollowerTest, ResumesWhereAnEarlierFollowerStoppedThroughTwoRotations) {
  TempDir dir;
  const std::string older = dir / "postgresql-2024-05-01_000000.json";
  const std::string current = dir / "postgresql-2024-05-02_000000.json";
  Append(older, JsonLine("before 1"));
  Append(current, JsonLine("before 2"));
  SetModified(older, 1714521600);
  SetModified(current, 1714608000);
  std::optional<LogPosition> at;
  {
    LogFollower first(MakeFileLogSource(dir.path(), LogFormat::kJsonlog), LogFormat::kJsonlog);
    EXPECT_EQ(PollMessages(first), Messages{});
    Append(current, JsonLine("read before the stop"));
    SetModified(current, 1714608050);
    EXPECT_EQ(PollMessages(first), Messages{"read before the stop"});
    at = first.position();
  }
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->file, "postgresql-2024-05-02_000000.json");
  // While the exporter is down: more in the file, then two rotations.
  Append(current, JsonLine("gap 1"));
  SetModified(current, 1714608100);
  Append(dir / "postgresql-2024-05-03_000000.json", JsonLine("gap 2"));
  SetModified(dir / "postgresql-2024-05-03_000000.json", 1714694400);
  Append(dir / "postgresql-2024-05-04_000000.json", JsonLine("gap 3"));
  SetModified(dir / "postgresql-2024-05-04_000000.json", 1714780800);
  EXPECT_EQ(at->modified, 1714608050);
  LogFollower resumed(MakeFileLogSource(dir.path(), LogFormat::kJsonlog), LogFormat::kJsonlog);
  resumed.ResumeAt(*at);
  EXPECT_EQ(PollMessages(resumed), (Messages{"gap 1", "gap 2", "gap 3"}));
  EXPECT_NE(resumed.resume_outcome().find("resumed at"), std::string::npos)
      << resumed.resume_outcome();
  EXPECT_EQ(resumed.current_file(), "postgresql-2024-05-04_000000.json");
  Append(dir / "postgresql-2024-05-04_000000.json", JsonLine("after"));
  EXPECT_EQ(PollMessages(resumed), Messages{"after"});
}

// The saved file is gone (rotated away and removed): the files written after it are read from
// their start; a file that shrank below the position is not resumed (the end, as at a start).
TEST(LogFollowerTest, ResumesFromTheFilesAfterAGoneOneAndNotIntoAShrunkFile) {
  TempDir dir;
  const std::string next = dir / "postgresql-2024-05-03_000000.json";
  Append(next, JsonLine("gap 1"));
  SetModified(next, 1714694400);
  LogFollower gone(MakeFileLogSource(dir.path(), LogFormat::kJsonlog), LogFormat::kJsonlog);
  gone.ResumeAt(LogPosition{"postgresql-2024-05-02_000000.json", 0, 100, 1714608000});
  EXPECT_EQ(PollMessages(gone), Messages{"gap 1"});

  LogFollower shrunk(MakeFileLogSource(dir.path(), LogFormat::kJsonlog), LogFormat::kJsonlog);
  shrunk.ResumeAt(LogPosition{"postgresql-2024-05-03_000000.json", 0, 1 << 20, 1714694400});
  EXPECT_EQ(PollMessages(shrunk), Messages{});
  EXPECT_NE(shrunk.resume_outcome().find("shrank"), std::string::npos) << shrunk.resume_outcome();
  Append(next, JsonLine("after"));
  EXPECT_EQ(PollMessages(shrunk), Messages{"after"});
}

TEST(LogFollowerTest, HoldsBackAPartialLastRecordUntilItsNewline) {
  TempDir dir;
  const std::string file = dir / "postgresql.json";
  Append(file, JsonLine("before"));
  LogFollower follower(MakeFileLogSource(file, LogFormat::kJsonlog), LogFormat::kJsonlog);
  EXPECT_EQ(PollMessages(follower), Messages{});
  const std::string line = JsonLine("split");
  Append(file, line.substr(0, 40));
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(file, line.substr(40, line.size() - 41));
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(file, "\n");
  EXPECT_EQ(PollMessages(follower), Messages{"split"});
  EXPECT_EQ(follower.stats().unparsed, 0u);
}

TEST(LogFollowerTest, StartsAtARecordStillBeingWritten) {
  TempDir dir;
  const std::string file = dir / "postgresql.csv";
  const std::string head =
      "2024-05-01 12:00:05.123 UTC,\"app\",\"appdb\",41234,\"[local]\",66322eb0.a112,4,\"idle\","
      "2024-05-01 11:59:44 UTC,5/27,0,LOG,00000,\"";
  const std::string tail = "\",,,,,,,,,\"psql\",\"client backend\",,0\n";
  // A complete record, then one cut inside its quoted, multi-line message.
  Append(file, head + "history" + tail + head + "being\nwritten");
  LogFollower follower(MakeFileLogSource(file, LogFormat::kCsvlog), LogFormat::kCsvlog);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(PollMessages(follower), Messages{});
  EXPECT_EQ(follower.current_file(), "postgresql.csv");  // positioned on the third Poll
  Append(file, " \"\"slowly\"\"" + tail + head + "next" + tail);
  EXPECT_EQ(PollMessages(follower), (Messages{"being\nwritten \"slowly\"", "next"}));
  EXPECT_EQ(follower.stats().unparsed, 0u);
}

TEST(LogFollowerTest, FinishesTheOldFileBeforeTheRotatedOne) {
  TempDir dir;
  const std::string old_file = dir / "postgresql-2024-05-01_000000.json";
  const std::string new_file = dir / "postgresql-2024-05-01_010000.json";
  Append(old_file, JsonLine("history"));
  LogFollower follower(MakeFileLogSource(dir.path(), LogFormat::kJsonlog), LogFormat::kJsonlog);
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(old_file, JsonLine("old 1"));
  Append(new_file, JsonLine("new 1"));
  SetModified(new_file, 1714525200);
  Append(old_file, JsonLine("old 2"));  // written after the new file appeared
  EXPECT_EQ(PollMessages(follower), (Messages{"old 1", "old 2", "new 1"}));
  EXPECT_EQ(follower.current_file(), "postgresql-2024-05-01_010000.json");
  EXPECT_EQ(follower.stats().files_switched, 1u);
  Append(new_file, JsonLine("new 2"));
  EXPECT_EQ(PollMessages(follower), Messages{"new 2"});
  // Even a record written to the old file after the switch is read, once.
  Append(old_file, JsonLine("old 3"));
  EXPECT_EQ(PollMessages(follower), Messages{"old 3"});
  Append(new_file, JsonLine("new 3"));
  EXPECT_EQ(PollMessages(follower), Messages{"new 3"});
  EXPECT_EQ(PollMessages(follower), Messages{});
}

TEST(LogFollowerTest, ReadsSeveralRotationsSinceTheLastPollInOrder) {
  TempDir dir;
  Append(dir / "a.json", JsonLine("history"));
  SetModified(dir / "a.json", 1714521600);
  LogFollower follower(MakeFileLogSource(dir.path(), LogFormat::kJsonlog), LogFormat::kJsonlog);
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(dir / "c.json", JsonLine("c"));
  SetModified(dir / "c.json", 1714521800);
  Append(dir / "b.json", JsonLine("b"));
  SetModified(dir / "b.json", 1714521700);
  EXPECT_EQ(PollMessages(follower), (Messages{"b", "c"}));
  EXPECT_EQ(follower.current_file(), "c.json");
}

// The directory is kept open from one listing to the next: a file added meanwhile is listed, and a
// directory put in place of the one listed (the old one renamed away) is the one listed next. Each
// listing goes into the one list, as the follower's do: nothing of the last one is left in it.
TEST(LogFollowerTest, AListingSeesNewFilesAndADirectoryReplacedUnderItsPath) {
  TempDir dir;
  const std::string logs = dir / "log";
  fs::create_directory(logs);
  Append(logs + "/a.json", JsonLine("a"));
  auto source = MakeFileLogSource(logs, LogFormat::kJsonlog);
  std::vector<LogFileInfo> files;
  const auto names = [&] {
    const Status s = source->List(&files);
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<std::string> out;
    for (const LogFileInfo& f : files) out.push_back(f.name);
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(names(), Messages{"a.json"});
  Append(logs + "/b.json", JsonLine("b"));
  EXPECT_EQ(names(), (Messages{"a.json", "b.json"}));
  fs::rename(logs, dir / "log.old");
  fs::create_directory(logs);
  Append(logs + "/c.json", JsonLine("c"));
  EXPECT_EQ(names(), Messages{"c.json"});
  fs::remove_all(logs);
  EXPECT_FALSE(source->List(&files).ok()) << "a directory gone is an error";
  EXPECT_TRUE(files.empty());
  fs::create_directory(logs);
  Append(logs + "/d.json", JsonLine("d"));
  EXPECT_EQ(names(), Messages{"d.json"});
}

// The current file renamed away (a name that is no candidate) and a new one created under its
// name: the old file is finished through the descriptor still open, then the new one is read.
void RenameAndRecreate(bool directory) {
  TempDir dir;
  const std::string file = dir / "postgresql.json";
  Append(file, JsonLine("history"));
  LogFollower follower(MakeFileLogSource(directory ? dir.path() : file, LogFormat::kJsonlog),
                       LogFormat::kJsonlog);
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(file, JsonLine("old 1"));
  EXPECT_EQ(PollMessages(follower), Messages{"old 1"});
  Append(file, JsonLine("old 2"));
  fs::rename(file, dir / "postgresql.json.1");
  Append(dir / "postgresql.json.1", JsonLine("old 3"));
  Append(file, JsonLine("new 1"));
  EXPECT_EQ(PollMessages(follower), (Messages{"old 2", "old 3", "new 1"}));
  EXPECT_EQ(follower.stats().files_switched, 1u);
  EXPECT_EQ(follower.stats().truncations, 0u);
  Append(file, JsonLine("new 2"));
  EXPECT_EQ(PollMessages(follower), Messages{"new 2"});
}

TEST(LogFollowerTest, RenamedAndRecreatedFile) { RenameAndRecreate(/*directory=*/false); }
TEST(LogFollowerTest, RenamedAndRecreatedFileInADirectory) {
  RenameAndRecreate(/*directory=*/true);
}

TEST(LogFollowerTest, RestartsATruncatedFileFromItsStart) {
  TempDir dir;
  const std::string file = dir / "postgresql.json";
  Append(file, JsonLine("history, long enough to be longer than what follows the truncation"));
  LogFollower follower(MakeFileLogSource(file, LogFormat::kJsonlog), LogFormat::kJsonlog);
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(file, JsonLine("before"));
  EXPECT_EQ(PollMessages(follower), Messages{"before"});
  fs::resize_file(file, 0);
  Append(file, JsonLine("after"));
  EXPECT_EQ(PollMessages(follower), Messages{"after"});
  EXPECT_EQ(follower.stats().truncations, 1u);
  EXPECT_EQ(follower.stats().files_switched, 0u);
}

// Denies access to `path` for its lifetime: root (which ignores permissions) becomes nobody.
class Unreadable {
 public:
  explicit Unreadable(const std::string& path) : path_(path), root_(::geteuid() == 0) {
    if (root_) {
      EXPECT_EQ(::seteuid(65534), 0);
    } else {
      ::chmod(path_.c_str(), 0);
    }
  }
  ~Unreadable() {
    if (root_) {
      EXPECT_EQ(::seteuid(0), 0);
    } else {
      ::chmod(path_.c_str(), 0755);
    }
  }

 private:
  const std::string path_;
  const bool root_;
};

TEST(LogFollowerTest, ReportsAnUnreadableDirectoryAndRecovers) {
  TempDir dir;
  const std::string logs = dir / "log";
  fs::create_directory(logs);
  ::chmod(dir.path().c_str(), 0700);
  Append(logs + "/postgresql.json", JsonLine("history"));
  LogFollower follower(MakeFileLogSource(logs, LogFormat::kJsonlog), LogFormat::kJsonlog);
  {
    Unreadable denied(logs);
    const Status s = follower.Poll([](const LogRecord&) {});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(logs), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("Permission denied"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("adm group"), std::string::npos) << s.message();
  }
  EXPECT_EQ(PollMessages(follower), Messages{});  // positions at the end now
  Append(logs + "/postgresql.json", JsonLine("readable"));
  EXPECT_EQ(PollMessages(follower), Messages{"readable"});
}

TEST(LogFollowerTest, ReportsAMissingFileAndFollowsItOnceItExists) {
  TempDir dir;
  const std::string file = dir / "postgresql.json";
  LogFollower follower(MakeFileLogSource(file, LogFormat::kJsonlog), LogFormat::kJsonlog);
  const Status s = follower.Poll([](const LogRecord&) {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(file + ": No such file or directory"), std::string::npos)
      << s.message();
  Append(file, JsonLine("before"));
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(file, JsonLine("after"));
  EXPECT_EQ(PollMessages(follower), Messages{"after"});
}

// A source that fails when told to, around a real one.
class FlakySource : public LogSource {
 public:
  explicit FlakySource(std::unique_ptr<LogSource> real) : real_(std::move(real)) {}
  Status List(std::vector<LogFileInfo>* out) override {
    if (fail_list) return Status::StatementFailed("list failed");
    return real_->List(out);
  }
  Status Read(const LogFileInfo& file, uint64_t offset, size_t max_bytes,
              std::string* out) override {
    if (reads_before_failure == 0) return Status::StatementFailed("read failed");
    if (reads_before_failure > 0) --reads_before_failure;
    return real_->Read(file, offset, max_bytes, out);
  }
  std::string Describe() const override { return "flaky"; }

  bool fail_list = false;
  int reads_before_failure = -1;  // -1: never fail

 private:
  std::unique_ptr<LogSource> real_;
};

TEST(LogFollowerTest, KeepsItsPositionThroughErrors) {
  TempDir dir;
  const std::string file = dir / "postgresql.json";
  Append(file, JsonLine("history"));
  auto owned = std::make_unique<FlakySource>(MakeFileLogSource(file, LogFormat::kJsonlog));
  FlakySource* flaky = owned.get();
  // Small chunks: the read error comes in the middle of what is new.
  LogFollower follower(std::move(owned), LogFormat::kJsonlog, {1 << 20, 64, 1 << 20});
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(file, JsonLine("one") + JsonLine("two"));
  flaky->reads_before_failure = 2;  // 128 bytes: inside the first record
  std::vector<std::string> read;
  EXPECT_FALSE(follower.Poll([&](const LogRecord& r) { read.push_back(r.message); }).ok());
  EXPECT_EQ(read, Messages{});
  EXPECT_EQ(follower.stats().bytes_read, 128u);
  flaky->reads_before_failure = -1;
  flaky->fail_list = true;
  EXPECT_FALSE(follower.Poll([](const LogRecord&) {}).ok());
  flaky->fail_list = false;
  Append(file, JsonLine("three"));
  EXPECT_EQ(PollMessages(follower), (Messages{"one", "two", "three"}));
}

// A source whose listing is already stale when the follower reads: a file grows right after it
// was listed.
class GrowAfterListSource : public LogSource {
 public:
  explicit GrowAfterListSource(std::unique_ptr<LogSource> real) : real_(std::move(real)) {}
  Status List(std::vector<LogFileInfo>* out) override {
    const Status s = real_->List(out);
    if (!grow_path.empty()) Append(grow_path, grow_bytes);
    grow_path.clear();
    return s;
  }
  Status Read(const LogFileInfo& file, uint64_t offset, size_t max_bytes,
              std::string* out) override {
    return real_->Read(file, offset, max_bytes, out);
  }
  std::string Describe() const override { return "growing"; }

  std::string grow_path;
  std::string grow_bytes;

 private:
  std::unique_ptr<LogSource> real_;
};

TEST(LogFollowerTest, ReadsNothingTwiceWhenTheListingIsStale) {
  TempDir dir;
  Append(dir / "a.json", JsonLine("history"));
  SetModified(dir / "a.json", 1714521600);
  auto owned =
      std::make_unique<GrowAfterListSource>(MakeFileLogSource(dir.path(), LogFormat::kJsonlog));
  GrowAfterListSource* source = owned.get();
  LogFollower follower(std::move(owned), LogFormat::kJsonlog);
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(dir / "b.json", JsonLine("b 1"));
  source->grow_path = dir / "a.json";
  source->grow_bytes = JsonLine("a late");
  EXPECT_EQ(PollMessages(follower), (Messages{"a late", "b 1"}));
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(dir / "b.json", JsonLine("b 2"));
  EXPECT_EQ(PollMessages(follower), Messages{"b 2"});
  EXPECT_EQ(follower.stats().files_switched, 1u);
}

TEST(LogFollowerTest, SpendsAtMostItsBudgetPerPollAndSkipsOversizedRecords) {
  TempDir dir;
  const std::string file = dir / "postgresql.json";
  Append(file, JsonLine("history"));
  const size_t line = JsonLine("m00").size();
  LogFollower follower(MakeFileLogSource(file, LogFormat::kJsonlog), LogFormat::kJsonlog,
                       {/*max_record_bytes=*/1000, /*chunk_bytes=*/100,
                        /*poll_budget_bytes=*/3 * line});
  EXPECT_EQ(PollMessages(follower), Messages{});
  Append(file, JsonLine("m01") + JsonLine(std::string(5000, 'x')) + JsonLine("m02") +
                   JsonLine("m03") + JsonLine("m04"));
  std::vector<std::string> all;
  for (int i = 0; i < 20; ++i) {
    const uint64_t before = follower.stats().bytes_read;
    for (const std::string& m : PollMessages(follower)) all.push_back(m);
    EXPECT_LE(follower.stats().bytes_read - before, 3 * line);
    if (i == 0) {
      EXPECT_FALSE(follower.caught_up());
    }
  }
  EXPECT_TRUE(follower.caught_up());
  EXPECT_EQ(all, (Messages{"m01", "m02", "m03", "m04"}));
  EXPECT_EQ(follower.stats().unparsed, 1u);
  EXPECT_EQ(follower.stats().records, 4u);
}

TEST(LogFollowerTest, ReadsOnlyTheFilesOfItsFormat) {
  TempDir dir;
  const std::string csv_record =
      "2024-05-01 12:00:05.123 UTC,\"app\",\"appdb\",41234,\"[local]\",66322eb0.a112,4,\"idle\","
      "2024-05-01 11:59:44 UTC,5/27,0,LOG,00000,\"two\nlines, \"\"quoted\"\"\",,,,,,,,,\"psql\","
      "\"client backend\",,0\n";
  Append(dir / "postgresql.csv", csv_record);
  Append(dir / "postgresql.json", JsonLine("json"));
  Append(dir / "postgresql.log", "2024-05-01 12:00:05 UTC [1] LOG:  stderr text\n");
  SetModified(dir / "postgresql.csv", 1714521600);
  SetModified(dir / "postgresql.json", 1714521700);
  SetModified(dir / "postgresql.log", 1714521800);
  LogFollower follower(MakeFileLogSource(dir.path(), LogFormat::kCsvlog), LogFormat::kCsvlog);
  EXPECT_EQ(PollMessages(follower), Messages{});
  EXPECT_EQ(follower.current_file(), "postgresql.csv");
  Append(dir / "postgresql.json", JsonLine("json"));
  Append(dir / "postgresql.log", "more stderr text\n");
  Append(dir / "postgresql.csv", csv_record);
  EXPECT_EQ(PollMessages(follower), Messages{"two\nlines, \"quoted\""});
  EXPECT_EQ(follower.stats().unparsed, 0u);
  EXPECT_EQ(follower.current_file(), "postgresql.csv");
}

}  // namespace
}  // namespace pglock
