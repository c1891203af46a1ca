// RAII wrappers for libpq: PgResult owns a PGresult, PgConnection owns a PGconn and runs statements
// with a hard deadline through libpq's asynchronous API. A PgConnection belongs to one thread.
#pragma once

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exporter/util/status.h"

namespace pglock {

using SteadyClock = std::chrono::steady_clock;

class PgResult {
 public:
  explicit PgResult(PGresult* result) : result_(result) {}
  PgResult(PgResult&&) = default;
  PgResult& operator=(PgResult&&) = default;

  int Rows() const { return PQntuples(result_.get()); }
  int Columns() const { return PQnfields(result_.get()); }
  bool IsNull(int row, int col) const { return PQgetisnull(result_.get(), row, col) != 0; }
  // The text value; empty for NULL. Bytes as sent by the server: not necessarily UTF-8.
  std::string_view Text(int row, int col) const {
    return {PQgetvalue(result_.get(), row, col),
            static_cast<size_t>(PQgetlength(result_.get(), row, col))};
  }
  std::string String(int row, int col) const { return std::string(Text(row, col)); }
  std::optional<double> Double(int row, int col) const;
  std::optional<int64_t> Int(int row, int col) const;
  // PostgreSQL's boolean text "t"/"f"; false for NULL (whose text is empty). One libpq call: it
  // runs for every column of up to 100k lock rows.
  bool Bool(int row, int col) const {
    const char* v = PQgetvalue(result_.get(), row, col);  // null out of range
    return v != nullptr && v[0] == 't' && v[1] == '\0';
  }
  std::string_view ColumnName(int col) const { return PQfname(result_.get(), col); }
  // Column index by name, or -1.
  int Column(const char* name) const { return PQfnumber(result_.get(), name); }

 private:
  struct Deleter {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  // The value's text up to its NUL (empty for NULL), without asking libpq for its length.
  std::string_view RawText(int row, int col) const;
  std::unique_ptr<PGresult, Deleter> result_;
};

class PgConnection {
 public:
  // Opens a connection without blocking past `deadline` into *out. `overrides` are libpq keywords
  // applied after the conninfo (e.g. application_name). `abort`, when given, is checked every
  // 100 ms while waiting: setting it makes the connect or any later Exec give up at once (used for
  // a prompt shutdown). It must outlive the connection.
  static Status Connect(const std::string& conninfo,
                        const std::vector<std::pair<std::string, std::string>>& overrides,
                        SteadyClock::time_point deadline, std::unique_ptr<PgConnection>* out,
                        const std::atomic<bool>* abort = nullptr);

  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs `sql`. Without params it uses the simple protocol, so several ';'-separated statements
  // return one PgResult each (and run in one implicit transaction); with params it uses the
  // extended protocol (text parameters). Fails with kStatementFailed on a server error (the
  // session stays usable), kConnectionLost on a broken connection, kDeadline when `deadline`
  // passes: the connection is then closed (Broken() is true), since the server ends the statement
  // itself through statement_timeout and no blocking cancel is needed.
  Status Exec(const std::string& sql, const std::vector<std::string>& params,
              SteadyClock::time_point deadline, std::vector<PgResult>* results);

  // Convenience: exactly one result expected (else kUnexpectedShape).
  Status ExecOne(const std::string& sql, const std::vector<std::string>& params,
                 SteadyClock::time_point deadline, std::optional<PgResult>* result);

  bool Broken() const;
  // Unique to this connection among all the process opens: what was prepared on a session is
  // known to be there only while the serial is the same (an address can be reused).
  uint64_t serial() const { return serial_; }
  int ServerVersionNum() const { return conn_ ? PQserverVersion(conn_) : 0; }
  // Quotes an identifier for SQL ("a""b"); empty string if the connection is gone.
  std::string QuoteIdentifier(const std::string& ident) const;
  // Quotes a string literal for SQL ('it''s'); empty string if the connection is gone.
  std::string QuoteLiteral(const std::string& text) const;

 private:
  PgConnection(PGconn* conn, const std::atomic<bool>* abort);
  // Waits until the socket is readable (or writable); kDeadline, kAborted or kConnectionLost.
  Status Wait(bool for_write, SteadyClock::time_point deadline);
  // Closes the connection and returns `status` (failures that leave the session unusable).
  Status CloseWith(Status status);
  void Close();

  PGconn* conn_;  // owned; nullptr after Close()
  const std::atomic<bool>* const abort_;
  const uint64_t serial_;
};

}  // namespace pglock
