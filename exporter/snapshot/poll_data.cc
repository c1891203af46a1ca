#include "exporter/snapshot/poll_data.h"

#include <charconv>

namespace pglock {

std::string RenderAdvisoryKey(const AdvisoryKey& key) {
  if (key.objsubid == 2) {
    return std::to_string(static_cast<int32_t>(key.classid)) + ":" +
           std::to_string(static_cast<int32_t>(key.objid));
  }
  const uint64_t u = (static_cast<uint64_t>(key.classid) << 32) | key.objid;
  return std::to_string(static_cast<int64_t>(u));
}

std::vector<int> ParsePidList(std::string_view text) {
  std::vector<int> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    int pid = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), pid);
    if (ec == std::errc() && end == part.data() + part.size()) out.push_back(pid);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace pglock
