// Holder matching: the first line of the input is a pattern, the rest a holder (up to any length).
// Matching must not crash or stall whatever both hold.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "exporter/config/holder_matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto nl = input.find('\n');
  const std::string pattern = nl == std::string::npos ? "^([^:]+):([0-9]+):" : input.substr(0, nl);
  const std::string holder = nl == std::string::npos ? input : input.substr(nl + 1);
  size_t groups = 0;
  std::string why;
  // Only patterns the config accepts reach a matcher.
  if (!pglock::ValidateHolderPattern(pattern, &groups, &why)) return 0;
  pglock::HolderMatcher matcher(pattern);
  if (matcher.groups() != groups) std::abort();
  if (const auto parts = matcher.Match(holder)) {
    if (parts->size() != matcher.groups()) std::abort();
    for (const auto& p : *parts) {
      if (p.size() > pglock::HolderMatcher::kMaxInput) std::abort();
    }
  }
  return 0;
}
