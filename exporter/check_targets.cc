#include "exporter/check_targets.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/check_targets_internal.h"
#include "exporter/collectors/lease_read.h"
#include "exporter/collectors/lease_sql.h"
#include "exporter/pg/batch.h"
#include "exporter/pg/columns.h"
#include "exporter/pg/conninfo.h"
#include "exporter/pg/session.h"
#include "exporter/poll/resolve_lock_names.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

// The key of the DSN as configured (dsn or dsn_file).
std::string DsnKey(const std::map<std::string, int>& lines, const std::string& base) {
  return lines.count(base + "_file") != 0 ? base + "_file" : base;
}

// --- Named locks ---------------------------------------------------------------------------

const char* Derivation(const LockNameConfig& lock) {
  switch (lock.kind) {
    case LockNameConfig::Kind::kBigint:
      return "key";
    case LockNameConfig::Kind::kPair:
      return "key1, key2";
    case LockNameConfig::Kind::kBigintText:
      return "hashtextextended(key_text, 0)";
    case LockNameConfig::Kind::kPairText:
      return "key1, hashtext(key2_text)";
    case LockNameConfig::Kind::kBigintSql:
      return "key_sql";
    case LockNameConfig::Kind::kPairSql:
      return "key1_sql, key2_sql";
  }
  return "";
}

constexpr char kNotHeld[] = "not held now";

// "not held now", or "held now by pid 12 (database "app", application_name "x")", ...
Status Holders(PgConnection& conn, const AdvisoryKey& key, SteadyClock::time_point deadline,
               std::string* out) {
  std::optional<PgResult> r;
  if (Status s = conn.ExecOne(
          queries::kCheckLockHolders,
          {std::to_string(key.classid), std::to_string(key.objid), std::to_string(key.objsubid)},
          deadline, &r);
      !s.ok()) {
    return s;
  }
  Columns c(*r, "check_lock_holders");
  const int pid = c["pid"], datname = c["datname"], app = c["application_name"];
  if (Status s = c.status(); !s.ok()) return s;
  *out = r->Rows() == 0 ? kNotHeld : "held now by ";
  for (int i = 0; i < r->Rows(); ++i) {
    *out +=
        (i > 0 ? ", " : "") +
        (r->IsNull(i, pid) ? std::string("a prepared transaction") : "pid " + r->String(i, pid)) +
        " (database \"" + r->String(i, datname) + "\", application_name \"" + r->String(i, app) +
        "\")";
  }
  return Status::Ok();
}

// For a lock not held now: the advisory keys of its form (one bigint, two int4) held right now,
// the most held first, with their holders' applications; "" when none.
Status SameFormKeys(PgConnection& conn, const AdvisoryKey& key, SteadyClock::time_point deadline,
                    std::string* out) {
  std::optional<PgResult> r;
  if (Status s =
          conn.ExecOne(queries::kCheckSameFormKeys, {std::to_string(key.objsubid)}, deadline, &r);
      !s.ok()) {
    return s;
  }
  Columns c(*r, "check_same_form_keys");
  const int classid = c["classid"], objid = c["objid"], holders = c["holders"],
            apps = c["applications"], total = c["total"];
  if (Status s = c.status(); !s.ok()) return s;
  out->clear();
  for (int i = 0; i < r->Rows(); ++i) {
    AdvisoryKey k = key;
    k.classid = static_cast<uint32_t>(r->Int(i, classid).value_or(0));
    k.objid = static_cast<uint32_t>(r->Int(i, objid).value_or(0));
    *out += (i > 0 ? ", " : "") + RenderAdvisoryKey(k) + " (" + r->String(i, holders) +
            " holder(s), application_name \"" + r->String(i, apps) + "\")";
  }
  if (r->Rows() > 0) *out = r->String(0, total) + " key(s) of its form held now: " + *out;
  return Status::Ok();
}

// One named lock: its key as the server computes it and who holds it now.
Status CheckLock(PgConnection& conn, const LockNameConfig& lock, const TargetCheck& tc) {
  LockNames names;
  std::vector<std::string> problems;
  if (Status s = ResolveLockNames(conn, {lock}, tc.timeouts, tc.Deadline(), &names, &problems);
      !s.ok()) {
    return s;
  }
  for (const std::string& p : problems) {
    tc.report->Problem(p,
                       "correct the expression: the server must evaluate it to one integer "
                       "without error (try it with SELECT in psql)");
  }
  if (names.empty()) {
    tc.report->Fact("lock \"" + lock.name + "\": no key (" + Derivation(lock) + " failed)");
    return Status::Ok();
  }
  const auto& [k, name] = *names.begin();
  AdvisoryKey key;
  std::tie(key.classid, key.objid, key.objsubid) = k;
  std::string holders;
  if (Status s = Holders(conn, key, tc.Deadline(), &holders); !s.ok()) return s;
  tc.report->Fact("lock \"" + lock.name + "\": key " + RenderAdvisoryKey(key) + " (" +
                  Derivation(lock) + "), " + holders);
  if (holders != kNotHeld) return Status::Ok();
  // Not held is normal for a job that is not running: advice, not a problem.
  std::string others;
  if (Status s = SameFormKeys(conn, key, tc.Deadline(), &others); !s.ok()) return s;
  if (!others.empty()) {
    tc.report->Advice(
        lock.Problem("name", "lock \"" + lock.name + "\" (key " + RenderAdvisoryKey(key) +
                                 ") is not held now; " + others),
        "if one of them is this lock, the recipe derives another key than the "
        "application: compare " +
            std::string(Derivation(lock)) + " with the application's call");
  }
  return Status::Ok();
}

// --- Lock tables ---------------------------------------------------------------------------

struct TableInfo {
  bool found = false;
  bool may_select = false;
  std::string schema;  // quoted where needed
  std::string owner;   // likewise
  std::string columns;
};

Status ReadTableInfo(PgConnection& conn, const std::string& relation,
                     SteadyClock::time_point deadline, TableInfo* info) {
  std::optional<PgResult> r;
  if (Status s = conn.ExecOne(queries::kCheckLeaseTable, {relation}, deadline, &r); !s.ok()) {
    return s;
  }
  Columns c(*r, "check_lease_table");
  const int found = c["found"], may_select = c["may_select"], schema = c["schema"],
            owner = c["owner"], columns = c["columns"];
  if (Status s = c.status(); !s.ok()) return s;
  if (r->Rows() != 1) return Status::UnexpectedShape("check_lease_table: not one row");
  *info = {r->Bool(0, found), r->Bool(0, may_select), r->String(0, schema), r->String(0, owner),
           r->String(0, columns)};
  return Status::Ok();
}

// How the table's rows are judged held.
std::string Judgement(const LeaseTableConfig& t) {
  constexpr char kRowLocked[] = "while a live transaction has locked or changed the row";
  std::string out;
  if (t.ttl > Duration(0)) {
    out = "held while taken_at + " + FormatDuration(t.ttl) + " > now()";
  } else if (t.has_expiry()) {
    out = "held while expires_at > now()";
  } else if (!t.held_sql.empty()) {
    out = "held where held_sql (" + t.held_sql + ")" + (t.row_lock ? " or " : "");
  } else {
    out = "held ";
  }
  if (t.row_lock) out += (t.has_expiry() ? " or " : "") + std::string(kRowLocked);
  if (!t.has_expiry()) out += ", no expiry";
  if (!t.where_sql.empty()) out += "; only rows where where_sql (" + t.where_sql + ") are locks";
  return out;
}

// Every row of the table, judged or not; nullopt when the count failed (*error).
Status CountRows(const PollContext& ctx, const std::string& relation, std::optional<int64_t>* total,
                 std::string* error) {
  StatementBatch batch;
  batch.Add("check_lease_table_rows",
            FillTemplate(queries::kCheckLeaseTableRows, {{"table", relation}}));
  BatchResults results;
  if (Status s = batch.Run(*ctx.conn, ctx.timeouts, ctx.deadline, &results); !s.ok()) {
    *error = s.message();
    return ctx.conn->Broken() ? s : Status::Ok();
  }
  *total = results.Find("check_lease_table_rows")->Int(0, 0);
  return Status::Ok();
}

// The problem as "file:line: key: message": the collector's own problems already are.
std::string Located(const LeaseTableConfig& t, const std::string& error) {
  return error.rfind(t.origin.file + ":", 0) == 0 ? error : t.Problem("table", error);
}

// Reads the table as the exporter's first poll would, then counts its rows by judgement.
Status JudgeRows(const PollContext& ctx, const LeaseTableConfig& t, const std::string& relation,
                 const TargetCheck& tc) {
  LeaseTableData data;
  if (Status s = ReadLeaseTableOnce(ctx, t, &data); !s.ok()) return s;
  if (!data.ok) {
    const bool type = data.error.find(", want ") != std::string::npos;
    tc.report->Problem(Located(t, data.error),
                       type ? "name a column of that type, or convert it with the field's _sql "
                              "key (e.g. taken_at_sql = \"to_timestamp(locked_at)\" for epoch "
                              "seconds, held_sql = \"is_locked = 1\" for an integer flag)"
                            : "make the config's columns and expressions match the table (its "
                              "columns are listed above)");
    return Status::Ok();
  }
  std::optional<int64_t> total;
  std::string error;
  if (Status s = CountRows(ctx, relation, &total, &error); !s.ok()) return s;
  if (!total) {
    tc.report->Problem(t.Problem("table", error), "check the table");
    return Status::Ok();
  }
  const int64_t free = *total - data.held - data.expired;
  tc.report->Fact("  " + std::to_string(*total) + " row(s): " + std::to_string(data.held) +
                  " held, " + std::to_string(data.expired) + " expired, " + std::to_string(free) +
                  " free; " + Judgement(t));
  return Status::Ok();
}

std::string GrantFix(const LeaseTableConfig& t, const TableInfo& info, const std::string& role) {
  return "GRANT SELECT ON " + t.table + " TO " + role +
         "; and, since a tool that drops and re-creates the table loses that grant: ALTER DEFAULT "
         "PRIVILEGES FOR ROLE " +
         info.owner + " IN SCHEMA " + info.schema + " GRANT SELECT ON TABLES TO " + role +
         (t.database.empty() ? "" : " (in database " + t.database + ")");
}

// One lock table on `ctx.conn` (the target's session or its database's).
Status CheckLeaseTable(const PollContext& ctx, const LeaseTableConfig& t, const TargetCheck& tc) {
  const std::string relation = LeaseTableRelation(*ctx.conn, t);
  if (relation.empty()) return Status::ConnectionLost("cannot quote identifiers");
  TableInfo info;
  if (Status s = ReadTableInfo(*ctx.conn, relation, ctx.deadline, &info); !s.ok()) return s;
  const std::string in = t.database.empty() ? "" : " in database \"" + t.database + "\"";
  if (!info.found) {
    tc.report->Problem(
        t.Problem("table", "lease table \"" + t.table + "\" does not exist" + in),
        "create it, or set table to its \"schema.table\" (and database to where it lives)");
    return Status::Ok();
  }
  tc.report->Fact("lease table " + t.label() + ": columns " + info.columns + "; SELECT " +
                  (info.may_select ? "granted" : "NOT granted") + " to " + tc.role +
                  (!t.queue.has_value()
                       ? "; a queue if its names turn out to be seen once (queue unset)"
                   : *t.queue ? "; a queue (queue = true): per-table series, none per row"
                              : "; per-name series (queue = false)"));
  if (!info.may_select) {
    tc.report->Problem(t.Problem("table", "role " + tc.role + " may not SELECT " + t.table + in),
                       GrantFix(t, info, tc.role));
    return Status::Ok();
  }
  return JudgeRows(ctx, t, relation, tc);
}

void CheckLeaseTables(PgConnection& target_conn, const TargetCheck& tc) {
  std::map<std::string, std::unique_ptr<PgConnection>> sessions;  // by other database
  for (const LeaseTableConfig& t : tc.target->leases) {
    PgConnection* conn = &target_conn;
    if (!t.database.empty()) {
      std::unique_ptr<PgConnection>& session = sessions[t.database];
      if (!session) {
        if (Status s = OpenSession(tc.target->dsn, t.database, tc.Deadline(), nullptr, &session);
            !s.ok()) {
          tc.report->Problem(
              t.Problem("database",
                        "cannot connect to database \"" + t.database + "\": " + s.message()),
              "check that the database exists and that " + tc.role + " may CONNECT to it");
          continue;
        }
      }
      conn = session.get();
    }
    const PollContext ctx{conn, tc.target, tc.poll, tc.timeouts, tc.Deadline(), nullptr};
    if (Status s = CheckLeaseTable(ctx, t, tc); !s.ok()) {
      tc.report->Problem(t.Problem("table", s.message()), "check the server and run again");
    }
  }
}

// --- Targets and poolers -------------------------------------------------------------------

void CheckPooler(const PoolerConfig& p, const TargetCheck& tc) {
  std::unique_ptr<PgConnection> conn;
  std::optional<PgResult> pools;
  Status s = PgConnection::Connect(p.admin_dsn, {{"application_name", "pglock_exporter"}},
                                   tc.Deadline(), &conn);
  // The admin console speaks only the simple protocol.
  if (s.ok()) s = conn->ExecOne(queries::kPgbouncerPools, {}, tc.Deadline(), &pools);
  if (!s.ok()) {
    tc.report->Problem(
        p.Problem(DsnKey(p.origin.lines, "admin_dsn"),
                  "pooler \"" + p.name + "\": admin console did not answer: " + s.message()),
        "check admin_dsn: PgBouncer's listen address and port, dbname=pgbouncer, and a user "
        "listed in its stats_users or admin_users");
    return;
  }
  const int mode = pools->Column("pool_mode");
  int pooled = 0;
  for (int i = 0; mode >= 0 && i < pools->Rows(); ++i) {
    if (pools->Text(i, mode) != "session") ++pooled;
  }
  tc.report->Fact("pooler \"" + p.name + "\": admin console answered (" +
                  MaskConninfo(p.admin_dsn) + "), " + std::to_string(pools->Rows()) + " pool(s), " +
                  std::to_string(pooled) + " in transaction or statement mode");
}

// Who the exporter is on the server; fills tc->role.
Status Identify(PgConnection& conn, TargetCheck* tc) {
  std::optional<PgResult> r;
  if (Status s = conn.ExecOne(queries::kCheckTarget, {}, tc->Deadline(), &r); !s.ok()) return s;
  Columns c(*r, "check_target");
  const int role = c["role"], database = c["database"], version = c["version"];
  if (Status s = c.status(); !s.ok()) return s;
  tc->role = r->String(0, role);
  tc->report->Fact("connected: PostgreSQL " + r->String(0, version) + ", database \"" +
                   r->String(0, database) + "\", role " + tc->role +
                   ", read-only session, no lock taken");
  return Status::Ok();
}

void CheckOnServer(PgConnection& conn, TargetCheck* tc) {
  Status s = Identify(conn, tc);
  for (size_t i = 0; s.ok() && i < tc->target->locks.size(); ++i) {
    s = CheckLock(conn, tc->target->locks[i], *tc);
  }
  if (!s.ok()) {
    tc->report->Problem(tc->target->Problem(DsnKey(tc->target->origin.lines, "dsn"), s.message()),
                        "check the server and run again");
    return;
  }
  CheckLeaseTables(conn, *tc);
}

void CheckTarget(const TargetConfig& t, const PollConfig& poll, Report* report) {
  report->Section("target \"" + t.name + "\" (" + MaskConninfo(t.dsn) + ")");
  // The role is known once connected; the GRANTs suggested before that name it so.
  TargetCheck tc{&t, &poll, QueryTimeouts::ForPoll(poll.timeout), "<the exporter's role>", report};
  std::unique_ptr<PgConnection> conn;
  if (Status s = OpenSession(t.dsn, "", tc.Deadline(), nullptr, &conn); !s.ok()) {
    conn.reset();
    report->Problem(t.Problem(DsnKey(t.origin.lines, "dsn"),
                              "target \"" + t.name + "\": cannot connect: " + s.message()),
                    "check the DSN, that the server runs, and that pg_hba.conf and the password "
                    "let this user in");
  } else {
    CheckOnServer(*conn, &tc);
  }
  CheckServerLog(conn != nullptr && !conn->Broken() ? conn.get() : nullptr, tc);
  for (const PoolerConfig& p : t.poolers) CheckPooler(p, tc);
}

}  // namespace

int CheckTargets(const Config& config, std::ostream& out) {
  Report report(out);
  for (const TargetConfig& t : config.targets) CheckTarget(t, config.poll, &report);
  if (report.problems() == 0) {
    report.Section("every target resolves" +
                   (report.advice() == 0
                        ? std::string()
                        : " (" + std::to_string(report.advice()) + " ADVICE line(s) above)"));
    return 0;
  }
  report.Section(std::to_string(report.problems()) + " problem(s)");
  return 1;
}

}  // namespace pglock
