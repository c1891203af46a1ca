// StatementBatch: the statements of one poll, from every collector, sent as ONE simple-protocol
// round trip and run in one implicit transaction, so every row of the poll shares the same now().
// Each statement is added under a name and its result is found by that name, never by position:
// collectors own their statements and the order of the SQL text is free to change.
// Also the one place where SQL templates are filled, the poll's SET LOCAL timeouts are made and
// statements are prepared once per connection. Thread-compatible.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exporter/pg/connection.h"
#include "exporter/util/status.h"

namespace pglock {

// Replaces {key} placeholders in one left-to-right pass: a value that itself contains "{other}"
// (a quoted identifier, say) is never rescanned.
std::string FillTemplate(std::string_view sql,
                         const std::vector<std::pair<std::string, std::string>>& values);

// The timeouts of the exporter's own statements, derived from poll.timeout.
struct QueryTimeouts {
  int statement_ms = 3000;
  int lock_ms = 500;

  // statement_timeout = the poll's deadline; lock_timeout a quarter of it, at most 500 ms: the
  // exporter must never queue behind someone's lock.
  static QueryTimeouts ForPoll(std::chrono::milliseconds poll_timeout);
};

// A statement the server plans once per connection: PREPARE name AS sql when the connection is
// set up, then EXECUTE name inside each poll's batch (still one round trip). A plain statement of a
// batch is parsed and planned at every poll, which costs more than running a gated statement whose
// gate stays shut. For statements whose text is fixed while a connection lives (template values
// that depend on the server version only); a parameter ($1) takes the value the EXECUTE passes
// (AddExecute's args).
struct PreparedStatement {
  std::string name;  // an SQL identifier, unique per connection
  std::string sql;   // exactly one statement
};

// SQLSTATE 26000: EXECUTE of a name the session does not know. A session of a direct connection
// keeps its prepared statements; one behind a pooler can lose them (DISCARD ALL, another server
// connection). The poller reconnects, which prepares them again.
inline constexpr char kUnknownPreparedStatement[] = "26000";

// PREPAREs every statement, in one round trip.
Status PrepareStatements(PgConnection& conn, const std::vector<PreparedStatement>& statements,
                         SteadyClock::time_point deadline);

class BatchResults {
 public:
  // The result of the statement added as `name`; nullptr when it was not in the batch.
  const PgResult* Find(std::string_view name) const;

 private:
  friend class StatementBatch;
  std::vector<PgResult> results_;
  std::map<std::string, size_t, std::less<>> index_;
};

class StatementBatch {
 public:
  // kBeforeTimeouts statements run before the SET LOCAL of the exporter's timeouts (pg_settings
  // must show the server's values, not the exporter's). kAfterMain statements run after every
  // kMain statement: only they may call pg_stat_clear_snapshot() to read pg_stat_activity afresh,
  // since every kMain statement must see the poll's one snapshot of it.
  enum class Phase { kBeforeTimeouts, kMain, kAfterMain };

  // `sql` is exactly one statement. Names are unique within a batch.
  void Add(std::string name, std::string sql, Phase phase = Phase::kMain);
  // Runs the statement prepared on the connection as `prepared_name` (PrepareStatements); its
  // result is found under `name`. `args`: its parameters' values as SQL literals, comma-separated.
  void AddExecute(std::string name, const std::string& prepared_name, Phase phase = Phase::kMain,
                  const std::string& args = "");
  bool empty() const { return before_.empty() && main_.empty() && after_.empty(); }
  // (name, sql) of every statement added, in the order they are sent (tests).
  std::vector<std::pair<std::string, std::string>> Statements() const;

  // Sends every statement in one round trip. A failure of any statement fails the batch (the
  // implicit transaction aborts): such statements belong to optional collectors' own batches.
  // An EXECUTE of a statement the session lost fails with sqlstate kUnknownPreparedStatement.
  Status Run(PgConnection& conn, const QueryTimeouts& timeouts, SteadyClock::time_point deadline,
             BatchResults* out) const;

 private:
  std::vector<std::pair<std::string, std::string>> before_;
  std::vector<std::pair<std::string, std::string>> main_;
  std::vector<std::pair<std::string, std::string>> after_;
};

}  // namespace pglock
