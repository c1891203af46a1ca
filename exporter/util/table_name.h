// A table name as SQL writes it: "orders", "shop.orders", "\"Shop\".\"Order Lines\"". Unquoted
// parts fold to lower case as PostgreSQL folds them. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>

namespace pglock {

struct TableName {
  std::optional<std::string> schema;  // none: the first visible on the session's search_path
  std::string name;
};

// False and *why when `text` is not one (more than schema.table, a bad unquoted name, a quote
// left open, a part longer than PostgreSQL's 63 bytes).
bool ParseTableName(const std::string& text, TableName* out, std::string* why);

}  // namespace pglock
