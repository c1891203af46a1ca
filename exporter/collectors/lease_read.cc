#include "exporter/collectors/lease_read.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "exporter/collectors/lease_sql.h"
#include "exporter/pg/columns.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

// The table's write counters, when they follow its writes.
Status ParseWrites(const PgResult& r, LeaseTableData* out) {
  Columns c(r, "lease_table_writes");
  const int updated = c["updated"], deleted = c["deleted"], counted = c["counted"];
  if (Status s = c.status(); !s.ok()) return s;
  if (r.Rows() == 1 && r.String(0, counted) == "t") {
    out->writes = TableWrites{r.Int(0, updated).value_or(0), r.Int(0, deleted).value_or(0)};
  }
  return Status::Ok();
}

// Runs one statement in a batch of its own; *result is null when it failed on a live connection
// (*error says why, and *failed is set: the server logged an ERROR). The Status is not ok only
// when the connection was lost.
Status RunAlone(const PollContext& ctx, const std::string& name, const std::string& sql,
                BatchResults* results, std::string* error, bool* failed) {
  StatementBatch batch;
  batch.Add(name, sql);
  if (Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, results); !s.ok()) {
    *error = s.message();
    *failed = true;
    return ctx.conn->Broken() ? s : Status::Ok();
  }
  return Status::Ok();
}

// Whether the table exists and the exporter's role may read it, from the catalog
// (queries/lease_table_exists.sql): *problem when not, worded as the server's own error would be,
// without one in its log. A table that appears later is read at the next poll.
Status ProbeTable(const PollContext& ctx, const LeaseTableConfig& table,
                  const std::string& relation, std::string* problem, bool* failed) {
  const std::string rel = ctx.conn->QuoteLiteral(relation);
  const std::string schema = table.schema.empty() ? "NULL" : ctx.conn->QuoteLiteral(table.schema);
  if (rel.empty() || schema.empty()) {
    *problem = table.Problem("table", "cannot quote identifiers");
    return ctx.conn->Broken() ? Status::ConnectionLost(*problem) : Status::Ok();
  }
  BatchResults results;
  std::string error;
  const std::string sql =
      FillTemplate(queries::kLeaseTableExists, {{"relation", rel}, {"schema", schema}});
  if (Status s = RunAlone(ctx, "lease_table_exists", sql, &results, &error, failed); !s.ok()) {
    return s;
  }
  const PgResult* r = error.empty() ? results.Find("lease_table_exists") : nullptr;
  if (r == nullptr) {
    *problem = table.Problem("table", error);
    return Status::Ok();
  }
  Columns c(*r, "lease_table_exists");
  const int usable = c["schema_usable"], found = c["found"], readable = c["readable"];
  if (Status s = c.status(); !s.ok() || r->Rows() != 1) {
    *problem = table.Problem("table", s.ok() ? "lease_table_exists: not one row" : s.message());
  } else if (!r->Bool(0, usable)) {
    *problem = table.Problem("table", "schema \"" + table.schema +
                                          "\" does not exist, or the exporter's role may not "
                                          "use it (GRANT USAGE ON SCHEMA)");
  } else if (!r->Bool(0, found)) {
    *problem = table.Problem("table", "relation \"" + table.table + "\" does not exist");
  } else if (!r->Bool(0, readable)) {
    *problem = table.Problem("table", "permission denied for table " + table.table);
  }
  return Status::Ok();
}

// The server's type of one field, from the catalog for a column, from the expression itself for
// SQL. *problem (with its config key) when it cannot be had or is not one of `want`.
Status CheckField(const PollContext& ctx, const LeaseTableConfig& table,
                  const std::string& relation, const std::string& field, const LeaseField& f,
                  const std::vector<std::string>& want, const std::string& want_text,
                  std::string* problem, bool* failed) {
  const bool column = f.sql.empty();
  const std::string key = field == "row_lock" ? field : field + (column ? "_column" : "_sql");
  const std::string shown = "\"" + (column ? f.column : f.sql) + "\"";
  std::string sql;
  if (column) {
    const std::string rel = ctx.conn->QuoteLiteral(relation),
                      col = ctx.conn->QuoteLiteral(f.column);
    if (!rel.empty() && !col.empty()) {
      sql = FillTemplate(queries::kLeaseTableColumn, {{"relation", rel}, {"column", col}});
    }
  } else {
    sql = FillTemplate(queries::kLeaseTableCheck,
                       {{"table", relation}, {"field", FieldSql(*ctx.conn, f, "")}});
  }
  if (sql.empty()) {
    *problem = "cannot quote identifiers";
    return ctx.conn->Broken() ? Status::ConnectionLost(*problem) : Status::Ok();
  }
  BatchResults results;
  std::string error;
  if (Status s = RunAlone(ctx, "lease_table_check", sql, &results, &error, failed); !s.ok()) {
    return s;
  }
  const PgResult* r = error.empty() ? results.Find("lease_table_check") : nullptr;
  if (r == nullptr) {
    *problem = table.Problem(key, shown + ": " + error);
  } else if (r->Rows() == 0) {
    *problem = table.Problem(key, shown + " does not exist in " + table.table);
  } else if (!want.empty() && std::find(want.begin(), want.end(), r->String(0, 0)) == want.end()) {
    *problem = table.Problem(key, shown + " is " + r->String(0, 0) + ", want " + want_text);
  }
  return Status::Ok();
}

// Checks that the table exists and every field has a usable type; *problem is the first problem
// found (file:line: key: message), "" when there is none; *failed when a statement failed.
Status CheckTable(const PollContext& ctx, const LeaseTableConfig& table,
                  const std::string& relation, std::string* problem, bool* failed) {
  if (Status s = ProbeTable(ctx, table, relation, problem, failed); !s.ok() || !problem->empty()) {
    return s;
  }
  BatchResults results;
  std::string error;
  const std::string exists =
      FillTemplate(queries::kLeaseTableCheck, {{"table", relation}, {"field", "NULL::text"}});
  if (Status s = RunAlone(ctx, "lease_table_check", exists, &results, &error, failed); !s.ok()) {
    return s;
  }
  if (!error.empty()) {
    *problem = table.Problem("table", error);
    return Status::Ok();
  }
  static const std::vector<std::string> kAny;  // every type has a cast to text
  static const std::vector<std::string> kTime = {"timestamp with time zone",
                                                 "timestamp without time zone"};
  static const std::vector<std::string> kBool = {"boolean"};
  struct Check {
    const char* field;
    LeaseField f;
    const std::vector<std::string>* want;
    const char* want_text;
  };
  const Check checks[] = {
      {"name", table.name, &kAny, ""},
      {"holder", table.holder, &kAny, ""},
      {"taken_at", table.taken_at, &kTime, "timestamptz or timestamp"},
      {"expires_at", table.expires_at, &kTime, "timestamptz or timestamp"},
      {"held", {"", table.held_sql}, &kBool, "boolean"},
      {"where", {"", table.where_sql}, &kBool, "boolean"},
      // Views and foreign tables have no xmax: their rows cannot be row-locked.
      {"row_lock", {"", table.row_lock ? "t.xmax" : ""}, &kAny, ""},
  };
  for (const Check& c : checks) {
    if (!c.f.present()) continue;
    if (Status s =
            CheckField(ctx, table, relation, c.field, c.f, *c.want, c.want_text, problem, failed);
        !s.ok() || !problem->empty()) {
      return s;
    }
  }
  return Status::Ok();
}

// The read failed on a live connection though the types were right: an expression failed on a
// row (a division by zero, a bad cast). Names the first expression that fails on its own over the
// rows a poll reads, else the table. *problem is "file:line: key: error".
Status BlameReadError(const PollContext& ctx, const LeaseTableConfig& table,
                      const std::string& relation, const std::string& error, std::string* problem) {
  const std::pair<const char*, const std::string*> expressions[] = {
      {"where_sql", &table.where_sql},       {"held_sql", &table.held_sql},
      {"name_sql", &table.name.sql},         {"holder_sql", &table.holder.sql},
      {"taken_at_sql", &table.taken_at.sql}, {"expires_at_sql", &table.expires_at.sql},
  };
  for (const auto& [key, sql] : expressions) {
    if (sql->empty()) continue;
    BatchResults results;
    std::string failed;
    const std::string probe =
        FillTemplate(queries::kLeaseTableProbe, {{"expression", "(" + *sql + ")"},
                                                 {"table", relation},
                                                 {"limit", std::to_string(ctx.poll->max_leases)}});
    bool ignored = false;  // the read itself failed already
    if (Status s = RunAlone(ctx, "lease_table_probe", probe, &results, &failed, &ignored);
        !s.ok()) {
      return s;
    }
    if (!failed.empty()) {
      *problem = table.Problem(key, "\"" + *sql + "\": " + failed);
      return Status::Ok();
    }
  }
  *problem = table.Problem("table", error);
  return Status::Ok();
}

// The holder text of a row held by a session's transaction: "application_name (pid N)".
std::string SessionHolder(const Session* s, int pid) {
  const std::string p = "pid " + std::to_string(pid);
  return s == nullptr || s->application_name.empty() ? p : s->application_name + " (" + p + ")";
}

// Sets the taken_at of rows of a table without one, and of every row held by a row lock (its
// taken_at column shows the version before the holder's change): when this poller first saw the
// row held by its holder, or the holder's last state change when it was then not running a
// statement (the lock was taken no later). Kept across polls in *st; a row not held, or gone,
// starts again.
void StampFirstHeld(const LiveTransactions& live, TableState* st, LeaseTableData* t) {
  std::map<std::string, TableState::Seen> next;
  const double now = t->now;
  for (LeaseRow& row : t->rows) {
    if (!IsHeld(*t, row) || (t->has_taken_at && !row.row_locked)) continue;
    const auto it = st->first_held.find(row.name);
    const bool same = it != st->first_held.end() && it->second.holder == row.holder;
    double since = now;
    if (same) {
      since = it->second.since;
    } else if (const auto s = live.by_pid.find(row.pid);
               s != live.by_pid.end() && s->second->NotRunning() && s->second->state_change) {
      since = std::min(now, *s->second->state_change);
    }
    TableState::Seen seen{row.holder, since};
    row.taken_at = seen.since;
    next[row.name] = std::move(seen);
  }
  st->first_held = std::move(next);
}

// Names the holders of a row_lock table's rows held by an open transaction: the session that
// holds a lock on the row's xmax, else the transaction itself.
void MatchRowLocks(const LiveTransactions& live, LeaseTableData* t) {
  for (LeaseRow& row : t->rows) {
    if (!row.row_locked) continue;
    const auto it = live.pids.find(row.xid);
    if (it == live.pids.end()) {
      row.holder = "transaction " + std::to_string(row.xid) + " (session unknown)";
      continue;
    }
    row.pid = it->second;
    const auto s = live.by_pid.find(row.pid);
    row.holder = SessionHolder(s == live.by_pid.end() ? nullptr : s->second, row.pid);
  }
}

// Parses the rows of lease_table.sql into *out.
Status ParseRows(const PgResult& r, LeaseTableData* out) {
  Columns c(r, "lease_table");
  const int name = c["name"], holder = c["holder"], taken_at = c["taken_at"],
            expires_at = c["expires_at"], held = c["held"], total = c["total"], now = c["now"],
            xmax = c["xmax"], row_locked = c["row_locked"];
  if (Status s = c.status(); !s.ok()) return s;
  for (int i = 0; i < r.Rows(); ++i) {
    LeaseRow row;
    row.name = r.Text(i, name);
    row.holder = r.Text(i, holder);
    out->now = r.Double(i, now).value_or(0);
    // A NULL time makes the row unusable for ages; keep it visible as expired at the epoch.
    row.taken_at = r.Double(i, taken_at).value_or(0);
    row.expires_at = r.Double(i, expires_at).value_or(0);
    row.xid = static_cast<uint32_t>(r.Int(i, xmax).value_or(0));
    row.row_locked = r.Bool(i, row_locked);
    out->held = r.Int(i, held).value_or(0);
    out->total = r.Int(i, total).value_or(0);
    out->rows.push_back(std::move(row));
  }
  out->expired = out->total - out->held;
  return Status::Ok();
}

// Prepares the read's statements on this session unless they are prepared with these texts.
// *error when a statement failed on the server (*failed set).
Status PrepareRead(const PollContext& ctx, const std::string& rows_sql,
                   const std::string& writes_sql, TableState* st, std::string* error,
                   bool* failed) {
  if (!st->rows_name.empty() && st->rows_sql == rows_sql && st->writes_sql == writes_sql) {
    return Status::Ok();
  }
  // Names no other table or session of the process has: a statement left prepared by a failed
  // attempt is never in the way of the next.
  static std::atomic<uint64_t> next{1};
  const std::string n = std::to_string(next.fetch_add(1, std::memory_order_relaxed));
  // The old ones (the text changed: a reload) are left to the session's sweep, as are the new
  // ones should one of the two fail (PREPARE outlives the failed batch's transaction).
  if (!st->rows_name.empty()) st->left_statements = true;
  st->rows_name.clear();
  st->writes_name.clear();
  StatementBatch batch;
  batch.Add("prepare_rows", "PREPARE lease_read_rows_" + n + " AS " + rows_sql);
  batch.Add("prepare_writes", "PREPARE lease_read_writes_" + n + " AS " + writes_sql);
  BatchResults ignored;
  if (Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &ignored); !s.ok()) {
    st->left_statements = true;
    if (ctx.conn->Broken()) return s;
    *failed = true;
    *error = s.message();
    return Status::Ok();
  }
  st->rows_name = "lease_read_rows_" + n;
  st->writes_name = "lease_read_writes_" + n;
  st->rows_sql = rows_sql;
  st->writes_sql = writes_sql;
  st->rows_param = rows_sql.find("$1") != std::string::npos;
  return Status::Ok();
}

// The read's texts for this session and config: built once, not at every poll.
const TableState::Texts& TextsFor(const PollContext& ctx, const LeaseTableConfig& table,
                                  TableState* st) {
  const uint64_t session = ctx.conn->serial();
  const int limit = ctx.poll->max_leases;
  if (st->texts && st->texts->session == session && st->texts->limit == limit &&
      st->texts->table == table) {
    return *st->texts;
  }
  TableState::Texts t;
  t.session = session;
  t.limit = limit;
  t.table = table;
  t.relation = LeaseTableRelation(*ctx.conn, table);
  // A row_lock table's live transaction ids are the prepared statement's parameter.
  t.rows_sql = LeaseTableSql(*ctx.conn, table, limit, table.row_lock ? "$1" : "'{}'");
  t.writes_sql = LeaseTableWritesSql(*ctx.conn, table);
  // Not kept when the quoting failed (a broken session): the next poll builds them again.
  if (t.relation.empty() || t.rows_sql.empty() || t.writes_sql.empty()) t.session = 0;
  st->texts = std::move(t);
  return *st->texts;
}

// Checks the table's types when this connection has not yet, then reads it; *failed when a
// statement failed on the server.
Status CheckAndRead(const PollContext& ctx, const LeaseTableConfig& table,
                    const LiveTransactions& live, const BatchResults* joint, TableState* st,
                    LeaseTableData* out, bool* failed) {
  const TableState::Texts& texts = TextsFor(ctx, table, st);
  const std::string& relation = texts.relation;
  const std::string& sql = texts.rows_sql;
  const std::string& writes_sql = texts.writes_sql;
  if (relation.empty() || sql.empty() || writes_sql.empty()) {
    out->error = "cannot quote identifiers";
    return ctx.conn->Broken() ? Status::ConnectionLost(out->error) : Status::Ok();
  }
  if (st->session != ctx.conn->serial()) {  // a new session: nothing checked or prepared on it
    st->session = ctx.conn->serial();
    st->checked = false;
    st->rows_name.clear();
    st->writes_name.clear();
  }
  if (!st->checked) {
    if (Status s = CheckTable(ctx, table, relation, &out->error, failed); !s.ok()) return s;
    if (!out->error.empty()) return Status::Ok();
    st->checked = true;
  }
  BatchResults results;
  const PgResult* writes = nullptr;
  const PgResult* rows = nullptr;
  // Twice at most: a session that lost its prepared statements (a pooler's) prepares them again
  // at once. Else they stay after a failure, and a reload that changes their text replaces them.
  for (int attempt = 0;; ++attempt) {
    if (Status s = PrepareRead(ctx, sql, writes_sql, st, &out->error, failed);
        !s.ok() || !out->error.empty()) {
      st->checked = false;
      return s;
    }
    // Read already, with the other tables of the session (ReadPreparedTogether), by the
    // statements still prepared.
    if (joint != nullptr && attempt == 0) {
      writes = joint->Find(st->writes_name);
      rows = joint->Find(st->rows_name);
      if (writes != nullptr && rows != nullptr) break;
    }
    StatementBatch batch;
    // The counters first: see queries/lease_table_writes.sql.
    batch.AddExecute("lease_table_writes", st->writes_name);
    batch.AddExecute("lease_table", st->rows_name, StatementBatch::Phase::kMain,
                     table.row_lock ? live.array : "");
    const Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &results);
    if (s.ok()) {
      writes = results.Find("lease_table_writes");
      rows = results.Find("lease_table");
      break;
    }
    if (ctx.conn->Broken()) return s;
    if (s.sqlstate() == kUnknownPreparedStatement) {
      st->rows_name.clear();
      st->writes_name.clear();
      st->left_statements = true;  // the session may have lost one of the two only
      if (attempt == 0) continue;
    }
    *failed = true;
    // A table dropped or altered since its check: the next try checks it again.
    st->checked = false;
    return BlameReadError(ctx, table, relation, s.message(), &out->error);
  }
  if (Status s = ParseWrites(*writes, out); !s.ok()) {
    out->error = s.message();
    return Status::Ok();
  }
  if (Status s = ParseRows(*rows, out); !s.ok()) {
    out->error = s.message();
    return Status::Ok();
  }
  if (out->row_lock) MatchRowLocks(live, out);
  if (!out->has_taken_at || out->row_lock) StampFirstHeld(live, st, out);
  out->ok = true;
  return Status::Ok();
}

}  // namespace

bool IsHeld(const LeaseTableData& t, const LeaseRow& row) {
  return !t.has_expiry || row.expires_at > t.now;
}

Status SweepLeaseStatements(const PollContext& ctx, const std::set<std::string>& keep) {
  BatchResults found;
  StatementBatch find;
  find.Add("lease_statements",
           "SELECT name FROM pg_prepared_statements WHERE name LIKE 'lease\\_read\\_%'");
  if (Status s = find.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &found); !s.ok()) return s;
  const PgResult* r = found.Find("lease_statements");
  StatementBatch sweep;
  for (int i = 0; r != nullptr && i < r->Rows(); ++i) {
    const std::string name = r->String(i, 0);
    if (keep.count(name) != 0) continue;
    const std::string quoted = ctx.conn->QuoteIdentifier(name);
    if (quoted.empty()) continue;
    sweep.Add("deallocate_" + std::to_string(i), "DEALLOCATE " + quoted);
  }
  if (sweep.Statements().empty()) return Status::Ok();
  BatchResults ignored;
  return sweep.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &ignored);
}

BatchResults ReadPreparedTogether(const PollContext& ctx,
                                  const std::vector<const LeaseTableConfig*>& tables,
                                  const std::vector<TableState*>& states,
                                  const LiveTransactions& live) {
  StatementBatch batch;
  int ready = 0;
  for (size_t i = 0; i < tables.size() && i < states.size(); ++i) {
    const TableState& st = *states[i];
    // A table whose last read failed reads alone until one succeeds: its tries, each an ERROR in
    // the server's log, are not doubled by a joint read that fails for it.
    if (st.session != ctx.conn->serial() || !st.checked || st.rows_name.empty() ||
        st.backoff.failures() > 0) {
      continue;
    }
    // Under the statements' own names, which no two tables share. The counters first: see
    // queries/lease_table_writes.sql.
    batch.AddExecute(st.writes_name, st.writes_name);
    // The arguments its statement was prepared for: after a reload that changed them, the old
    // statement runs once more with them (its results unused) rather than fail the batch.
    batch.AddExecute(st.rows_name, st.rows_name, StatementBatch::Phase::kMain,
                     st.rows_param ? live.array : "");
    ++ready;
  }
  BatchResults results;
  if (ready < 2) return results;
  if (!batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &results).ok()) return BatchResults();
  return results;
}

Status ReadTable(const PollContext& ctx, const LeaseTableConfig& table,
                 const LiveTransactions& live, TableState* st, LeaseTableData* out,
                 const BatchResults* joint) {
  out->table = table.label();
  out->has_expiry = table.has_expiry();
  out->has_taken_at = table.taken_at.present();
  out->row_lock = table.row_lock;
  out->queue = table.queue.value_or(false);
  out->queue_detectable = !table.queue.has_value();
  out->filtered = !table.held_sql.empty() || !table.where_sql.empty() || table.row_lock;
  const auto now = StatementBackoff::Clock::now();
  if (!st->backoff.Due(now)) {
    out->error = st->last_error;  // still this table's error until a try says otherwise
    return Status::Ok();
  }
  bool failed = false;
  const Status s = CheckAndRead(ctx, table, live, joint, st, out, &failed);
  if (failed && !ctx.conn->Broken()) {
    st->backoff.Failed(now, ctx.poll->interval);
    st->last_error = out->error;
  } else if (s.ok()) {
    st->backoff.Succeeded();
  }
  return s;
}

Status ReadLeaseTableOnce(const PollContext& ctx, const LeaseTableConfig& table,
                          LeaseTableData* out) {
  // No pg_locks read here: a row_lock table's rows locked by a live transaction are judged by
  // the transaction's status alone (held, by a session it does not name).
  TableState st;
  const LiveTransactions none;
  return ReadTable(ctx, table, none, &st, out);
}

}  // namespace pglock
