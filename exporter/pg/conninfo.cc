#include "exporter/pg/conninfo.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <set>

namespace pglock {
namespace {

struct ConninfoDeleter {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};
using ConninfoPtr = std::unique_ptr<PQconninfoOption, ConninfoDeleter>;

bool IsConninfoKeyword(const std::string& word) {
  static const std::set<std::string> kKeywords = [] {
    std::set<std::string> out;
    const ConninfoPtr defaults(PQconndefaults());
    for (const PQconninfoOption* o = defaults.get(); o != nullptr && o->keyword != nullptr; ++o) {
      out.insert(o->keyword);
    }
    return out;
  }();
  return kKeywords.count(word) != 0;
}

// libpq quotes pieces of the input in its parse errors: an option name, but also a token, a
// percent-encoded part or the whole URI, any of which may hold the password. Keeps the message
// up to the first quoted piece that is neither a libpq keyword nor libpq's own punctuation
// ("=", "]"), and replaces that piece and the rest with "...".
std::string RedactParseError(const std::string& message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('"', i);
    if (open == std::string::npos) return out + message.substr(i);
    out += message.substr(i, open + 1 - i);
    const size_t close = message.find('"', open + 1);
    const std::string quoted =
        close == std::string::npos ? "" : message.substr(open + 1, close - open - 1);
    const bool punctuation = !quoted.empty() && quoted.size() <= 2 &&
                             std::none_of(quoted.begin(), quoted.end(), [](char c) {
                               return std::isalnum(static_cast<unsigned char>(c)) != 0;
                             });
    if (close == std::string::npos || !(punctuation || IsConninfoKeyword(quoted))) {
      return out + "...\"";
    }
    out += quoted + '"';
    i = close + 1;
  }
  return out;
}

ConninfoPtr Parse(const std::string& conninfo, std::string* why) {
  char* err = nullptr;
  ConninfoPtr opts(PQconninfoParse(conninfo.c_str(), &err));
  if (!opts) {
    if (why != nullptr) {
      *why = err != nullptr ? RedactParseError(err) : "invalid connection string";
      while (!why->empty() && why->back() == '\n') why->pop_back();
    }
    PQfreemem(err);
  }
  return opts;
}

}  // namespace

bool ValidateConninfo(const std::string& conninfo, std::string* why) {
  return Parse(conninfo, why) != nullptr;
}

bool ConninfoHasPassword(const std::string& conninfo) {
  const ConninfoPtr opts = Parse(conninfo, nullptr);
  if (!opts) return false;
  for (const PQconninfoOption* o = opts.get(); o->keyword != nullptr; ++o) {
    if (std::string(o->keyword) == "password" && o->val != nullptr && o->val[0] != '\0') {
      return true;
    }
  }
  return false;
}

std::string MaskConninfo(const std::string& conninfo) {
  if (conninfo.empty()) return "(libpq defaults)";
  const ConninfoPtr opts = Parse(conninfo, nullptr);
  if (!opts) return "(invalid connection string)";
  std::string out;
  for (const PQconninfoOption* o = opts.get(); o->keyword != nullptr; ++o) {
    if (o->val == nullptr || o->val[0] == '\0') continue;
    const std::string key = o->keyword;
    // Password options ("*" in dispchar) never leave the process.
    const bool secret = key == "password" || key == "sslpassword" ||
                        (o->dispchar != nullptr && o->dispchar[0] == '*');
    if (!out.empty()) out += ' ';
    out += key + "=" + (secret ? std::string("******") : std::string(o->val));
  }
  return out.empty() ? "(libpq defaults)" : out;
}

}  // namespace pglock
