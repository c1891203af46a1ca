// A GET through curl, for tests that talk to the exporter's real HTTP server.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace pglock::testing {

struct HttpResponse {
  int code = 0;  // 0: no answer
  std::string body;
};

// `url` must not hold a single quote. Gives up after `max_seconds`.
inline HttpResponse HttpGet(const std::string& url, int max_seconds = 5) {
  HttpResponse r;
  FILE* p = popen(
      ("curl -s --max-time " + std::to_string(max_seconds) + " -w '\\n%{http_code}' '" + url + "'")
          .c_str(),
      "r");
  char buf[4096];
  size_t n = 0;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) r.body.append(buf, n);
  if (p != nullptr) pclose(p);
  const auto nl = r.body.rfind('\n');
  if (nl != std::string::npos) {
    r.code = std::atoi(r.body.c_str() + nl + 1);
    r.body.resize(nl);
  }
  return r;
}

// Whether `text` parses as JSON (python3's json module).
inline bool ValidJson(const std::string& text) {
  FILE* p = popen("python3 -c 'import json,sys; json.load(sys.stdin)'", "w");
  if (p == nullptr) return false;
  fwrite(text.data(), 1, text.size(), p);
  return pclose(p) == 0;
}

}  // namespace pglock::testing
