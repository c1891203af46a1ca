// The node_modules of the npm packages the integration tests run (lock libraries, migration
// tools), installed by scripts/lib/lock_libraries.sh; for NODE_PATH.
#pragma once

#include <cstdio>
#include <string>

#include "tests/support/build_paths.h"

namespace pglock::testing {

// "" when the install failed: its error is on stderr.
inline std::string LockLibrariesPath() {
  static const std::string path = [] {
    FILE* p = popen((SourceDir() + "/scripts/lib/lock_libraries.sh").c_str(), "r");
    if (p == nullptr) return std::string();
    char line[4096] = {};
    const bool read = std::fgets(line, sizeof line, p) != nullptr;
    const int status = pclose(p);
    std::string out = read && status == 0 ? line : "";
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }();
  return path;
}

}  // namespace pglock::testing
