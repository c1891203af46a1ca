#include "exporter/http/auth.h"

#include <crypt.h>

#include <cstring>
#include <memory>

namespace pglock {

bool DecodeBase64(const std::string& in, std::string* out) {
  out->clear();
  uint32_t buf = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : in) {
    int v = -1;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == '=') {
      ++pad;
      continue;
    } else {
      return false;
    }
    if (pad > 0) return false;  // data after padding
    buf = (buf << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((buf >> bits) & 0xFF));
    }
  }
  return pad <= 2;
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool BasicAuth::Check(const char* header) {
  if (users_.empty()) return true;
  if (header == nullptr) return false;
  const std::string value = header;
  const std::string prefix = "Basic ";
  if (value.size() <= prefix.size() || value.compare(0, prefix.size(), prefix) != 0) return false;
  {
    MutexLock lock(&mu_);
    if (verified_.count(value) != 0) return true;
  }
  std::string decoded;
  if (!DecodeBase64(value.substr(prefix.size()), &decoded)) return false;
  const auto colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  const std::string user = decoded.substr(0, colon), password = decoded.substr(colon + 1);
  const auto it = users_.find(user);
  // An unknown user still pays for one hash, so timing does not reveal which users exist.
  const std::string& hash = it != users_.end() ? it->second : users_.begin()->second;
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* computed = crypt_r(password.c_str(), hash.c_str(), data.get());
  const bool ok = it != users_.end() && computed != nullptr && computed[0] != '*' &&
                  ConstantTimeEquals(computed, hash);
  if (ok) {
    MutexLock lock(&mu_);
    if (verified_.size() >= kMaxCached) verified_.clear();
    verified_.insert(value);
  }
  return ok;
}

}  // namespace pglock
