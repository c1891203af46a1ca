#include "exporter/collectors/leases.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "exporter/collectors/lease_read.h"
#include "exporter/pg/session.h"
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

const MetricDesc kQueueRows{"pglock_queue_rows",
                            MetricType::Gauge,
                            "Rows of a queue table (a table of work, queue = true) by state: "
                            "held, expired, held_past_max (held longer than its max_hold).",
                            {"target", "table", "state"}};
const MetricDesc kQueueOldest{"pglock_queue_oldest_held_seconds",
                              MetricType::Gauge,
                              "Age of the oldest held row of a queue table (0: none held).",
                              {"target", "table"}};
const MetricDesc kQueueTransitions{
    "pglock_queue_transitions_total",
    MetricType::Counter,
    "Transitions of a queue table's rows between polls, by kind, for the table as a whole (the "
    "kinds of pglock_lease_transitions_total).",
    {"target", "table", "kind"}};
const MetricDesc kMaxHold{"pglock_lease_max_hold_seconds",
                          MetricType::Gauge,
                          "The table's configured max_hold: how long a lease may be held before "
                          "PglockLeaseHeldTooLong fires (absent: the rule's default, 1h).",
                          {"target", "table"}};

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
  std::map<std::string, TableState> tables;  // by table label
  // The target's session whose lease statements this state has swept (SweepLeaseStatements): a
  // state new to a session first deallocates what an earlier state prepared on it.
  uint64_t swept_session = 0;
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
  // A session-mode pooler without a reset query can hand back a server session with statements
  // an earlier exporter prepared under the names this one will use.
  std::vector<PgResult> ignored;
  if (Status s = db.conn->Exec("DEALLOCATE ALL", {}, ctx.deadline, &ignored); !s.ok()) {
    db.conn.reset();
    db.error = "database \"" + database + "\": " + s.message();
    db.polls_to_skip = PollsToSkip(++db.failures, ctx.poll->interval);
    return db.error;
  }
  // A new session: its tables' types are checked on it before their first read.
  for (const LeaseTableConfig* t : tables) st->tables[t->label()].checked = false;
  return "";
}

// Sweeps the lease statements of the session of `ctx` that no configured table names, when a table
// of it left some or `forced`; the flags are cleared once the sweep succeeded. False when it did
// not run or failed (tried again at the next poll).
bool SweepIfAsked(const PollContext& ctx, LeasesState* st, bool forced) {
  const uint64_t session = ctx.conn->serial();
  const bool asked =
      forced || std::any_of(st->tables.begin(), st->tables.end(), [&](const auto& entry) {
        return entry.second.session == session && entry.second.left_statements;
      });
  if (!asked || ctx.conn->Broken()) return false;
  std::set<std::string> keep;
  for (const auto& [label, t] : st->tables) {
    if (t.session == session && !t.rows_name.empty()) keep.insert({t.rows_name, t.writes_name});
  }
  if (!SweepLeaseStatements(ctx, keep).ok()) return false;
  for (auto& [label, t] : st->tables) {
    if (t.session == session) t.left_statements = false;
  }
  return true;
}

// Reads the tables of one other database through its own session. Every failure, the session's
// included, is those tables' error: the target's poll never fails for them.
void ReadDatabase(const PollContext& ctx, const std::string& database,
                  const std::vector<const LeaseTableConfig*>& tables, const LiveTransactions& live,
                  const std::set<uint64_t>& to_sweep, LeasesState* st, PollData* data) {
  std::string error = EnsureDatabaseSession(ctx, database, tables, st);
  DatabaseSession& db = st->databases[database];
  PollContext db_ctx = ctx;
  db_ctx.conn = db.conn.get();
  BatchResults joint;
  if (error.empty()) {
    std::vector<TableState*> states;
    for (const LeaseTableConfig* t : tables) states.push_back(&st->tables[t->label()]);
    joint = ReadPreparedTogether(db_ctx, tables, states, live);
  }
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
    if (Status s = ReadTable(db_ctx, *t, live, &ts, &out, &joint); !s.ok()) {
      ts.checked = false;
      db.conn.reset();
      error = db.error = "database \"" + database + "\": " + s.message();
      db.polls_to_skip = PollsToSkip(++db.failures, ctx.poll->interval);
      out.ok = false;
      out.error = error;
    }
  }
  if (error.empty()) {
    db.failures = 0;
    SweepIfAsked(db_ctx, st, to_sweep.count(db.conn->serial()) != 0);
  }
}

}  // namespace

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
  std::vector<const LeaseTableConfig*> own;                               // the target's database's
  for (const LeaseTableConfig& t : ctx.target->leases) {
    // Not read at all: no series, so a replicated lease pages on the primary only.
    if (data->in_recovery && !t.read_on_standby) continue;
    if (!t.database.empty()) {
      elsewhere[t.database].push_back(&t);
    } else {
      own.push_back(&t);
    }
  }
  // Tables no longer configured (a reload): their states go, and their statements with a sweep of
  // the session they were prepared on.
  std::set<std::string> labels;
  for (const LeaseTableConfig& t : ctx.target->leases) labels.insert(t.label());
  std::set<uint64_t> to_sweep;
  for (auto it = st->tables.begin(); it != st->tables.end();) {
    if (labels.count(it->first) != 0) {
      ++it;
      continue;
    }
    if (!it->second.rows_name.empty() || it->second.left_statements) {
      to_sweep.insert(it->second.session);
    }
    it = st->tables.erase(it);
  }
  std::vector<TableState*> states;
  for (const LeaseTableConfig* t : own) states.push_back(&st->tables[t->label()]);
  const BatchResults joint = ReadPreparedTogether(ctx, own, states, live);
  for (size_t i = 0; i < own.size(); ++i) {
    const LeaseTableConfig& t = *own[i];
    data->leases.emplace_back();
    data->leases.back().now = data->now;  // a read without rows keeps the poll's clock
    TableState& ts = *states[i];
    if (Status s = ReadTable(ctx, t, live, &ts, &data->leases.back(), &joint); !s.ok()) {
      // The next connection checks the types again.
      ts.checked = false;
      return s.WithContext("lease table " + t.table);
    }
  }
  // A state new to the session (its first poll, or every collector state replaced by a reload of
  // the poolers) first finds what an earlier one left there.
  if (SweepIfAsked(ctx, st,
                   (!own.empty() && st->swept_session != ctx.conn->serial()) ||
                       to_sweep.count(ctx.conn->serial()) != 0)) {
    st->swept_session = ctx.conn->serial();
  }
  // Other databases last: one that hangs can use up the rest of the poll's deadline, but never
  // the target's own reads.
  for (const auto& [database, tables] : elsewhere) {
    ReadDatabase(ctx, database, tables, live, to_sweep, st, data);
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
    tv.queue = t.queue || (ctx.options->detected_queues != nullptr &&
                           ctx.options->detected_queues->count(t.table) != 0);
    const bool split = rules != nullptr && rules->matcher && !rules->holder_labels.empty();
    if (split) tv.holder_labels = rules->holder_labels;
    for (const LeaseRow& row : t.rows) {
      LeaseView lv;
      lv.lease = row.name;
      lv.holder = row.holder;
      lv.held = IsHeld(t, row);
      lv.age = t.now - row.taken_at;
      if (t.has_expiry) lv.expires_in = row.expires_at - t.now;
      if (tv.queue && lv.held) {
        tv.oldest_held = std::max(tv.oldest_held, lv.age);
        if (tv.max_hold > 0 && lv.age > tv.max_hold) ++tv.held_past_max;
      }
      if (row.pid != 0) {
        const Session* s = ctx.index->Find(row.pid);
        lv.session = IdentityOf(s, row.pid);
        if (s != nullptr && s->xact_start) lv.xact_seconds = std::max(0.0, t.now - *s->xact_start);
        // A queue's rows have no series; they are on /locks with the table (tv.leases).
        if (!tv.queue)
          view->row_locks.push_back({t.table, row.name, lv.session, lv.age, lv.xact_seconds});
      }
      if (split) lv.holder_parts = rules->matcher->Match(row.holder);
      tv.leases.push_back(std::move(lv));
    }
    if (tv.queue) {  // the worst rows only: held first, then the oldest
      KeepTopN(&tv.leases, ctx.top_n, [](const LeaseView& a, const LeaseView& b) {
        return a.held != b.held ? a.held : a.age > b.age;
      });
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
    if (lt.queue) {
      f->Add(kQueueRows, {tg, lt.table, "held"}, static_cast<double>(lt.held));
      f->Add(kQueueRows, {tg, lt.table, "expired"}, static_cast<double>(lt.expired));
      f->Add(kQueueRows, {tg, lt.table, "held_past_max"}, static_cast<double>(lt.held_past_max));
      f->Add(kQueueOldest, {tg, lt.table}, lt.oldest_held);
      continue;
    }
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
        const std::vector<std::string>* parts = l.holder_parts.get();  // null: each label ""
        for (size_t i = 0; i < lt.holder_labels.size(); ++i) {
          hl.emplace_back(lt.holder_labels[i],
                          parts != nullptr && i < parts->size() ? (*parts)[i] : "");
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
  for (const auto& [k, n] : snap.counters->lease_transitions) {
    const auto& [table, lease, kind] = k;
    if (lease.empty()) {  // a queue's, for the table as a whole
      f->Add(kQueueTransitions, {snap.target, table, kind}, n);
    } else {
      f->Add(kTransitions, {snap.target, table, lease, kind}, n);
    }
  }
}

PGLOCK_REGISTER_COLLECTOR(LeasesCollector, 90);

}  // namespace pglock
