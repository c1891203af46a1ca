// Reading one lease table ([[targets.leases]]) on one connection, in round trips of its own.
// Before the table's first read on a connection, the check that it exists and may be read, asked
// of the catalog (queries/lease_table_exists.sql: a table that does not exist yet costs no ERROR
// in the server's log), and that each field has a usable type (queries/lease_table_check.sql,
// lease_table_column.sql), a problem reported with the config file, line and key; a statement
// that fails on the server tried again after a backoff (util/backoff.h); then the read (the write
// counters and the rows in one batch); when the read fails on a live connection though the types
// were right, the blame of the expression that failed; for a row_lock table, the holder of each
// held row from this poll's live transaction ids; for a table without taken_at, when each row was
// first seen held. The read's statements are prepared on each session once (a row_lock table's
// live transaction ids are their one parameter). Used by the leases collector (leases.h) on every
// poll and by --check-targets once. A TableState belongs to the poller thread of its target.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/collectors/collector.h"
#include "exporter/util/backoff.h"

namespace pglock {

// What the collector remembers of each table between polls.
struct TableState {
  // The session (PgConnection::serial) the check and the prepared statements below belong to: a
  // new one is checked and prepared again.
  uint64_t session = 0;
  bool checked = false;  // the types passed the check on this poller's connection
  // The read's two statements, PREPAREd once per session and EXECUTEd at every poll (the server
  // parses and plans them once), with the texts they were prepared from: a reload that changes
  // the text prepares them again. No names: none prepared on this session.
  std::string rows_name, writes_name;
  std::string rows_sql, writes_sql;
  bool rows_param = false;  // the rows statement takes the live transaction ids ($1)
  // The read's texts as last built and what they were built from: built again only for a new
  // session (the quoting is the session's) or a reload that changed the table or the row limit.
  struct Texts {
    uint64_t session = 0;
    int limit = 0;
    LeaseTableConfig table;
    std::string relation, rows_sql, writes_sql;
  };
  std::optional<Texts> texts;
  // Statements this table prepared on its session and no longer names (replaced by a reload, left
  // by a failed prepare, one of two a session lost): SweepLeaseStatements deallocates them.
  bool left_statements = false;
  // A statement of this table's check or read failed on the server: the table is tried again
  // after its backoff, and reports last_error meanwhile. A table that is missing or unreadable is
  // told by the catalog without a failure, and is tried at every poll.
  StatementBackoff backoff;
  std::string last_error;
  struct Seen {
    std::string holder;
    double since = 0;
  };
  std::map<std::string, Seen> first_held;  // by lease name; tables without taken_at
};

// What a row_lock table's rows are matched against: this poll's live transaction ids.
struct LiveTransactions {
  std::unordered_map<uint32_t, int> pids;          // xid -> pid
  std::string array = "'{}'";                      // the xid[] literal of pids' keys
  std::unordered_map<int, const Session*> by_pid;  // the poll's sessions
};

// Held by the table's own clock: before its expiry, or matched by held_sql (no expiry).
bool IsHeld(const LeaseTableData& t, const LeaseRow& row);
// Reads one table into *out, unless a failed statement's backoff (TableState::backoff) is running;
// the Status is not ok only when the target's connection was lost. With `joint`, the table's
// results are taken from there when ReadPreparedTogether read them.
Status ReadTable(const PollContext& ctx, const LeaseTableConfig& table,
                 const LiveTransactions& live, TableState* st, LeaseTableData* out,
                 const BatchResults* joint = nullptr);
// The reads of every table of one session that is ready for its prepared read (checked and
// prepared on this session, its last read a success) in one round trip, each table's results under
// its statements' names: N tables cost one round trip, not N. Empty when fewer than two are ready
// or the batch failed: each table then reads alone (ReadTable), so that a failure stays its own
// table's, and a lost connection is found there. `states` in the order of `tables`.
// Deallocates every statement of the lease reads (named lease_read_...) prepared on the session
// that `keep` does not name: those a reload replaced or removed, a failed prepare left, or a
// collector state that was replaced forgot. One round trip to find them in pg_prepared_statements
// and one to deallocate them, only when asked (a reload, a failure, a state new to the session).
Status SweepLeaseStatements(const PollContext& ctx, const std::set<std::string>& keep);
BatchResults ReadPreparedTogether(const PollContext& ctx,
                                  const std::vector<const LeaseTableConfig*>& tables,
                                  const std::vector<TableState*>& states,
                                  const LiveTransactions& live);
// Checks the table's types and reads it once, exactly as the first poll of a connection does
// (--check-targets). Its problems go into out->error; the Status is not ok only when the
// connection was lost.
Status ReadLeaseTableOnce(const PollContext& ctx, const LeaseTableConfig& table,
                          LeaseTableData* out);

}  // namespace pglock
