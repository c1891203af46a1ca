#include "exporter/pg/conninfo.h"

#include <libpq-fe.h>

#include <memory>

namespace pglock {
namespace {

struct ConninfoDeleter {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};
using ConninfoPtr = std::unique_ptr<PQconninfoOption, ConninfoDeleter>;

ConninfoPtr Parse(const std::string& conninfo, std::string* why) {
  char* err = nullptr;
  ConninfoPtr opts(PQconninfoParse(conninfo.c_str(), &err));
  if (!opts) {
    if (why != nullptr) {
      // libpq's message names the offending option, never its value.
      *why = err != nullptr ? err : "invalid connection string";
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
    // Debug options ("D" in dispchar) such as passwords never leave the process.
    const bool secret = key == "password" || key == "sslpassword" ||
                        (o->dispchar != nullptr && o->dispchar[0] == '*');
    if (!out.empty()) out += ' ';
    out += key + "=" + (secret ? std::string("******") : std::string(o->val));
  }
  return out.empty() ? "(libpq defaults)" : out;
}

}  // namespace pglock
