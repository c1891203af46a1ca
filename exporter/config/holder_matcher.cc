#include "exporter/config/holder_matcher.h"

namespace pglock {

namespace {

// Reads a POSIX extended regex as alternation, concatenation, pieces and atoms, for the shapes
// glibc handles badly: stacked quantifiers ("a**", "a{2}+"), a quantifier on something that can
// match the empty string ("(a*)*", "(^()*)*", "()+"), and back-references. Runs before regcomp,
// which can itself need gigabytes on stacked quantifiers, and reads malformed input loosely
// (regcomp rejects it next); a ')' outside any group is a literal, as in glibc.
class PatternShape {
 public:
  explicit PatternShape(const std::string& p) : p_(p) {}

  // Empty when the pattern is safe to run, else why not.
  std::string Problem() {
    Alternation();
    return problem_;
  }

 private:
  static bool Quantifier(char c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

  // Returns whether the alternation can match the empty string.
  bool Alternation() {
    bool nullable = Concatenation();
    while (problem_.empty() && i_ < p_.size() && p_[i_] == '|') {
      ++i_;
      nullable = Concatenation() || nullable;
    }
    return nullable;
  }

  bool Concatenation() {
    bool nullable = true;
    while (problem_.empty() && i_ < p_.size() && p_[i_] != '|' && (p_[i_] != ')' || depth_ == 0)) {
      nullable = Piece() && nullable;
    }
    return nullable;
  }

  bool Piece() {
    const size_t atom_at = i_;
    bool nullable = Atom();
    bool quantified = false;
    while (problem_.empty() && i_ < p_.size() && Quantifier(p_[i_])) {
      const char q = p_[i_];
      if (quantified) {
        problem_ = "stacked quantifiers (\"" + p_.substr(atom_at, i_ + 1 - atom_at) +
                   "\") are not allowed";
        return nullable;
      }
      if (nullable) {
        problem_ = "a quantifier on something that can match the empty string (\"" +
                   p_.substr(atom_at, i_ + 1 - atom_at) + "\") is not allowed";
        return nullable;
      }
      quantified = true;
      ++i_;
      if (q == '*' || q == '?') {
        nullable = true;
      } else if (q == '{') {
        // "{m}", "{m,}", "{m,n}": nullable when m is 0.
        size_t close = p_.find('}', i_);
        if (close == std::string::npos) close = p_.size() - 1;
        const std::string bound = p_.substr(i_, close - i_);
        nullable = bound.empty() || bound.find_first_not_of("0,") == std::string::npos ||
                   bound[0] == ',' || (bound[0] == '0' && (bound.size() == 1 || bound[1] == ','));
        i_ = close + 1;
      }
    }
    return nullable;
  }

  bool Atom() {
    const char c = p_[i_++];
    switch (c) {
      case '(': {
        if (++depth_ > kMaxDepth) {
          problem_ = "groups nested deeper than " + std::to_string(kMaxDepth);
          return false;
        }
        const bool nullable = Alternation();
        --depth_;
        if (i_ < p_.size() && p_[i_] == ')') ++i_;
        return nullable;
      }
      case '[':
        Bracket();
        return false;
      case '\\':
        if (i_ < p_.size()) {
          const char e = p_[i_++];
          if (e >= '1' && e <= '9') {
            problem_ = "back-references (\"\\" + std::string(1, e) + "\") are not allowed";
          }
          // GNU's zero-width escapes: word boundaries and buffer anchors.
          return e == 'b' || e == 'B' || e == '<' || e == '>' || e == '`' || e == '\'';
        }
        return false;
      case '^':
      case '$':
        return true;  // zero width
      default:
        return false;
    }
  }

  // Skips a bracket expression; i_ is just past its '['.
  void Bracket() {
    if (i_ < p_.size() && p_[i_] == '^') ++i_;
    if (i_ < p_.size() && p_[i_] == ']') ++i_;  // "[]...]" and "[^]...]": a literal ']'
    while (i_ < p_.size() && p_[i_] != ']') {
      if (p_[i_] == '[' && i_ + 1 < p_.size() &&
          (p_[i_ + 1] == ':' || p_[i_ + 1] == '.' || p_[i_ + 1] == '=')) {
        // "[:alpha:]", "[.x.]", "[=e=]": skip to their closing "x]".
        const size_t close = p_.find(std::string(1, p_[i_ + 1]) + "]", i_ + 2);
        i_ = close == std::string::npos ? p_.size() : close + 2;
      } else {
        ++i_;
      }
    }
    if (i_ < p_.size()) ++i_;
  }

  static constexpr int kMaxDepth = 16;
  const std::string& p_;
  size_t i_ = 0;
  int depth_ = 0;
  std::string problem_;
};

}  // namespace

bool ValidateHolderPattern(const std::string& pattern, size_t* groups, std::string* why) {
  if (pattern.size() > kMaxHolderPatternBytes) {
    *why = "longer than " + std::to_string(kMaxHolderPatternBytes) + " bytes";
    return false;
  }
  if (std::string problem = PatternShape(pattern).Problem(); !problem.empty()) {
    *why = std::move(problem);
    return false;
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

HolderMatcher::Parts HolderMatcher::Match(std::string_view holder) const {
  if (!compiled_) return nullptr;
  // PostgreSQL text never holds NUL, but cut at one anyway: regexec reads a C string.
  std::string_view input = holder.substr(0, kMaxInput);
  if (const auto nul = input.find('\0'); nul != std::string_view::npos) {
    input = input.substr(0, nul);
  }
  std::lock_guard lock(mu_);
  if (const auto it = memo_.find(input); it != memo_.end()) return it->second;
  std::string text(input);
  Parts out = Run(text);
  // What the entry holds on the heap, roughly: its node (key, answer, hash), the key's text, the
  // answer's strings and their texts.
  size_t bytes = kMemoEntryBytes + text.size();
  if (out) {
    for (const std::string& part : *out) bytes += sizeof(std::string) + part.size();
  }
  if (bytes <= kMaxMemoBytes) {
    if (memo_bytes_ + bytes > kMaxMemoBytes) {
      memo_.clear();
      memo_bytes_ = 0;
    }
    memo_bytes_ += bytes;
    memo_.emplace(std::move(text), out);
  }
  return out;
}

HolderMatcher::Parts HolderMatcher::Run(const std::string& input) const {
  std::vector<regmatch_t> m(re_.re_nsub + 1);
  if (regexec(&re_, input.c_str(), m.size(), m.data(), 0) != 0) return nullptr;
  auto out = std::make_shared<std::vector<std::string>>();
  for (size_t i = 1; i < m.size(); ++i) {
    if (m[i].rm_so < 0) {
      out->emplace_back();
    } else {
      out->push_back(input.substr(static_cast<size_t>(m[i].rm_so),
                                  static_cast<size_t>(m[i].rm_eo - m[i].rm_so)));
    }
  }
  return out;
}

}  // namespace pglock
