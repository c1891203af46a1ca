#include "exporter/collectors/leases.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exporter/pg/columns.h"
#include "exporter/pg/session.h"
#include "exporter/queries.h"
#include "exporter/util/backoff.h"

namespace pglock {
namespace {

using prometheus::MetricType;

const MetricDesc kTableUp{"pglock_lease_table_up",
                          MetricType::Gauge,
                          "1 if the lease table could be read at the last poll.",
                          {"target", "table"}};
const MetricDesc kLeases{
    "pglock_leases", MetricType::Gauge, "Lease rows by state.", {"target", "table", "state"}};
const MetricDesc kLeaseHeld{"pglock_lease_held",
                            MetricType::Gauge,
                            "1 while expires_at (or taken_at + ttl) > now(); for a table without "
                            "an expiry, 1 for every row matched by held_sql.",
                            {"target", "table", "lease"}};
const MetricDesc kLeaseAge{"pglock_lease_age_seconds",
                           MetricType::Gauge,
                           "now() - taken_at; for a table without taken_at, the time since the "
                           "exporter first saw the row held by its holder.",
                           {"target", "table", "lease"}};
const MetricDesc kLeaseExpiresIn{"pglock_lease_expires_in_seconds",
                                 MetricType::Gauge,
                                 "expires_at (or taken_at + ttl) - now(), negative once expired; "
                                 "absent for a table without an expiry.",
                                 {"target", "table", "lease"}};
// Its label names after `lease` are `holder`, or the table's holder_labels.
const MetricDesc kLeaseHolderInfo{"pglock_lease_holder_info",
                                  MetricType::Gauge,
                                  "Who holds the lease (value 1).",
                                  {"target", "table", "lease", "holder"}};
const MetricDesc kTransitions{
    "pglock_lease_transitions_total",
    MetricType::Counter,
    "Lease changes between polls: acquired, released (row gone or expiry moved back by its "
    "holder), renewed, handover (given back and taken by another), expired_takeover (work may "
    "have run twice), overlap (changed holder while valid and not given back: mutual exclusion "
    "broken).",
    {"target", "table", "lease", "kind"}};

const MetricDesc kRowLockHeld{
    "pglock_row_lock_held_seconds",
    MetricType::Gauge,
    "A row of a row_lock table held by a session's open transaction (it locked or changed the "
    "row): seconds since the exporter first saw it held by that session, or since the session's "
    "last state change when it was then not running a statement (top_n by age).",
    {"target", "table", "lease", "pid", "application_name", "client_addr", "usename", "state"}};

const MetricDesc kMaxHold{"pglock_lease_max_hold_seconds",
                          MetricType::Gauge,
                          "The table's configured max_hold: how long a lease may be held before "
                          "PglockLeaseHeldTooLong fires (absent: the rule's default, 1h).",
                          {"target", "table"}};

// What the collector remembers of each table between polls.
struct TableState {
  bool checked = false;  // the types passed the check on this poller's connection
  struct Seen {
    std::string holder;
    double since = 0;
  };
  std::map<std::string, Seen> first_held;  // by lease name; tables without taken_at
};

// The session of one other database of the target's server ([[targets.leases]] database), with
// a backoff of its own: a database that is gone or refuses connections costs a connect attempt
// now and then, not one per poll.
struct DatabaseSession {
  std::unique_ptr<PgConnection> conn;
  int failures = 0;       // consecutive failed connects or reads
  int polls_to_skip = 0;  // polls left before the next connect attempt
  std::string error;      // why the last attempt failed; its tables report it meanwhile
};

// The subtransaction ids a session held at the last inventory, under its top-level xid.
struct SubXids {
  uint32_t top = 0;
  std::vector<uint32_t> subs;
};

class LeasesState : public CollectorState {
 public:
  std::map<std::string, TableState> tables;          // by table label
  std::map<std::string, DatabaseSession> databases;  // by database name
  std::unordered_map<int, SubXids> subxids;          // by pid, from the last inventory
};

// The live transaction ids of this poll and their sessions (see leases.h). Refreshes st->subxids
// on an inventory.
std::unordered_map<uint32_t, int> LiveXids(const PollData& data, LeasesState* st) {
  std::unordered_map<uint32_t, int> live;
  std::unordered_map<int, uint32_t> top;  // pid -> backend_xid
  for (const Session& s : data.sessions) {
    if (s.backend_xid) top[s.pid] = *s.backend_xid;
  }
  if (data.xact_locks_read) {
    st->subxids.clear();
    for (const TransactionLock& l : data.xact_locks) {
      live[l.xid] = l.pid;
      const auto it = top.find(l.pid);
      if (it == top.end() || it->second == l.xid) continue;
      SubXids& sub = st->subxids[l.pid];
      sub.top = it->second;
      sub.subs.push_back(l.xid);
    }
    return live;
  }
  for (const auto& [pid, xid] : top) {
    live[xid] = pid;
    const auto it = st->subxids.find(pid);
    if (it == st->subxids.end() || it->second.top != xid) continue;
    for (uint32_t sub : it->second.subs) live[sub] = pid;
  }
  return live;
}

// The xid[] literal of `live`'s ids: '{1,2,3}'.
std::string XidArray(const std::unordered_map<uint32_t, int>& live) {
  std::string out = "'{";
  for (const auto& [xid, pid] : live) {
    if (out.size() > 2) out += ',';
    out += std::to_string(xid);
  }
  return out + "}'";
}

// Polls to skip after `failures` consecutive failures before trying again: 0, 1, 3, 7, ... (the
// target's own RetryDelay, counted in polls).
int PollsToSkip(int failures, Duration interval) {
  return static_cast<int>(RetryDelay(failures, interval) / std::max(interval, Duration(1))) - 1;
}

// "schema"."table" or "table"; "" when an identifier cannot be quoted (connection gone).
std::string QuotedRelation(const PgConnection& conn, const LeaseTableConfig& table) {
  std::string relation = conn.QuoteIdentifier(table.relation);
  if (relation.empty()) return "";
  if (!table.schema.empty()) {
    const std::string schema = conn.QuoteIdentifier(table.schema);
    if (schema.empty()) return "";
    relation = schema + "." + relation;
  }
  return relation;
}

// An SQL fragment without its comment lines, on one line: it is spliced into another query's
// template, whose own comments may quote its placeholder.
std::string OneLine(std::string_view sql) {
  std::string out;
  while (!sql.empty()) {
    const size_t end = std::min(sql.find('\n'), sql.size());
    const std::string_view line = sql.substr(0, end);
    if (line.substr(0, 2) != "--") {
      if (!out.empty()) out += ' ';
      out += line;
    }
    sql.remove_prefix(std::min(end + 1, sql.size()));
  }
  return out;
}

// A field as SQL over the row `t`: t."column", (expression), or `absent` when the table has none.
// "" when the column cannot be quoted.
std::string FieldSql(const PgConnection& conn, const LeaseField& f, const std::string& absent) {
  if (!f.sql.empty()) return "(" + f.sql + ")";
  if (f.column.empty()) return absent;
  const std::string quoted = conn.QuoteIdentifier(f.column);
  return quoted.empty() ? "" : "t." + quoted;
}

// The expiry as SQL: the field, taken_at + ttl, or a NULL timestamptz.
std::string ExpirySql(const PgConnection& conn, const LeaseTableConfig& table) {
  if (table.ttl > Duration(0)) {
    const std::string taken_at = FieldSql(conn, table.taken_at, "");
    if (taken_at.empty()) return "";
    return "((" + taken_at + ")::timestamptz + interval '" + std::to_string(table.ttl.count()) +
           " milliseconds')";
  }
  return FieldSql(conn, table.expires_at, "NULL::timestamptz");
}

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
// (*error says why). The Status is not ok only when the connection was lost.
Status RunAlone(const PollContext& ctx, const std::string& name, const std::string& sql,
                BatchResults* results, std::string* error) {
  StatementBatch batch;
  batch.Add(name, sql);
  if (Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, results); !s.ok()) {
    *error = s.message();
    return ctx.conn->Broken() ? s : Status::Ok();
  }
  return Status::Ok();
}

// The server's type of one field, from the catalog for a column, from the expression itself for
// SQL. *problem (with its config key) when it cannot be had or is not one of `want`.
Status CheckField(const PollContext& ctx, const LeaseTableConfig& table,
                  const std::string& relation, const std::string& field, const LeaseField& f,
                  const std::vector<std::string>& want, const std::string& want_text,
                  std::string* problem) {
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
  if (Status s = RunAlone(ctx, "lease_table_check", sql, &results, &error); !s.ok()) return s;
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
// found (file:line: key: message), "" when there is none.
Status CheckTable(const PollContext& ctx, const LeaseTableConfig& table,
                  const std::string& relation, std::string* problem) {
  BatchResults results;
  std::string error;
  const std::string exists =
      FillTemplate(queries::kLeaseTableCheck, {{"table", relation}, {"field", "NULL::text"}});
  if (Status s = RunAlone(ctx, "lease_table_check", exists, &results, &error); !s.ok()) return s;
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
    if (Status s = CheckField(ctx, table, relation, c.field, c.f, *c.want, c.want_text, problem);
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
    if (Status s = RunAlone(ctx, "lease_table_probe", probe, &results, &failed); !s.ok()) return s;
    if (!failed.empty()) {
      *problem = table.Problem(key, "\"" + *sql + "\": " + failed);
      return Status::Ok();
    }
  }
  *problem = table.Problem("table", error);
  return Status::Ok();
}

// Held by the table's own clock: before its expiry, or matched by held_sql (no expiry).
bool IsHeld(const LeaseTableData& t, const LeaseRow& row) {
  return !t.has_expiry || row.expires_at > t.now;
}

// What a row_lock table's rows are matched against: this poll's live transaction ids.
struct LiveTransactions {
  std::unordered_map<uint32_t, int> pids;          // xid -> pid
  std::string array = "'{}'";                      // the xid[] literal of pids' keys
  std::unordered_map<int, const Session*> by_pid;  // the poll's sessions
};

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
    row.name = r.String(i, name);
    row.holder = r.String(i, holder);
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

// Reads one table into *out; the Status is not ok only when the target's connection was lost.
Status ReadTable(const PollContext& ctx, const LeaseTableConfig& table,
                 const LiveTransactions& live, TableState* st, LeaseTableData* out) {
  out->table = table.label();
  out->has_expiry = table.has_expiry();
  out->has_taken_at = table.taken_at.present();
  out->row_lock = table.row_lock;
  out->filtered = !table.held_sql.empty() || !table.where_sql.empty() || table.row_lock;
  const std::string relation = QuotedRelation(*ctx.conn, table);
  const std::string sql = LeaseTableSql(*ctx.conn, table, ctx.poll->max_leases, live.array);
  const std::string writes_sql = LeaseTableWritesSql(*ctx.conn, table);
  if (relation.empty() || sql.empty() || writes_sql.empty()) {
    out->error = "cannot quote identifiers";
    return ctx.conn->Broken() ? Status::ConnectionLost(out->error) : Status::Ok();
  }
  if (!st->checked) {
    if (Status s = CheckTable(ctx, table, relation, &out->error); !s.ok()) return s;
    if (!out->error.empty()) return Status::Ok();
    st->checked = true;
  }
  StatementBatch batch;
  // The counters first: see queries/lease_table_writes.sql.
  batch.Add("lease_table_writes", writes_sql);
  batch.Add("lease_table", sql);
  BatchResults results;
  if (Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &results); !s.ok()) {
    if (ctx.conn->Broken()) return s;
    // A table dropped or altered since its check: the next poll checks it again.
    st->checked = false;
    return BlameReadError(ctx, table, relation, s.message(), &out->error);
  }
  if (Status s = ParseWrites(*results.Find("lease_table_writes"), out); !s.ok()) {
    out->error = s.message();
    return Status::Ok();
  }
  if (Status s = ParseRows(*results.Find("lease_table"), out); !s.ok()) {
    out->error = s.message();
    return Status::Ok();
  }
  if (out->row_lock) MatchRowLocks(live, out);
  if (!out->has_taken_at || out->row_lock) StampFirstHeld(live, st, out);
  out->ok = true;
  return Status::Ok();
}

// Opens the session of `database` unless it is open or backing off; "" when it is usable, else
// why not.
std::string EnsureDatabaseSession(const PollContext& ctx, const std::string& database,
                                  const std::vector<const LeaseTableConfig*>& tables,
                                  LeasesState* st) {
  DatabaseSession& db = st->databases[database];
  if (db.conn && !db.conn->Broken()) return "";
  db.conn.reset();
  if (db.polls_to_skip > 0) {
    --db.polls_to_skip;
    return db.error;
  }
  if (Status s = OpenSession(ctx.target->dsn, database, ctx.deadline, ctx.abort, &db.conn);
      !s.ok()) {
    db.conn.reset();
    db.error = "database \"" + database + "\": " + s.message();
    db.polls_to_skip = PollsToSkip(++db.failures, ctx.poll->interval);
    return db.error;
  }
  // A new session: its tables' types are checked on it before their first read.
  for (const LeaseTableConfig* t : tables) st->tables[t->label()].checked = false;
  return "";
}

// Reads the tables of one other database through its own session. Every failure, the session's
// included, is those tables' error: the target's poll never fails for them.
void ReadDatabase(const PollContext& ctx, const std::string& database,
                  const std::vector<const LeaseTableConfig*>& tables, const LiveTransactions& live,
                  LeasesState* st, PollData* data) {
  std::string error = EnsureDatabaseSession(ctx, database, tables, st);
  DatabaseSession& db = st->databases[database];
  PollContext db_ctx = ctx;
  db_ctx.conn = db.conn.get();
  for (const LeaseTableConfig* t : tables) {
    data->leases.emplace_back();
    LeaseTableData& out = data->leases.back();
    out.now = data->now;  // a read without rows keeps the poll's clock
    if (!error.empty()) {
      out.table = t->label();
      out.error = error;
      continue;
    }
    TableState& ts = st->tables[t->label()];
    if (Status s = ReadTable(db_ctx, *t, live, &ts, &out); !s.ok()) {
      ts.checked = false;
      db.conn.reset();
      error = db.error = "database \"" + database + "\": " + s.message();
      db.polls_to_skip = PollsToSkip(++db.failures, ctx.poll->interval);
      out.ok = false;
      out.error = error;
    }
  }
  if (error.empty()) db.failures = 0;
}

}  // namespace

std::string LeaseTableSql(const PgConnection& conn, const LeaseTableConfig& table, int limit,
                          const std::string& xids) {
  const std::string relation = QuotedRelation(conn, table);
  if (relation.empty()) return "";
  const std::string expires_at = ExpirySql(conn, table);
  std::string where = table.where_sql.empty() ? "true" : "(" + table.where_sql + ")";
  std::string held = table.held_sql.empty() ? "" : "(" + table.held_sql + ") IS TRUE";
  const std::string row_lock =
      table.row_lock ? FillTemplate(OneLine(queries::kRowLockHeld), {{"xids", xids}}) : "false";
  if (table.row_lock) held = held.empty() ? row_lock : "(" + held + " OR " + row_lock + ")";
  if (!held.empty()) where += " AND " + held;
  const std::vector<std::pair<std::string, std::string>> values = {
      {"table", relation},
      {"name", FieldSql(conn, table.name, "")},
      {"holder", FieldSql(conn, table.holder, "NULL::text")},
      {"taken_at", FieldSql(conn, table.taken_at, "NULL::timestamptz")},
      {"expires_at", expires_at},
      {"held", table.has_expiry() ? "(" + expires_at + ")::timestamptz > now()" : "true"},
      {"where", where},
      {"limit", std::to_string(limit)},
      {"xmax", table.row_lock ? "t.xmax::text" : "NULL::text"},
      {"row_locked", row_lock},
  };
  for (const auto& [k, v] : values) {
    if (v.empty()) return "";
  }
  return FillTemplate(queries::kLeaseTable, values);
}

std::string LeaseTableWritesSql(const PgConnection& conn, const LeaseTableConfig& table) {
  const std::string relation = QuotedRelation(conn, table);
  if (relation.empty()) return "";
  const std::string literal = conn.QuoteLiteral(relation);
  if (literal.empty()) return "";
  return FillTemplate(queries::kLeaseTableWrites, {{"relation", literal}});
}

std::string LeaseTableRelation(const PgConnection& conn, const LeaseTableConfig& table) {
  return QuotedRelation(conn, table);
}

Status ReadLeaseTableOnce(const PollContext& ctx, const LeaseTableConfig& table,
                          LeaseTableData* out) {
  // No pg_locks read here: a row_lock table's rows locked by a live transaction are judged by
  // the transaction's status alone (held, by a session it does not name).
  TableState st;
  const LiveTransactions none;
  return ReadTable(ctx, table, none, &st, out);
}

std::unique_ptr<CollectorState> LeasesCollector::NewState() const {
  return std::make_unique<LeasesState>();
}

Status LeasesCollector::Collect(const PollContext& ctx, CollectorState* state,
                                PollData* data) const {
  auto* st = static_cast<LeasesState*>(state);
  LiveTransactions live;
  if (std::any_of(ctx.target->leases.begin(), ctx.target->leases.end(),
                  [](const LeaseTableConfig& t) { return t.row_lock; })) {
    live.pids = LiveXids(*data, st);
    live.array = XidArray(live.pids);
    for (const Session& s : data->sessions) live.by_pid[s.pid] = &s;
  }
  std::map<std::string, std::vector<const LeaseTableConfig*>> elsewhere;  // by database
  for (const LeaseTableConfig& t : ctx.target->leases) {
    // Not read at all: no series, so a replicated lease pages on the primary only.
    if (data->in_recovery && !t.read_on_standby) continue;
    if (!t.database.empty()) {
      elsewhere[t.database].push_back(&t);
      continue;
    }
    data->leases.emplace_back();
    data->leases.back().now = data->now;  // a read without rows keeps the poll's clock
    TableState& ts = st->tables[t.label()];
    if (Status s = ReadTable(ctx, t, live, &ts, &data->leases.back()); !s.ok()) {
      // The next connection checks the types again.
      ts.checked = false;
      return s.WithContext("lease table " + t.table);
    }
  }
  // Other databases last: one that hangs can use up the rest of the poll's deadline, but never
  // the target's own reads.
  for (const auto& [database, tables] : elsewhere) {
    ReadDatabase(ctx, database, tables, live, st, data);
  }
  // Sessions of databases no longer configured (a reload) are closed.
  std::erase_if(st->databases, [&](const auto& d) { return elsewhere.count(d.first) == 0; });
  return Status::Ok();
}

bool LeasesCollector::Healthy(const PollData& data) const {
  for (const LeaseTableData& t : data.leases) {
    if (!t.ok) return false;
  }
  return true;
}

void LeasesCollector::BuildView(const PollData& data, const ViewContext& ctx,
                                TargetView* view) const {
  for (const LeaseTableData& t : data.leases) {
    LeaseTableView tv;
    tv.table = t.table;
    tv.ok = t.ok;
    tv.held = t.held;
    tv.expired = t.expired;
    tv.has_expiry = t.has_expiry;
    const LeaseTableRules* rules = nullptr;
    for (const LeaseTableRules& r : ctx.options->lease_rules) {
      if (r.table == t.table) rules = &r;
    }
    if (rules != nullptr) tv.max_hold = rules->max_hold;
    const bool split = rules != nullptr && rules->matcher && !rules->holder_labels.empty();
    if (split) tv.holder_labels = rules->holder_labels;
    for (const LeaseRow& row : t.rows) {
      LeaseView lv;
      lv.lease = row.name;
      lv.holder = row.holder;
      lv.held = IsHeld(t, row);
      lv.age = t.now - row.taken_at;
      if (t.has_expiry) lv.expires_in = row.expires_at - t.now;
      if (row.pid != 0) {
        const Session* s = ctx.index->Find(row.pid);
        lv.session = IdentityOf(s, row.pid);
        if (s != nullptr && s->xact_start) lv.xact_seconds = std::max(0.0, t.now - *s->xact_start);
        view->row_locks.push_back({t.table, row.name, lv.session, lv.age, lv.xact_seconds});
      }
      if (split) {
        auto parts = rules->matcher->Match(row.holder);
        lv.holder_parts =
            parts ? std::move(*parts) : std::vector<std::string>(rules->holder_labels.size());
      }
      tv.leases.push_back(std::move(lv));
    }
    view->leases.push_back(std::move(tv));
  }
  (*ctx.dropped)[kRowLockHeld.name] = KeepTopN(
      &view->row_locks, ctx.top_n,
      [](const RowLockHolder& a, const RowLockHolder& b) { return a.seconds > b.seconds; });
}

namespace {

// The series of every lock table and its rows.
void ExposeTables(const TargetSnapshot& snap, const TargetView& v, Families* f) {
  const std::string& tg = snap.target;
  for (const LeaseTableView& lt : v.leases) {
    f->Add(kTableUp, {tg, lt.table}, lt.ok ? 1 : 0);
    if (lt.max_hold > 0) f->Add(kMaxHold, {tg, lt.table}, lt.max_hold);
    if (!lt.ok) continue;
    f->Add(kLeases, {tg, lt.table, "held"}, static_cast<double>(lt.held));
    f->Add(kLeases, {tg, lt.table, "expired"}, static_cast<double>(lt.expired));
    for (const LeaseView& l : lt.leases) {
      f->Add(kLeaseHeld, {tg, lt.table, l.lease}, l.held ? 1 : 0);
      f->Add(kLeaseAge, {tg, lt.table, l.lease}, l.age);
      if (l.expires_in) f->Add(kLeaseExpiresIn, {tg, lt.table, l.lease}, *l.expires_in);
      Families::Labels hl = {{"target", tg}, {"table", lt.table}, {"lease", l.lease}};
      if (lt.holder_labels.empty()) {
        hl.emplace_back("holder", l.holder);
      } else {
        for (size_t i = 0; i < lt.holder_labels.size(); ++i) {
          hl.emplace_back(lt.holder_labels[i], i < l.holder_parts.size() ? l.holder_parts[i] : "");
        }
      }
      f->AddLabelled(kLeaseHolderInfo, hl, 1);
    }
  }
}

}  // namespace

void LeasesCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                 Families* f) const {
  ExposeTables(snap, v, f);
  for (const RowLockHolder& r : v.row_locks) {
    f->Add(kRowLockHeld,
           {snap.target, r.table, r.lease, std::to_string(r.holder.pid), r.holder.application_name,
            AddrLabel(r.holder.client_addr), r.holder.usename, StateLabel(r.holder.state)},
           r.seconds);
  }
}

void LeasesCollector::ExposeCounters(const TargetSnapshot& snap, Families* f) const {
  for (const auto& [k, n] : snap.counters.lease_transitions) {
    f->Add(kTransitions, {snap.target, std::get<0>(k), std::get<1>(k), std::get<2>(k)}, n);
  }
}

PGLOCK_REGISTER_COLLECTOR(LeasesCollector, 90);

}  // namespace pglock
