#include "exporter/snapshot/poll_data.h"

namespace pglock {

std::string RenderAdvisoryKey(const AdvisoryKey& key) {
  if (key.objsubid == 2) {
    return std::to_string(static_cast<int32_t>(key.classid)) + ":" +
           std::to_string(static_cast<int32_t>(key.objid));
  }
  const uint64_t u = (static_cast<uint64_t>(key.classid) << 32) | key.objid;
  return std::to_string(static_cast<int64_t>(u));
}

}  // namespace pglock
