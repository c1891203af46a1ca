// Status: the outcome of an operation that can fail, with a kind that says how the caller should
// react (reconnect, count a statement error, distrust the SQL/C++ contract, give up on the poll).
// What the poll path (pg/, collectors/, poll/, serverlog/, storage/), the app, the HTTP server and
// ParseDuration return; a function that also yields a value takes it as an out-parameter. Config
// parsing collects ConfigErrors with file, line and key instead, and the validators it calls (table
// names, conninfo, holder patterns, shard ordinals) still report with bool + std::string* why.
// Immutable value type; thread-compatible.
#pragma once

#include <string>
#include <utility>

namespace pglock {

class [[nodiscard]] Status {
 public:
  enum class Kind {
    kOk,
    kConnectionLost,   // the connection is gone or unusable: reconnect before the next poll
    kStatementFailed,  // the server rejected a statement; the session is still usable
    kUnexpectedShape,  // a result lacks a column or row the SQL promises
    kDeadline,         // the poll's deadline passed (the connection was closed)
    kAborted,          // shutting down
    kIoFailed,         // a file could not be read or written (the state directory)
    kInvalidData,      // bytes that do not hold what they should (a damaged state file)
    kInvalidArgument,  // a value given to the exporter (flag, config, query) does not parse
    kUnavailable,      // the listener cannot start (address taken, TLS shims missing)
  };

  Status() = default;  // ok
  static Status Ok() { return {}; }
  static Status ConnectionLost(std::string m) { return {Kind::kConnectionLost, std::move(m)}; }
  // `sqlstate`: the server's SQLSTATE of the error, when known (e.g. "26000").
  static Status StatementFailed(std::string m, std::string sqlstate = "") {
    Status s(Kind::kStatementFailed, std::move(m));
    s.sqlstate_ = std::move(sqlstate);
    return s;
  }
  static Status UnexpectedShape(std::string m) { return {Kind::kUnexpectedShape, std::move(m)}; }
  static Status Deadline(std::string m) { return {Kind::kDeadline, std::move(m)}; }
  static Status Aborted(std::string m) { return {Kind::kAborted, std::move(m)}; }
  static Status IoFailed(std::string m) { return {Kind::kIoFailed, std::move(m)}; }
  static Status InvalidData(std::string m) { return {Kind::kInvalidData, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {Kind::kInvalidArgument, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Kind::kUnavailable, std::move(m)}; }

  bool ok() const { return kind_ == Kind::kOk; }
  Kind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  // The SQLSTATE of a kStatementFailed from the server; "" otherwise.
  const std::string& sqlstate() const { return sqlstate_; }
  // The same kind (and SQLSTATE) with "context: " before the message.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    Status s(kind_, context + ": " + message_);
    s.sqlstate_ = sqlstate_;
    return s;
  }

 private:
  Status(Kind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

  Kind kind_ = Kind::kOk;
  std::string message_;
  std::string sqlstate_;
};

}  // namespace pglock
