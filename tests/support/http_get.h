// A GET through curl, for tests that talk to the exporter's real HTTP server.
#pragma once

#include <unistd.h>

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

// The python3 the tests start: Debian's where it is. A version manager's shim first on PATH
// (pyenv's is a chain of bash scripts) took 2.5 s a start on a loaded machine, against 0.2 s for
// the interpreter itself, and some tests start it dozens of times.
inline std::string Python3() {
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

// Whether `text` parses as JSON (python3's json module).
inline bool ValidJson(const std::string& text) {
  FILE* p = popen((Python3() + " -c 'import json,sys; json.load(sys.stdin)'").c_str(), "w");
  if (p == nullptr) return false;
  fwrite(text.data(), 1, text.size(), p);
  return pclose(p) == 0;
}

}  // namespace pglock::testing
