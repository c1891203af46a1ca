// Any bytes as a config file: ParseConfigText must return (valid or errors), never crash, hang or
// throw, and every error must name the file.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "exporter/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pglock::Config config;
  std::vector<pglock::ConfigError> errors;
  const bool ok = pglock::ParseConfigText(text, "fuzz.toml", &config, &errors);
  if (ok != errors.empty()) std::abort();
  for (const auto& e : errors) {
    if (e.file != "fuzz.toml" || e.ToString().empty()) std::abort();
  }
  return 0;
}
