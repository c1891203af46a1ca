// Resolves the columns of a result by name, once per result, so parsers read cells by name and
// the SQL may reorder, add or drop columns without the C++ reading the wrong one. A missing
// column is an unexpected-shape Status naming every column that is missing. Thread-compatible.
#pragma once

#include <string>
#include <string_view>

#include "exporter/pg/connection.h"

namespace pglock {

class Columns {
 public:
  // `what` names the statement in errors ("activity: no column pid").
  Columns(const PgResult& result, std::string_view what) : result_(result), what_(what) {}

  // The index of `name`; records it as missing (and returns -1) when the result lacks it.
  int operator[](const char* name) {
    const int i = result_.Column(name);
    if (i < 0) missing_ += missing_.empty() ? std::string(name) : ", " + std::string(name);
    return i;
  }

  Status status() const {
    if (missing_.empty()) return Status::Ok();
    return Status::UnexpectedShape(what_ + ": no column " + missing_);
  }

 private:
  const PgResult& result_;
  const std::string what_;
  std::string missing_;
};

}  // namespace pglock
