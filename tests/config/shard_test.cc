#include "exporter/config/shard.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "exporter/config/config.h"

namespace pglock {
namespace {

// The published FNV-1a 64-bit test vectors: the hash every pod computes must not drift.
TEST(ShardHashTest, Fnv1a64MatchesThePublishedVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

std::vector<std::string> Names(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("db-" + std::to_string(i) + ".example.internal");
  return out;
}

TEST(ShardHashTest, EveryTargetHasOneShardBelowTheTotal) {
  for (int total = 1; total <= 12; ++total) {
    for (const std::string& name : Names(200)) {
      const int s = ShardOf(name, total);
      EXPECT_GE(s, 0);
      EXPECT_LT(s, total);
      EXPECT_EQ(s, ShardOf(name, total)) << "the same answer each time";
    }
  }
}

TEST(ShardHashTest, SpreadsTargetsEvenly) {
  for (const int total : {2, 3, 5, 8}) {
    std::map<int, int> per_shard;
    const auto names = Names(8000);
    for (const std::string& name : names) ++per_shard[ShardOf(name, total)];
    const double mean = static_cast<double>(names.size()) / total;
    ASSERT_EQ(per_shard.size(), static_cast<size_t>(total));
    for (const auto& [shard, n] : per_shard) {
      EXPECT_NEAR(n, mean, mean * 0.1) << "shard " << shard << " of " << total;
    }
  }
}

// Going from N to N+1 shards moves a target only to the new shard, and about 1/(N+1) of them.
TEST(ShardHashTest, OneMoreShardMovesTargetsOnlyToIt) {
  const auto names = Names(6000);
  for (int total = 1; total < 10; ++total) {
    int moved = 0;
    for (const std::string& name : names) {
      const int before = ShardOf(name, total);
      const int after = ShardOf(name, total + 1);
      if (before != after) {
        ++moved;
        EXPECT_EQ(after, total) << name << " moved between old shards";
      }
    }
    const double expected = static_cast<double>(names.size()) / (total + 1);
    EXPECT_NEAR(moved, expected, expected * 0.15) << total << " -> " << total + 1;
  }
}

TEST(ShardHashTest, OrdinalFromAStatefulSetPodsName) {
  std::string why;
  EXPECT_EQ(OrdinalFromHostName("pglock-exporter-2", &why), 2);
  EXPECT_EQ(OrdinalFromHostName("shard-0", &why), 0);
  EXPECT_EQ(OrdinalFromHostName("a-b-c-17", &why), 17);
  for (const char* bad : {"pglock-exporter", "web", "pod-", "pod-2a", "-", "", "x-1234567"}) {
    why.clear();
    EXPECT_EQ(OrdinalFromHostName(bad, &why), std::nullopt) << bad;
    EXPECT_NE(why.find("host name"), std::string::npos) << bad << ": " << why;
  }
}

std::string Dump(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += e.ToString() + "\n";
  return out;
}

TEST(ShardConfigTest, ParsesTheShardTable) {
  Config c;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseConfigText("[shard]\nordinal = 2\ntotal = 3\n", "f.toml", &c, &errors))
      << Dump(errors);
  EXPECT_EQ(c.shard.ordinal, 2);
  EXPECT_EQ(c.shard.total, 3);
  EXPECT_FALSE(c.shard.ordinal_auto);
  Config d;
  ASSERT_TRUE(ParseConfigText("", "f.toml", &d, &errors));
  EXPECT_EQ(d.shard.ordinal, 0);
  EXPECT_EQ(d.shard.total, 1);
}

TEST(ShardConfigTest, BadValuesNameTheKeyAndLine) {
  const std::vector<std::tuple<std::string, std::string, int, std::string>> cases = {
      {"[shard]\nordinal = 3\ntotal = 3\n", "shard.ordinal", 2, "must be below shard.total (3)"},
      {"[shard]\ntotal = 0\n", "shard.total", 2, "between 1 and 1000"},
      {"[shard]\nordinal = -1\n", "shard.ordinal", 2, "or \"auto\""},
      {"[shard]\nordinal = \"first\"\n", "shard.ordinal", 2, "or \"auto\""},
      {"[shard]\nordinal = 0\nshards = 2\n", "shard.shards", 3, "unknown key"},
  };
  for (const auto& [text, key, line, message] : cases) {
    Config c;
    std::vector<ConfigError> errors;
    EXPECT_FALSE(ParseConfigText(text, "f.toml", &c, &errors)) << text;
    ASSERT_EQ(errors.size(), 1u) << text << Dump(errors);
    EXPECT_EQ(errors[0].key, key) << text;
    EXPECT_EQ(errors[0].line, line) << text;
    EXPECT_NE(errors[0].message.find(message), std::string::npos) << errors[0].message;
  }
}

TEST(ShardConfigTest, AutoTakesTheOrdinalFromTheHostName) {
  Config c;
  std::vector<ConfigError> errors;
  const std::string host = HostName();
  std::string why;
  const std::optional<int> n = OrdinalFromHostName(host, &why);
  const bool ok =
      ParseConfigText("[shard]\nordinal = \"auto\"\ntotal = 1000\n", "f.toml", &c, &errors);
  EXPECT_TRUE(c.shard.ordinal_auto);
  EXPECT_EQ(c.shard.host_name, host);
  if (n && *n < 1000) {
    EXPECT_TRUE(ok) << Dump(errors);
    EXPECT_EQ(c.shard.ordinal, *n);
  } else {
    ASSERT_FALSE(ok);
    ASSERT_EQ(errors.size(), 1u) << Dump(errors);
    EXPECT_EQ(errors[0].key, "shard.ordinal");
    EXPECT_NE(errors[0].message.find("auto: host name \"" + host + "\""), std::string::npos)
        << errors[0].message;
  }
}

TEST(ShardConfigTest, FlagsOverrideTheFileAndAreChecked) {
  Flags flags;
  std::vector<ConfigError> errors;
  ASSERT_TRUE(ParseFlags({"--shard.ordinal=1", "--shard.total", "4"}, &flags, &errors));
  Config c;
  ASSERT_TRUE(LoadConfig(flags, std::nullopt, &c, &errors)) << Dump(errors);
  EXPECT_EQ(c.shard.ordinal, 1);
  EXPECT_EQ(c.shard.total, 4);

  for (const char* bad : {"--shard.total=0", "--shard.total=x", "--shard.total=1001"}) {
    Flags f;
    std::vector<ConfigError> e;
    EXPECT_FALSE(ParseFlags({bad}, &f, &e)) << bad;
    ASSERT_EQ(e.size(), 1u) << bad;
    EXPECT_EQ(e[0].key, "--shard.total");
  }
  Flags f;
  ASSERT_TRUE(ParseFlags({"--shard.ordinal=two"}, &f, &errors));
  Config d;
  std::vector<ConfigError> e;
  EXPECT_FALSE(LoadConfig(f, std::nullopt, &d, &e));
  ASSERT_EQ(e.size(), 1u) << Dump(e);
  EXPECT_EQ(e[0].key, "--shard.ordinal");
  Flags g;
  ASSERT_TRUE(ParseFlags({"--shard.ordinal=2", "--shard.total=2"}, &g, &errors));
  Config h;
  e.clear();
  EXPECT_FALSE(LoadConfig(g, std::nullopt, &h, &e));
  ASSERT_EQ(e.size(), 1u) << Dump(e);
  EXPECT_EQ(e[0].key, "shard.ordinal");
  EXPECT_EQ(e[0].line, 0) << "set by a flag: no line";
}

}  // namespace
}  // namespace pglock
