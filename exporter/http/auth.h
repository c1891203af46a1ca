// HTTP basic auth against bcrypt hashes ([web.basic_auth_users]), verified with libxcrypt.
// Verified credentials are remembered (bounded) so a scrape does not pay bcrypt's cost each time.
// Thread-safe.
#pragma once

#include <map>
#include <set>
#include <string>

#include "exporter/util/thread_annotations.h"

namespace pglock {

class BasicAuth {
 public:
  explicit BasicAuth(std::map<std::string, std::string> users) : users_(std::move(users)) {}

  bool enabled() const { return !users_.empty(); }

  // `header` is the Authorization header value (nullptr when absent).
  bool Check(const char* header) EXCLUDES(mu_);

 private:
  static constexpr size_t kMaxCached = 64;
  const std::map<std::string, std::string> users_;  // user -> bcrypt hash
  Mutex mu_;
  std::set<std::string> verified_ GUARDED_BY(mu_);  // header values that passed
};

// Decodes standard base64; false on invalid input.
bool DecodeBase64(const std::string& in, std::string* out);

// Compares without an early exit on the first difference.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace pglock
