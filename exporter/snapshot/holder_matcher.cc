#include "exporter/snapshot/holder_matcher.h"

namespace pglock {

HolderMatcher::HolderMatcher(const std::string& pattern) {
  if (!pattern.empty()) compiled_ = regcomp(&re_, pattern.c_str(), REG_EXTENDED) == 0;
}

HolderMatcher::~HolderMatcher() {
  if (compiled_) regfree(&re_);
}

std::optional<std::vector<std::string>> HolderMatcher::Match(const std::string& holder) const {
  if (!compiled_) return std::nullopt;
  // PostgreSQL text never holds NUL, but cut at one anyway: regexec reads a C string.
  std::string input = holder.substr(0, kMaxInput);
  if (const auto nul = input.find('\0'); nul != std::string::npos) input.resize(nul);
  std::vector<regmatch_t> m(re_.re_nsub + 1);
  if (regexec(&re_, input.c_str(), m.size(), m.data(), 0) != 0) return std::nullopt;
  std::vector<std::string> out;
  for (size_t i = 1; i < m.size(); ++i) {
    if (m[i].rm_so < 0) {
      out.emplace_back();
    } else {
      out.push_back(input.substr(static_cast<size_t>(m[i].rm_so),
                                 static_cast<size_t>(m[i].rm_eo - m[i].rm_so)));
    }
  }
  return out;
}

}  // namespace pglock
