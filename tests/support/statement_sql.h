// The SQL text a batch statement runs, for tests that EXPLAIN it or rewrite it on a session that
// did not prepare it: the prepared text for an "EXECUTE name", its parameter ($1: only the
// settings' gate has one) replaced by the value an "EXECUTE name(value)" passes. Pure.
#pragma once

#include <string>
#include <vector>

#include "exporter/pg/batch.h"

namespace pglock::testing {

inline std::string StatementSql(const std::vector<PreparedStatement>& prepared,
                                const std::string& statement) {
  for (const PreparedStatement& p : prepared) {
    if (statement == "EXECUTE " + p.name) return p.sql;
    const std::string with_args = "EXECUTE " + p.name + "(";
    if (statement.rfind(with_args, 0) != 0 || statement.back() != ')') continue;
    const std::string arg =
        statement.substr(with_args.size(), statement.size() - with_args.size() - 1);
    std::string sql = p.sql;
    const size_t at = sql.rfind("$1");  // the last: a comment may name it before
    if (at != std::string::npos) sql.replace(at, 2, arg);
    return sql;
  }
  return statement;
}

}  // namespace pglock::testing
