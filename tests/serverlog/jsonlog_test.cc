// JsonlogParser (exporter/serverlog/jsonlog.h) on lines as PostgreSQL 16 writes them, and the
// shared helpers of log_record.h.
#include "exporter/serverlog/jsonlog.h"

#include <gtest/gtest.h>

#include <string>

namespace pglock {
namespace {

// 2024-05-01 11:59:44 UTC = 0x66322eb0; pid 41234 = 0xa112.
constexpr char kTerminated[] =
    R"({"timestamp":"2024-05-01 12:00:05.123 UTC","user":"app","dbname":"appdb","pid":41234,)"
    R"("remote_host":"10.1.2.3","remote_port":52144,"session_id":"66322eb0.a112","line_num":4,)"
    R"("ps":"idle in transaction","session_start":"2024-05-01 11:59:44 UTC","vxid":"5/27",)"
    R"("txid":0,"error_severity":"FATAL","state_code":"57P01","message":"terminating )"
    R"(connection due to administrator command","application_name":"billing-worker",)"
    R"("backend_type":"client backend","query_id":0})";

constexpr char kDisconnection[] =
    R"({"timestamp":"2024-05-01 12:00:07.900 UTC","user":"app","dbname":"appdb","pid":41300,)"
    R"("remote_host":"[local]","session_id":"66322eb0.a154","line_num":9,"ps":"idle",)"
    R"("session_start":"2024-05-01 11:59:44 UTC","vxid":"","txid":0,"error_severity":"LOG",)"
    R"("state_code":"00000","message":"disconnection: session time: 0:00:23.456 user=app )"
    R"(database=appdb host=[local]","application_name":"psql","backend_type":"client backend",)"
    R"("query_id":0})";

TEST(JsonlogParserTest, ReadsATerminatedSession) {
  JsonlogParser parser;
  LogRecord r;
  ASSERT_TRUE(parser.Parse(kTerminated, &r));
  EXPECT_DOUBLE_EQ(r.log_time, 1714564805.123);
  EXPECT_EQ(r.user, "app");
  EXPECT_EQ(r.dbname, "appdb");
  EXPECT_EQ(r.pid, 41234);
  EXPECT_EQ(r.remote_host, "10.1.2.3");
  EXPECT_EQ(r.remote_port, 52144);
  EXPECT_EQ(r.session_id, "66322eb0.a112");
  EXPECT_EQ(r.session_start, 1714564784);
  EXPECT_EQ(r.session_pid, 41234);
  EXPECT_EQ(r.session_line_num, 4);
  EXPECT_EQ(r.command_tag, "idle in transaction");
  EXPECT_EQ(r.virtual_xid, "5/27");
  EXPECT_EQ(r.error_severity, "FATAL");
  EXPECT_EQ(r.state_code, "57P01");
  EXPECT_EQ(r.message, "terminating connection due to administrator command");
  EXPECT_EQ(r.application_name, "billing-worker");
  EXPECT_EQ(r.backend_type, "client backend");
  EXPECT_EQ(r.detail, "");
}

TEST(JsonlogParserTest, ReadsADisconnectionLineAndForgetsThePreviousRecord) {
  JsonlogParser parser;
  LogRecord r;
  ASSERT_TRUE(parser.Parse(kTerminated, &r));
  ASSERT_TRUE(parser.Parse(std::string(kDisconnection) + "\n", &r));
  EXPECT_EQ(r.pid, 41300);
  EXPECT_EQ(r.remote_host, "[local]");
  EXPECT_EQ(r.remote_port, 0);  // absent: not the previous record's
  EXPECT_EQ(r.error_severity, "LOG");
  EXPECT_EQ(r.state_code, "00000");
  EXPECT_EQ(r.message.rfind("disconnection: session time: 0:00:23.456", 0), 0u);
  EXPECT_EQ(r.application_name, "psql");
}

TEST(JsonlogParserTest, KeepsEscapesAndReplacesOnlyInvalidUtf8) {
  // PostgreSQL escapes quotes, backslashes and controls, and writes other bytes as they are.
  const std::string line = std::string(R"({"timestamp":"2024-05-01 12:00:00 UTC",)") +
                           R"("application_name":"a\"b\\c\n\u0001 \u00e9 )" + "\xC3\xA9 \xFF\xFE" +
                           R"(","message":"x"})";
  JsonlogParser parser;
  LogRecord r;
  ASSERT_TRUE(parser.Parse(line, &r));
  EXPECT_EQ(r.application_name,
            "a\"b\\c\n\x01 \xC3\xA9 \xC3\xA9 "
            "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(r.message, "x");
}

TEST(JsonlogParserTest, RejectsWhatIsNotARecord) {
  JsonlogParser parser;
  LogRecord r;
  EXPECT_FALSE(parser.Parse(R"({"timestamp":"2024-05-01 12:00:00 UTC","message":"cut)", &r));
  EXPECT_FALSE(parser.Parse("2024-05-01 12:00:00 UTC [41234] LOG:  plain stderr text", &r));
  EXPECT_FALSE(parser.Parse(R"(["timestamp","2024-05-01 12:00:00 UTC"])", &r));
  EXPECT_FALSE(parser.Parse(R"({"message":"no timestamp"})", &r));
  EXPECT_FALSE(parser.Parse(R"({"timestamp":"yesterday","message":"x"})", &r));
  EXPECT_FALSE(parser.Parse("", &r));
  // Unknown keys and unexpected types are ignored, not fatal.
  ASSERT_TRUE(parser.Parse(R"({"timestamp":"2024-05-01 12:00:00 UTC","new_key":[1,{"a":2}],)"
                           R"("pid":"77","user":5})",
                           &r));
  EXPECT_EQ(r.pid, 77);
  EXPECT_EQ(r.user, "");
}

TEST(LogTimeTest, ReadsZonesAndOffsets) {
  EXPECT_EQ(ParseLogTime("2024-05-01 12:00:05 UTC"), 1714564805.0);
  EXPECT_EQ(ParseLogTime("2024-05-01 12:00:05.5 GMT"), 1714564805.5);
  EXPECT_EQ(ParseLogTime("2024-05-01 14:00:05 +02"), 1714564805.0);
  EXPECT_EQ(ParseLogTime("2024-05-01 06:30:05 -0530"), 1714564805.0);
  EXPECT_EQ(ParseLogTime("2024-05-01 17:30:05 +05:30"), 1714564805.0);
  EXPECT_FALSE(ParseLogTime("2024-05-01 12:00"));
  EXPECT_FALSE(ParseLogTime("2024-13-01 12:00:05 UTC"));
  EXPECT_FALSE(ParseLogTime("2024-05-01 12:00:05 +2"));
  EXPECT_FALSE(ParseLogTime("2024-05-01 12:00:05."));
  // A named zone is the exporter's local time: whatever it is, it parses.
  EXPECT_TRUE(ParseLogTime("2024-05-01 12:00:05.001 CEST"));
}

TEST(SessionIdTest, SplitsStartAndPid) {
  int64_t start = 0;
  int pid = 0;
  ASSERT_TRUE(ParseSessionId("66322eb0.a112", &start, &pid));
  EXPECT_EQ(start, 1714564784);
  EXPECT_EQ(pid, 41234);
  EXPECT_FALSE(ParseSessionId("66322eb0", &start, &pid));
  EXPECT_FALSE(ParseSessionId("66322eb0.", &start, &pid));
  EXPECT_FALSE(ParseSessionId("zz.1", &start, &pid));
  EXPECT_FALSE(ParseSessionId("1.2.3", &start, &pid));
}

TEST(LogFormatTest, NamesRoundTrip) {
  EXPECT_STREQ(LogFormatName(LogFormat::kJsonlog), "jsonlog");
  EXPECT_STREQ(LogFormatName(LogFormat::kCsvlog), "csvlog");
  EXPECT_EQ(ParseLogFormat("csvlog"), LogFormat::kCsvlog);
  EXPECT_EQ(ParseLogFormat("jsonlog"), LogFormat::kJsonlog);
  EXPECT_FALSE(ParseLogFormat("stderr"));
}

}  // namespace
}  // namespace pglock
