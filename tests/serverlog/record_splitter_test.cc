// RecordSplitter (exporter/serverlog/record_splitter.h): records cut at every possible chunk
// boundary, the csvlog quote state across chunks, oversized records skipped with bounded memory.
#include "exporter/serverlog/record_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pglock {
namespace {

std::vector<std::string> FeedAll(RecordSplitter& splitter, const std::vector<std::string>& chunks) {
  std::vector<std::string> records;
  for (const std::string& chunk : chunks) {
    splitter.Feed(chunk, [&](std::string_view r) { records.emplace_back(r); });
  }
  return records;
}

TEST(RecordSplitterTest, JsonlogRecordSplitAtEveryByte) {
  const std::string a = R"({"timestamp":"2024-05-01 12:00:00 UTC","message":"a"})";
  const std::string b = R"({"timestamp":"2024-05-01 12:00:01 UTC","message":"b\nc"})";
  const std::string stream = a + "\n" + b + "\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    RecordSplitter splitter(LogFormat::kJsonlog, 1 << 20);
    const auto records = FeedAll(splitter, {stream.substr(0, cut), stream.substr(cut)});
    ASSERT_EQ(records, (std::vector<std::string>{a, b})) << "cut at " << cut;
    EXPECT_FALSE(splitter.has_partial());
  }
}

TEST(RecordSplitterTest, CsvlogQuoteStateCarriesAcrossFeeds) {
  // Newlines inside quotes, a doubled quote, an empty unquoted field, and a quoted field ending
  // right before the record's newline.
  const std::string a = "2024-05-01 12:00:00 UTC,\"app\",,\"line 1\nline \"\"2\"\"\n\",\"x\"";
  const std::string b = "2024-05-01 12:00:01 UTC,\"\"\"\",\"\n\"";
  const std::string stream = a + "\n" + b + "\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    RecordSplitter splitter(LogFormat::kCsvlog, 1 << 20);
    const auto records = FeedAll(splitter, {stream.substr(0, cut), stream.substr(cut)});
    ASSERT_EQ(records, (std::vector<std::string>{a, b})) << "cut at " << cut;
  }
  // One byte at a time.
  RecordSplitter splitter(LogFormat::kCsvlog, 1 << 20);
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(FeedAll(splitter, bytes), (std::vector<std::string>{a, b}));
}

TEST(RecordSplitterTest, HoldsBackAPartialRecordAndIgnoresEmptyLines) {
  RecordSplitter splitter(LogFormat::kJsonlog, 1 << 20);
  EXPECT_TRUE(FeedAll(splitter, {"\n\n{\"a\":1}\n\n{\"b\""}).size() == 1);
  EXPECT_TRUE(splitter.has_partial());
  EXPECT_EQ(splitter.buffered_bytes(), 4u);
  EXPECT_EQ(FeedAll(splitter, {":2}\n"}), (std::vector<std::string>{"{\"b\":2}"}));
  EXPECT_TRUE(splitter.Reset() == false);
  FeedAll(splitter, {"{\"c\""});
  EXPECT_TRUE(splitter.Reset());  // a partial record was dropped
  EXPECT_EQ(FeedAll(splitter, {":3}\n"}), (std::vector<std::string>{":3}"}));
}

TEST(RecordSplitterTest, SkipsAnOversizedRecordWithBoundedMemory) {
  const size_t max = 1000;
  for (LogFormat format : {LogFormat::kJsonlog, LogFormat::kCsvlog}) {
    RecordSplitter splitter(format, max);
    std::vector<std::string> records;
    auto collect = [&](std::string_view r) { records.emplace_back(r); };
    splitter.Feed("first\nbig", collect);
    // 100 KB in 100-byte chunks, with a quoted newline for csvlog to keep inside the record.
    for (int i = 0; i < 1000; ++i) {
      const bool quoted = format == LogFormat::kCsvlog && i == 500;
      splitter.Feed(quoted ? "\"quoted\n" + std::string(91, 'x') + "\"" : std::string(100, 'x'),
                    collect);
      ASSERT_LE(splitter.buffered_bytes(), max);
    }
    splitter.Feed("\n" + std::string(max - 1, 'y') + "\nlast\n", collect);
    // A record of exactly max bytes passes; one byte more does not.
    splitter.Feed(std::string(max, 'z') + "\n" + std::string(max + 1, 'w') + "\nend\n", collect);
    EXPECT_EQ(records, (std::vector<std::string>{"first", std::string(max - 1, 'y'), "last",
                                                 std::string(max, 'z'), "end"}))
        << LogFormatName(format);
    EXPECT_EQ(splitter.oversized(), 2u);
    EXPECT_FALSE(splitter.has_partial());
  }
}

TEST(LastRecordStartTest, FindsTheStartOfTheLastRecord) {
  EXPECT_EQ(LastRecordStart("{\"a\":1}\n{\"b\":", LogFormat::kJsonlog), 8u);
  EXPECT_EQ(LastRecordStart("\"x\"}\n", LogFormat::kJsonlog), std::string_view::npos);
  // csvlog: a quoted newline inside the last record is no start; the timestamped line is.
  const std::string csv = "x\"\n2024-05-01 12:00:00.1 UTC,\"app\",\"one\ntwo";
  EXPECT_EQ(LastRecordStart(csv, LogFormat::kCsvlog), 3u);
  EXPECT_EQ(LastRecordStart("\"one\ntwo", LogFormat::kCsvlog), std::string_view::npos);
}

}  // namespace
}  // namespace pglock
