#include "exporter/snapshot/lock_names.h"

namespace pglock {

void AddBigintName(int64_t key, const std::string& name, LockNames* names) {
  const auto u = static_cast<uint64_t>(key);
  (*names)[{static_cast<uint32_t>(u >> 32), static_cast<uint32_t>(u & 0xffffffffu), 1}] = name;
}

void AddPairName(int32_t key1, int32_t key2, const std::string& name, LockNames* names) {
  (*names)[{static_cast<uint32_t>(key1), static_cast<uint32_t>(key2), 2}] = name;
}

std::string LockLabel(const AdvisoryKey& key, const LockNames* names) {
  if (names != nullptr) {
    const auto it = names->find({key.classid, key.objid, key.objsubid});
    if (it != names->end()) return it->second;
  }
  return RenderAdvisoryKey(key);
}

std::string CounterLockLabel(const AdvisoryKey& key, const LockNames* names) {
  if (names != nullptr && names->count({key.classid, key.objid, key.objsubid}) != 0) {
    return LockLabel(key, names);
  }
  return "unnamed";
}

}  // namespace pglock
