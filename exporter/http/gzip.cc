#include "exporter/http/gzip.h"

#include <zlib.h>

#include <limits>
#include <optional>

namespace pglock {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ); in thousandths, or nullopt.
std::optional<int> ParseQvalue(std::string_view q) {
  if (q.empty() || (q[0] != '0' && q[0] != '1')) return std::nullopt;
  int value = (q[0] - '0') * 1000;
  if (q.size() == 1) return value;
  if (q[1] != '.' || q.size() > 5) return std::nullopt;
  int scale = 100;
  for (char c : q.substr(2)) {
    if (c < '0' || c > '9') return std::nullopt;
    value += (c - '0') * scale;
    scale /= 10;
  }
  if (value > 1000) return std::nullopt;
  return value;
}

struct Coding {
  std::string_view name;
  std::optional<int> weight;  // thousandths; nullopt when malformed
};

// One element of the list: "coding *( OWS ; OWS param )". Only q is defined for
// Accept-Encoding; other parameters are ignored.
Coding ParseElement(std::string_view element) {
  const auto semi = element.find(';');
  Coding coding{Trim(element.substr(0, semi)), 1000};
  std::string_view rest = semi == std::string_view::npos ? "" : element.substr(semi + 1);
  while (!rest.empty()) {
    const auto next = rest.find(';');
    const std::string_view param = Trim(rest.substr(0, next));
    rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
    const auto eq = param.find('=');
    if (eq != std::string_view::npos && EqualsIgnoreCase(Trim(param.substr(0, eq)), "q")) {
      coding.weight = ParseQvalue(Trim(param.substr(eq + 1)));
    }
  }
  return coding;
}

}  // namespace

bool AcceptsGzip(std::string_view accept_encoding) {
  std::optional<int> gzip_weight;  // from a "gzip" or "x-gzip" element
  std::optional<int> any_weight;   // from "*"
  while (!accept_encoding.empty()) {
    const auto comma = accept_encoding.find(',');
    const Coding c = ParseElement(accept_encoding.substr(0, comma));
    accept_encoding = comma == std::string_view::npos ? "" : accept_encoding.substr(comma + 1);
    if (c.name.empty()) continue;
    const int weight = c.weight.value_or(0);  // a malformed weight does not accept
    if (EqualsIgnoreCase(c.name, "gzip") || EqualsIgnoreCase(c.name, "x-gzip")) {
      gzip_weight = weight;
    } else if (c.name == "*") {
      any_weight = weight;
    }
  }
  if (gzip_weight) return *gzip_weight > 0;
  return any_weight.value_or(0) > 0;
}

bool GzipCompress(std::string_view text, std::string* out) {
  if (text.size() > std::numeric_limits<uInt>::max()) return false;
  z_stream zs{};
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return false;
  }
  out->resize(deflateBound(&zs, text.size()));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out->data());
  zs.avail_out = static_cast<uInt>(out->size());
  // deflateBound is enough for one Z_FINISH call.
  const int rc = deflate(&zs, Z_FINISH);
  out->resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

}  // namespace pglock
