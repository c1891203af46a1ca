#include "exporter/util/table_name.h"

#include <utility>
#include <vector>

namespace pglock {
namespace {

// Reads one identifier of `text` from *i: "quoted ""with"" quotes" or unquoted (folded to lower
// case). False and *why when it is not one.
bool ReadIdentifier(const std::string& text, size_t* i, std::string* out, std::string* why) {
  out->clear();
  if (*i < text.size() && text[*i] == '"') {
    for (++*i; *i < text.size(); ++*i) {
      if (text[*i] == '"') {
        if (*i + 1 < text.size() && text[*i + 1] == '"') {
          *out += '"';
          ++*i;
          continue;
        }
        ++*i;
        if (out->empty()) {
          *why = "an empty quoted name";
          return false;
        }
        return true;
      }
      *out += text[*i];
    }
    *why = "a quoted name without its closing quote";
    return false;
  }
  for (; *i < text.size() && text[*i] != '.'; ++*i) {
    const char c = text[*i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                        static_cast<unsigned char>(c) >= 0x80;
    if (!letter && !(!out->empty() && ((c >= '0' && c <= '9') || c == '$'))) {
      *why =
          "a name unquoted must be letters, digits, _ and $ (not starting with a digit); "
          "quote it (\"My Table\") otherwise";
      return false;
    }
    *out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  if (out->empty()) {
    *why = "an empty name";
    return false;
  }
  return true;
}

}  // namespace

bool ParseTableName(const std::string& text, TableName* out, std::string* why) {
  if (text.empty()) {
    *why = "no table: give ?table=schema.table";
    return false;
  }
  if (text.size() > 300) {
    *why = "a table name longer than 300 bytes";
    return false;
  }
  std::vector<std::string> parts;
  size_t i = 0;
  while (true) {
    std::string part;
    if (!ReadIdentifier(text, &i, &part, why)) return false;
    if (part.size() > 63) {
      *why = "a name longer than 63 bytes (PostgreSQL's limit)";
      return false;
    }
    parts.push_back(std::move(part));
    if (i == text.size()) break;
    if (text[i] != '.' || parts.size() == 2) {
      *why = parts.size() == 2 && text[i] == '.'
                 ? "more than schema.table (a table of another database cannot be asked about)"
                 : "unexpected text after a quoted name";
      return false;
    }
    ++i;
  }
  out->schema.reset();
  if (parts.size() == 2) out->schema = parts[0];
  out->name = parts.back();
  return true;
}

}  // namespace pglock
