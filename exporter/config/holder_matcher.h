// Splits a lease holder text into labels with a POSIX extended regular expression (glibc's
// regexec, no backtracking recursion), after capping the input so huge holders cannot stall a
// poll. Match() is thread-safe (regexec on a const regex_t; its memo behind a mutex).
#pragma once

#include <regex.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pglock {

// Longest accepted holder_pattern.
inline constexpr size_t kMaxHolderPatternBytes = 256;

// Checks a holder_pattern before it is used: it must compile as a POSIX extended regex, be at
// most kMaxHolderPatternBytes, and have none of the shapes glibc handles badly (found by
// tests/fuzz/holder_fuzz): stacked quantifiers ("a++", "a{2}*"), on which regcomp can need
// gigabytes; a quantifier on something that can match the empty string ("(a*)*", "(^()*)*"), on
// which regexec can loop for ever; back-references ("\1"), whose matching is exponential; groups
// nested deeper than 16. Fills *groups with the number of capture groups.
bool ValidateHolderPattern(const std::string& pattern, size_t* groups, std::string* why);

class HolderMatcher {
 public:
  // Longest holder prefix given to the regex engine.
  static constexpr size_t kMaxInput = 1024;

  // pattern must have compiled in config validation; an empty pattern matches nothing.
  explicit HolderMatcher(const std::string& pattern);
  ~HolderMatcher();
  HolderMatcher(const HolderMatcher&) = delete;
  HolderMatcher& operator=(const HolderMatcher&) = delete;

  bool valid() const { return compiled_; }
  size_t groups() const { return compiled_ ? re_.re_nsub : 0; }

  // The capture groups (unmatched groups as ""), shared and never changed; null when the pattern
  // does not match. A holder matched before is answered from a memo without a copy: a table's
  // holders recur poll after poll, and regexec on each of them was a fifth of an idle exporter's
  // instructions.
  using Parts = std::shared_ptr<const std::vector<std::string>>;
  Parts Match(std::string_view holder) const;

  // The memo's bound, counting each entry's heap (kMemoEntryBytes, the holder's text, its
  // groups); past it the memo starts again.
  static constexpr size_t kMaxMemoBytes = 64 << 10;
  static constexpr size_t kMemoEntryBytes = 128;
  size_t memo_bytes() const {
    std::lock_guard lock(mu_);
    return memo_bytes_;
  }

 private:
  Parts Run(const std::string& input) const;
  // Looks the memo up by a view of the holder (no copy of it for a hit).
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
  };

  regex_t re_{};
  bool compiled_ = false;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, Parts, TextHash, std::equal_to<>> memo_;
  mutable size_t memo_bytes_ = 0;
};

}  // namespace pglock
