#include "exporter/snapshot/analyze.h"

#include <chrono>

#include "exporter/collectors/registry.h"

namespace pglock {

std::string LockLabel(const AdvisoryKey& key, const LockNames* names) {
  if (names != nullptr) {
    const auto it = names->find({key.classid, key.objid, key.objsubid});
    if (it != names->end()) return it->second;
  }
  return RenderAdvisoryKey(key);
}

TargetView Analyze(const PollData& data, const AnalyzeOptions& options, HoldHistory* history,
                   std::map<std::string, int64_t>* dropped, std::vector<double>* build_seconds) {
  TargetView view;
  view.inventory = data.inventory;
  const PollIndex index(data);
  const ViewContext ctx{&options, &index, static_cast<size_t>(std::max(options.top_n, 1)), history,
                        dropped};
  if (build_seconds != nullptr) build_seconds->clear();
  for (const Collector* c : Collectors()) {
    const auto started = std::chrono::steady_clock::now();
    c->BuildView(data, ctx, &view);
    if (build_seconds != nullptr) {
      build_seconds->push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
  }
  return view;
}

}  // namespace pglock
