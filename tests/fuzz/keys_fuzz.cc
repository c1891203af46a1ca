// Advisory key rendering: every (classid, objid, objsubid) renders, and a configured name added
// with the same key value is found again by LockLabel.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/lock_names.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  int64_t key = 0;
  std::memcpy(&key, data, 8);
  pglock::LockNames names;
  pglock::AddBigintName(key, "big", &names);
  const auto u = static_cast<uint64_t>(key);
  pglock::AdvisoryKey k{0, static_cast<uint32_t>(u >> 32), static_cast<uint32_t>(u), 1};
  if (pglock::RenderAdvisoryKey(k) != std::to_string(key)) std::abort();
  if (pglock::LockLabel(k, &names) != "big") std::abort();
  int32_t k1 = 0, k2 = 0;
  std::memcpy(&k1, data, 4);
  std::memcpy(&k2, data + 4, 4);
  pglock::AdvisoryKey pair{0, static_cast<uint32_t>(k1), static_cast<uint32_t>(k2), 2};
  if (pglock::RenderAdvisoryKey(pair) != std::to_string(k1) + ":" + std::to_string(k2)) {
    std::abort();
  }
  return 0;
}
