#include "exporter/config/holder_matcher.h"

namespace pglock {

bool ValidateHolderPattern(const std::string& pattern, size_t* groups, std::string* why) {
  if (pattern.size() > kMaxHolderPatternBytes) {
    *why = "longer than " + std::to_string(kMaxHolderPatternBytes) + " bytes";
    return false;
  }
  auto quantifier = [](char c) { return c == '*' || c == '+' || c == '?' || c == '{'; };
  bool in_bracket = false;
  size_t bracket_first = 0;  // index of the first character inside the bracket expression
  char prev = 0;             // last significant character outside a bracket expression
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (in_bracket) {
      if (c == '[' && i + 1 < pattern.size() &&
          (pattern[i + 1] == ':' || pattern[i + 1] == '.' || pattern[i + 1] == '=')) {
        // "[:alpha:]", "[.x.]", "[=e=]" inside a bracket: skip to their closing "x]".
        const size_t close = pattern.find(std::string(1, pattern[i + 1]) + "]", i + 2);
        if (close != std::string::npos) i = close + 1;
      } else if (i == bracket_first && c == '^') {
        ++bracket_first;  // "[^]...]": the ']' after '^' is a literal too
      } else if (c == ']' && i != bracket_first) {
        in_bracket = false;
        prev = ']';
      }
      continue;
    }
    if (c == '\\' && i + 1 < pattern.size()) {
      prev = 'x';  // an escaped character is an atom
      ++i;
      continue;
    }
    if (c == '[') {
      in_bracket = true;
      bracket_first = i + 1;
      continue;
    }
    if (quantifier(c) && (quantifier(prev) || prev == '}')) {
      *why = "stacked quantifiers (\"" + std::string(1, prev) + std::string(1, c) +
             "\") are not allowed";
      return false;
    }
    prev = c;
    if (c == '{') {
      // Skip the bound: "{m,n}" counts as one quantifier ending in '}'.
      const size_t close = pattern.find('}', i);
      if (close != std::string::npos) {
        i = close;
        prev = '}';
      }
    }
  }
  regex_t re;
  const int rc = regcomp(&re, pattern.c_str(), REG_EXTENDED);
  if (rc != 0) {
    char buf[256];
    regerror(rc, &re, buf, sizeof buf);
    *why = std::string("invalid POSIX extended regular expression: ") + buf;
    return false;
  }
  *groups = re.re_nsub;
  regfree(&re);
  return true;
}

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
