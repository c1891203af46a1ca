// ParseCsvlog (exporter/serverlog/csvlog.h): PostgreSQL's csvlog records of 12 (23 columns), 13
// (24) and 14+ (26), quoting, and what is malformed.
#include "exporter/serverlog/csvlog.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pglock {
namespace {

// A PostgreSQL 16 record, as written.
constexpr char kTerminated16[] =
    "2024-05-01 12:00:05.123 UTC,\"app\",\"appdb\",41234,\"10.1.2.3:52144\",66322eb0.a112,4,"
    "\"idle in transaction\",2024-05-01 11:59:44 UTC,5/27,0,FATAL,57P01,\"terminating "
    "connection due to administrator command\",,,,,,,,,\"billing-worker\",\"client backend\",,0";

// The first `columns` columns of a record whose message and query span lines and quote.
std::string Record(size_t columns) {
  const std::vector<std::string> all = {
      "2024-05-01 12:00:05.500 UTC",
      "\"app\"",
      "\"appdb\"",
      "41234",
      "\"[local]\"",
      "66322eb0.a112",
      "7",
      "\"UPDATE\"",
      "2024-05-01 11:59:44 UTC",
      "5/28",
      "7412",
      "ERROR",
      "55P03",
      "\"could not obtain lock on row in relation \"\"jobs\"\"\"",
      "\"line one\nline \"\"two\"\"\n\"",
      "",
      "",
      "",
      "\"SQL function \"\"claim\"\" statement 1\"",
      "\"UPDATE jobs SET state = 'taken'\n WHERE id = 1\"",
      "8",
      "",
      "\"worker, \"\"blue\"\"\"",
      "\"client backend\"",
      "41200",
      "-4215830611416573000",
  };
  std::string out;
  for (size_t i = 0; i < columns; ++i) out += (i == 0 ? "" : ",") + all[i];
  return out;
}

TEST(CsvlogTest, ReadsAPostgres16Record) {
  LogRecord r;
  ASSERT_TRUE(ParseCsvlog(kTerminated16, &r));
  EXPECT_DOUBLE_EQ(r.log_time, 1714564805.123);
  EXPECT_EQ(r.user, "app");
  EXPECT_EQ(r.dbname, "appdb");
  EXPECT_EQ(r.pid, 41234);
  EXPECT_EQ(r.remote_host, "10.1.2.3");
  EXPECT_EQ(r.remote_port, 52144);
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
  EXPECT_EQ(r.leader_pid, 0);
}

TEST(CsvlogTest, UndoesQuotingAcrossLines) {
  LogRecord r;
  ASSERT_TRUE(ParseCsvlog(Record(26) + "\n", &r));
  EXPECT_EQ(r.remote_host, "[local]");
  EXPECT_EQ(r.remote_port, 0);
  EXPECT_EQ(r.txid, 7412u);
  EXPECT_EQ(r.state_code, "55P03");
  EXPECT_EQ(r.message, "could not obtain lock on row in relation \"jobs\"");
  EXPECT_EQ(r.detail, "line one\nline \"two\"\n");
  EXPECT_EQ(r.hint, "");
  EXPECT_EQ(r.context, "SQL function \"claim\" statement 1");
  EXPECT_EQ(r.statement, "UPDATE jobs SET state = 'taken'\n WHERE id = 1");
  EXPECT_EQ(r.application_name, "worker, \"blue\"");
  EXPECT_EQ(r.leader_pid, 41200);
  EXPECT_EQ(r.query_id, -4215830611416573000);
}

TEST(CsvlogTest, AcceptsTheColumnsOfEveryVersion) {
  LogRecord r;
  ASSERT_TRUE(ParseCsvlog(Record(23), &r));  // 12
  EXPECT_EQ(r.application_name, "worker, \"blue\"");
  EXPECT_EQ(r.backend_type, "");
  ASSERT_TRUE(ParseCsvlog(Record(24), &r));  // 13
  EXPECT_EQ(r.backend_type, "client backend");
  EXPECT_EQ(r.leader_pid, 0);
  ASSERT_TRUE(ParseCsvlog(Record(26), &r));  // 14+
  EXPECT_EQ(r.leader_pid, 41200);
}

TEST(CsvlogTest, RejectsMalformedRecords) {
  LogRecord r;
  EXPECT_FALSE(ParseCsvlog(Record(22), &r));
  EXPECT_FALSE(ParseCsvlog(Record(26) + ",extra", &r));
  EXPECT_FALSE(ParseCsvlog(Record(26) + ",", &r));  // an empty 27th column
  EXPECT_FALSE(ParseCsvlog("", &r));
  // An unterminated quote, text after a closing quote, a quote inside an unquoted field.
  EXPECT_FALSE(ParseCsvlog(Record(13) + ",\"open" + std::string(12, ','), &r));
  EXPECT_FALSE(ParseCsvlog(Record(13) + ",\"a\"b" + std::string(12, ','), &r));
  EXPECT_FALSE(ParseCsvlog(Record(13) + ",a\"b" + std::string(12, ','), &r));
  // A log_time that is not one.
  std::string bad = Record(26);
  bad[0] = 'x';
  EXPECT_FALSE(ParseCsvlog(bad, &r));
  // The control: the same shapes, well-formed, parse.
  EXPECT_TRUE(ParseCsvlog(Record(13) + ",\"a\"\"b\"" + std::string(12, ','), &r));
  EXPECT_EQ(r.message, "a\"b");
}

}  // namespace
}  // namespace pglock
