#include "exporter/http/gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <memory>
#include <string>

#include "exporter/http/metrics_cache.h"
#include "tests/support/snapshot_at_address.h"

namespace pglock {
namespace {

TEST(AcceptsGzipTest, Tokens) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("GZip"));
  EXPECT_TRUE(AcceptsGzip("x-gzip"));
  EXPECT_TRUE(AcceptsGzip("deflate, gzip"));
  EXPECT_TRUE(AcceptsGzip("gzip, deflate, br"));  // curl --compressed
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_TRUE(AcceptsGzip(" br ,\tgzip ; q=0.5 "));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("deflate, br"));
  EXPECT_FALSE(AcceptsGzip("gzipped"));
  EXPECT_FALSE(AcceptsGzip("x-gzip2, gzi"));
  EXPECT_FALSE(AcceptsGzip(",,"));
}

TEST(AcceptsGzipTest, Weights) {
  EXPECT_TRUE(AcceptsGzip("gzip;q=1"));
  EXPECT_TRUE(AcceptsGzip("gzip;q=1.000"));
  EXPECT_TRUE(AcceptsGzip("gzip;q=0.001"));
  EXPECT_TRUE(AcceptsGzip("gzip; Q=0.5"));
  EXPECT_TRUE(AcceptsGzip("gzip;level=9;q=0.2"));  // unknown parameters are ignored
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0.000"));
  EXPECT_FALSE(AcceptsGzip("gzip ; q=0.0"));
  // An explicit refusal wins over "*".
  EXPECT_FALSE(AcceptsGzip("*, gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0, *"));
  EXPECT_TRUE(AcceptsGzip("*;q=0.1, identity"));
  EXPECT_FALSE(AcceptsGzip("*;q=0"));
  EXPECT_TRUE(AcceptsGzip("*;q=0, gzip"));
  // Malformed weights do not accept.
  EXPECT_FALSE(AcceptsGzip("gzip;q=2"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=1.5"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0.0001"));
  EXPECT_FALSE(AcceptsGzip("gzip;q="));
  EXPECT_FALSE(AcceptsGzip("gzip;q=yes"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=-1"));
}

std::string Gunzip(const std::string& in) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[4096];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&zs);
  return out;
}

TEST(GzipCompressTest, RoundTrips) {
  std::string text;
  for (int i = 0; i < 5000; ++i) {
    text += "pglock_up{target=\"t" + std::to_string(i % 7) + "\"} 1\n";
  }
  std::string gz;
  ASSERT_TRUE(GzipCompress(text, &gz));
  EXPECT_LT(gz.size(), text.size() / 10);
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic, not a zlib header
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_EQ(Gunzip(gz), text);
  ASSERT_TRUE(GzipCompress("", &gz));
  EXPECT_EQ(Gunzip(gz), "");
}

std::shared_ptr<const TargetSnapshot> Snap() { return std::make_shared<TargetSnapshot>(); }

TEST(MetricsCacheTest, RendersAndCompressesOncePerSnapshotSet) {
  MetricsCache cache;
  int calls = 0;
  const auto render = [&] { return "body " + std::to_string(++calls) + "\n"; };
  const MetricsCache::Key first = {Snap(), Snap()};

  const auto plain = cache.Plain(first, render);
  EXPECT_EQ(*plain, "body 1\n");
  EXPECT_EQ(cache.compressions(), 0u);  // lazily: no gzip until a client asks for it
  const auto gz = cache.Gzip(first, render);
  ASSERT_NE(gz, nullptr);
  EXPECT_EQ(Gunzip(*gz), "body 1\n");
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(cache.Gzip(first, render), gz);  // the same bytes, not a new compression
    EXPECT_EQ(cache.Plain(first, render), plain);
  }
  EXPECT_EQ(cache.renders(), 1u);
  EXPECT_EQ(cache.compressions(), 1u);

  // A new snapshot of one target: rendered and compressed again, once.
  const MetricsCache::Key second = {first[0], Snap()};
  const auto gz2 = cache.Gzip(second, render);
  ASSERT_NE(gz2, nullptr);
  EXPECT_EQ(Gunzip(*gz2), "body 2\n");
  EXPECT_EQ(*cache.Plain(second, render), "body 2\n");
  EXPECT_EQ(cache.Gzip(second, render), gz2);
  EXPECT_EQ(cache.renders(), 2u);
  EXPECT_EQ(cache.compressions(), 2u);

  // Plain scrapes of a third set never compress.
  const MetricsCache::Key third = {Snap()};
  EXPECT_EQ(*cache.Plain(third, render), "body 3\n");
  EXPECT_EQ(cache.compressions(), 2u);
}

// The text stays for the next scrape; the snapshots it was rendered from do not: the cache never
// keeps a poll's views alive after the poller has replaced them.
TEST(MetricsCacheTest, KeepsTheTextNotTheSnapshots) {
  MetricsCache cache;
  int calls = 0;
  const auto render = [&] { return "body " + std::to_string(++calls) + "\n"; };
  MetricsCache::Key key = {Snap()};
  const std::weak_ptr<const TargetSnapshot> snapshot = key[0];
  const auto plain = cache.Plain(key, render);
  key.clear();
  EXPECT_TRUE(snapshot.expired());
  EXPECT_EQ(*plain, "body 1\n");
  // The next set is rendered anew, even with its snapshot where the freed one was.
  auto first = SnapshotAtFixedAddress();
  const void* const address = first.get();
  EXPECT_EQ(*cache.Plain({first}, render), "body 2\n");
  first.reset();
  const auto second = SnapshotAtFixedAddress();
  ASSERT_EQ(static_cast<const void*>(second.get()), address);
  EXPECT_EQ(*cache.Plain({second}, render), "body 3\n");
  EXPECT_EQ(cache.renders(), 3u);
}

}  // namespace
}  // namespace pglock
