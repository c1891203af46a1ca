// Pure helpers of the HTTP side and of what it shows: basic auth, listening ports, HTML and JSON
// escaping, conninfo masking, SQL templates.
#include "exporter/http/auth.h"

#include <crypt.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "exporter/http/server.h"
#include "exporter/log.h"
#include "exporter/pg/batch.h"
#include "exporter/pg/conninfo.h"

namespace pglock {
namespace {

std::string EncodeBase64(const std::string& in) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t n = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

// A real bcrypt hash at cost 5, so the tests stay fast.
std::string Bcrypt(const std::string& password) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", 5, nullptr, 0, setting, sizeof setting) == nullptr) return "";
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* hash = crypt_r(password.c_str(), setting, data.get());
  return hash != nullptr && hash[0] != '*' ? hash : "";
}

std::string BasicHeader(const std::string& user, const std::string& password) {
  return "Basic " + EncodeBase64(user + ":" + password);
}

// ---- Base64 and comparison ------------------------------------------------------------------

TEST(DecodeBase64Test, DecodesWithAndWithoutPadding) {
  std::string out;
  ASSERT_TRUE(DecodeBase64("", &out));
  EXPECT_EQ(out, "");
  ASSERT_TRUE(DecodeBase64("Zm9v", &out));
  EXPECT_EQ(out, "foo");
  ASSERT_TRUE(DecodeBase64("Zm9vYg==", &out));
  EXPECT_EQ(out, "foob");
  ASSERT_TRUE(DecodeBase64("Zm9vYmE=", &out));
  EXPECT_EQ(out, "fooba");
  ASSERT_TRUE(DecodeBase64("Zm9vYg", &out));
  EXPECT_EQ(out, "foob");
  ASSERT_TRUE(DecodeBase64("AP8+/w==", &out));
  EXPECT_EQ(out, std::string("\x00\xFF\x3E\xFF", 4));
}

TEST(DecodeBase64Test, RoundTripsBinary) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t len : {0u, 1u, 2u, 3u, 4u, 255u, 256u}) {
    std::string out;
    ASSERT_TRUE(DecodeBase64(EncodeBase64(all.substr(0, len)), &out)) << len;
    EXPECT_EQ(out, all.substr(0, len));
  }
}

TEST(DecodeBase64Test, RejectsInvalidInput) {
  std::string out;
  EXPECT_FALSE(DecodeBase64("Zm9v!", &out));
  EXPECT_FALSE(DecodeBase64("Zm 9v", &out));
  EXPECT_FALSE(DecodeBase64("Zm9v\n", &out));
  EXPECT_FALSE(DecodeBase64("Zm-_", &out));  // URL-safe alphabet is not basic auth's
  EXPECT_FALSE(DecodeBase64("Zg==Zg==", &out));
  EXPECT_FALSE(DecodeBase64("Zg===", &out));
}

TEST(ConstantTimeEqualsTest, ComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "Secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("secret2", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

// ---- BasicAuth ------------------------------------------------------------------------------

class BasicAuthTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    hash_ = new std::string(Bcrypt("s3cret:with colon"));
    other_hash_ = new std::string(Bcrypt("other"));
  }
  static void TearDownTestSuite() {
    delete hash_;
    delete other_hash_;
  }
  static std::string* hash_;
  static std::string* other_hash_;
};
std::string* BasicAuthTest::hash_ = nullptr;
std::string* BasicAuthTest::other_hash_ = nullptr;

TEST_F(BasicAuthTest, GeneratedHashLooksLikeBcrypt) {
  ASSERT_EQ(hash_->size(), 60u) << *hash_;
  EXPECT_EQ(hash_->rfind("$2b$05$", 0), 0u);
}

TEST_F(BasicAuthTest, RightPasswordPasses) {
  BasicAuth auth({{"prometheus", *hash_}, {"grafana", *other_hash_}});
  EXPECT_TRUE(auth.enabled());
  EXPECT_TRUE(auth.Check(BasicHeader("prometheus", "s3cret:with colon").c_str()));
  EXPECT_TRUE(auth.Check(BasicHeader("grafana", "other").c_str()));
  // Again, now from the cache.
  EXPECT_TRUE(auth.Check(BasicHeader("prometheus", "s3cret:with colon").c_str()));
}

TEST_F(BasicAuthTest, WrongPasswordFails) {
  BasicAuth auth({{"prometheus", *hash_}, {"grafana", *other_hash_}});
  EXPECT_TRUE(auth.Check(BasicHeader("prometheus", "s3cret:with colon").c_str()));
  EXPECT_FALSE(auth.Check(BasicHeader("prometheus", "s3cret").c_str()));
  EXPECT_FALSE(auth.Check(BasicHeader("prometheus", "").c_str()));
  // Another user's password does not work.
  EXPECT_FALSE(auth.Check(BasicHeader("prometheus", "other").c_str()));
  EXPECT_FALSE(auth.Check(BasicHeader("grafana", "s3cret:with colon").c_str()));
}

TEST_F(BasicAuthTest, UnknownUserFailsEvenWithAKnownPassword) {
  BasicAuth auth({{"prometheus", *hash_}});
  EXPECT_FALSE(auth.Check(BasicHeader("admin", "s3cret:with colon").c_str()));
  EXPECT_FALSE(auth.Check(BasicHeader("", "s3cret:with colon").c_str()));
  EXPECT_FALSE(auth.Check(BasicHeader("Prometheus", "s3cret:with colon").c_str()));
}

TEST_F(BasicAuthTest, MalformedHeadersFail) {
  BasicAuth auth({{"prometheus", *hash_}});
  const std::string good = EncodeBase64("prometheus:s3cret:with colon");
  for (const std::string& header :
       {std::string(""), std::string("Basic"), std::string("Basic "), "Bearer " + good,
        "Basic  " + good, "Basic " + good + "!", std::string("Basic !!!!"),
        "Basic " + EncodeBase64("prometheus"), "Digest " + good, good}) {
    EXPECT_FALSE(auth.Check(header.c_str())) << header;
  }
}

TEST_F(BasicAuthTest, MissingHeaderFails) {
  BasicAuth auth({{"prometheus", *hash_}});
  EXPECT_FALSE(auth.Check(nullptr));
}

TEST(BasicAuthNoUsersTest, AlwaysPasses) {
  BasicAuth auth(std::map<std::string, std::string>{});
  EXPECT_FALSE(auth.enabled());
  EXPECT_TRUE(auth.Check(nullptr));
  EXPECT_TRUE(auth.Check("Basic !!!"));
  EXPECT_TRUE(auth.Check(BasicHeader("anyone", "anything").c_str()));
}

TEST(BasicAuthBadHashTest, ConfiguredGarbageNeverPasses) {
  // Config validation rejects this; the check must still fail closed.
  BasicAuth auth(std::map<std::string, std::string>{{"prometheus", "not-a-hash"}});
  EXPECT_FALSE(auth.Check(BasicHeader("prometheus", "not-a-hash").c_str()));
  EXPECT_FALSE(auth.Check(BasicHeader("prometheus", "").c_str()));
}

// ---- Listening ports and HTML ---------------------------------------------------------------

TEST(CivetListeningPortsTest, Forms) {
  // ":PORT" is every address: one dual-stack socket where IPv6 works, else IPv4 only.
  EXPECT_EQ(CivetListeningPorts(":9716", false, true), "+9716");
  EXPECT_EQ(CivetListeningPorts(":9716", false, false), "9716");
  EXPECT_EQ(CivetListeningPorts(":9716", true, true), "+9716s");
  EXPECT_EQ(CivetListeningPorts(":9716", true, false), "9716s");
  // Anything else as written.
  EXPECT_EQ(CivetListeningPorts("127.0.0.1:9716", false, true), "127.0.0.1:9716");
  EXPECT_EQ(CivetListeningPorts("127.0.0.1:443", true, false), "127.0.0.1:443s");
  EXPECT_EQ(CivetListeningPorts("0.0.0.0:9716", false, true), "9716");
  EXPECT_EQ(CivetListeningPorts("[::1]:9716", false, true), "[::1]:9716");
  EXPECT_EQ(CivetListeningPorts("[::]:9716", true, true), "[::]:9716s");
  // An IPv6 address cannot be served without IPv6.
  EXPECT_EQ(CivetListeningPorts("[::1]:9716", false, false), "");
}

TEST(HtmlEscapeTest, EscapesMarkupCharacters) {
  EXPECT_EQ(HtmlEscape("plain /metrics"), "plain /metrics");
  EXPECT_EQ(HtmlEscape("<script>alert('x&y')</script>"),
            "&lt;script&gt;alert(&#39;x&amp;y&#39;)&lt;/script&gt;");
  EXPECT_EQ(HtmlEscape("a=\"b\""), "a=&quot;b&quot;");
  EXPECT_EQ(HtmlEscape("&amp;"), "&amp;amp;");
  EXPECT_EQ(HtmlEscape("\xC3\xA9"), "\xC3\xA9");
}

// ---- JSON log escaping ----------------------------------------------------------------------

TEST(JsonEscapeTest, EscapesQuotesBackslashesAndWhitespace) {
  EXPECT_EQ(JsonEscape("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(JsonEscape("C:\\path"), "C:\\\\path");
  EXPECT_EQ(JsonEscape("a\nb\rc\td"), "a\\nb\\rc\\td");
}

TEST(JsonEscapeTest, EscapesControlBytes) {
  EXPECT_EQ(JsonEscape(std::string("\x00\x01\x1F\x7F", 4)), "\\u0000\\u0001\\u001f\\u007f");
  EXPECT_EQ(JsonEscape("\x1B[0m"), "\\u001b[0m");
}

TEST(JsonEscapeTest, ReplacesInvalidUtf8AndKeepsValid) {
  EXPECT_EQ(JsonEscape("caf\xC3\xA9 \xE2\x9C\x93"), "caf\xC3\xA9 \xE2\x9C\x93");
  EXPECT_EQ(JsonEscape("bad\xFF"), "bad\xEF\xBF\xBD");
  EXPECT_EQ(JsonEscape("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(JsonEscapeTest, OutputHasNoRawControlBytes) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  const std::string out = JsonEscape(all);
  for (char c : out) {
    const auto b = static_cast<unsigned char>(c);
    EXPECT_FALSE(b < 0x20 || b == 0x7F) << static_cast<int>(b);
  }
  // Every quote is escaped: none closes the JSON string early.
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '"') {
      size_t backslashes = 0;
      for (size_t j = i; j > 0 && out[j - 1] == '\\'; --j) ++backslashes;
      EXPECT_EQ(backslashes % 2, 1u) << i;
    }
  }
}

// ---- Conninfo -------------------------------------------------------------------------------

TEST(MaskConninfoTest, HidesPasswordInKeyValueForm) {
  const std::string masked =
      MaskConninfo("host=db.example port=5433 dbname=app user=u password=hunter2");
  EXPECT_EQ(masked.find("hunter2"), std::string::npos) << masked;
  EXPECT_NE(masked.find("password=******"), std::string::npos) << masked;
  EXPECT_NE(masked.find("host=db.example"), std::string::npos) << masked;
  EXPECT_NE(masked.find("port=5433"), std::string::npos) << masked;
  EXPECT_NE(masked.find("dbname=app"), std::string::npos) << masked;
  EXPECT_NE(masked.find("user=u"), std::string::npos) << masked;
}

TEST(MaskConninfoTest, HidesPasswordInUriForm) {
  const std::string uri = "postgresql://u:hunter2@db.example:5433/app?sslmode=require";
  const std::string masked = MaskConninfo(uri);
  EXPECT_EQ(masked.find("hunter2"), std::string::npos) << masked;
  EXPECT_NE(masked.find("password=******"), std::string::npos) << masked;
  EXPECT_NE(masked.find("host=db.example"), std::string::npos) << masked;
  EXPECT_NE(masked.find("port=5433"), std::string::npos) << masked;
  EXPECT_NE(masked.find("dbname=app"), std::string::npos) << masked;
  EXPECT_NE(masked.find("sslmode=require"), std::string::npos) << masked;
  // Percent-encoded passwords too, in either form.
  const std::string encoded = MaskConninfo("postgresql://u:hun%74er2@db/app");
  EXPECT_EQ(encoded.find("hunter2"), std::string::npos) << encoded;
  EXPECT_EQ(encoded.find("hun%74er2"), std::string::npos) << encoded;
}

TEST(MaskConninfoTest, HidesOtherSecrets) {
  const std::string masked = MaskConninfo("host=db sslpassword=keypass password='quoted secret'");
  EXPECT_EQ(masked.find("keypass"), std::string::npos) << masked;
  EXPECT_EQ(masked.find("quoted secret"), std::string::npos) << masked;
}

TEST(MaskConninfoTest, NeverEchoesRawInput) {
  EXPECT_EQ(MaskConninfo(""), "(libpq defaults)");
  EXPECT_EQ(MaskConninfo("password=hunter2 bogus_option=1"), "(invalid connection string)");
  EXPECT_EQ(MaskConninfo("host='hunter2"), "(invalid connection string)");
  EXPECT_EQ(MaskConninfo("postgresql://u:hunter2@[::1/app"), "(invalid connection string)");
  const std::string input = "host=db dbname=app";
  const std::string masked = MaskConninfo(input);
  EXPECT_NE(masked.find("host=db"), std::string::npos);
  EXPECT_NE(masked.find("dbname=app"), std::string::npos);
}

TEST(ConninfoHasPasswordTest, DetectsPasswords) {
  EXPECT_TRUE(ConninfoHasPassword("host=db password=x"));
  EXPECT_TRUE(ConninfoHasPassword("postgresql://u:x@db/app"));
  EXPECT_TRUE(ConninfoHasPassword("postgresql://u@db/app?password=x"));
  EXPECT_FALSE(ConninfoHasPassword("host=db user=u"));
  EXPECT_FALSE(ConninfoHasPassword("postgresql://u@db/app"));
  EXPECT_FALSE(ConninfoHasPassword("host=db password=''"));
  EXPECT_FALSE(ConninfoHasPassword(""));
  EXPECT_FALSE(ConninfoHasPassword("password=x bogus_option=1"));  // unparsable
  // A passfile is not a password in the string.
  EXPECT_FALSE(ConninfoHasPassword("host=db passfile=/etc/pgpass"));
}

TEST(ValidateConninfoTest, ExplainsWithoutEchoingSecrets) {
  std::string why;
  EXPECT_TRUE(ValidateConninfo("host=db dbname=app", &why));
  EXPECT_TRUE(ValidateConninfo("postgresql:///app?host=/var/run/postgresql", &why));
  EXPECT_TRUE(ValidateConninfo("", &why));

  for (const char* bad :
       {"host=db bogus_option=hunter2", "host=db password=hunter2 hunter2",
        "postgresql://u:hunter2@[::1/app", "postgresql://u:hunter2%zz@db/app",
        "postgresql://u@db/app?hunter2", "postgresql://u@db/app?hunter2=1", "host='hunter2"}) {
    why.clear();
    EXPECT_FALSE(ValidateConninfo(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
    EXPECT_EQ(why.find("hunter2"), std::string::npos) << bad << " -> " << why;
    EXPECT_NE(why.back(), '\n');
  }
}

TEST(ValidateConninfoTest, KeepsLibpqKeywordsAndPunctuationInTheMessage) {
  std::string why;
  EXPECT_FALSE(ValidateConninfo("postgresql://db/app?sslmode", &why));
  EXPECT_NE(why.find("\"sslmode\""), std::string::npos) << why;
  EXPECT_FALSE(ValidateConninfo("host=db dbname", &why));
  EXPECT_NE(why.find("\"=\""), std::string::npos) << why;
}

// ---- SQL templates --------------------------------------------------------------------------

TEST(FillTemplateTest, ReplacesEveryOccurrence) {
  EXPECT_EQ(FillTemplate("SET LOCAL statement_timeout = {ms}; SELECT {ms}, {other}",
                         {{"ms", "3000"}, {"other", "1"}}),
            "SET LOCAL statement_timeout = 3000; SELECT 3000, 1");
}

TEST(FillTemplateTest, LeavesUnknownPlaceholdersAndBraces) {
  EXPECT_EQ(FillTemplate("SELECT '{}' , {missing}, {ms", {{"ms", "1"}}),
            "SELECT '{}' , {missing}, {ms");
  EXPECT_EQ(FillTemplate("no placeholders", {}), "no placeholders");
}

TEST(FillTemplateTest, ValueContainingItsPlaceholderIsNotRescanned) {
  EXPECT_EQ(FillTemplate("{a}-{a}", {{"a", "{a}{a}"}}), "{a}{a}-{a}{a}");
  EXPECT_EQ(FillTemplate("{a}", {{"a", ""}}), "");
}

}  // namespace
}  // namespace pglock
