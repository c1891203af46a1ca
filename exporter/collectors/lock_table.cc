#include "exporter/collectors/lock_table.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "exporter/collectors/verdict_series.h"
#include "exporter/pg/columns.h"
#include "exporter/queries.h"
#include "exporter/snapshot/verdict.h"

namespace pglock {
namespace {

using prometheus::MetricType;

const MetricDesc kEntries{
    "pglock_lock_table_entries",
    MetricType::Gauge,
    "Locks held or awaited in the server's shared lock table (pg_locks rows outside the fast "
    "path), exact, as of pglock_lock_table_last_good_age_seconds ago.",
    {"target"}};
const MetricDesc kSlots{
    "pglock_lock_table_slots",
    MetricType::Gauge,
    "Nominal size of the shared lock table from the server's settings: max_locks_per_transaction "
    "* (max backends + max_prepared_transactions).",
    {"target"}};
const MetricDesc kSessionEntries{
    "pglock_session_lock_table_entries",
    MetricType::Gauge,
    "Shared lock table entries of one session and lock type (top_n by entries): who fills it. "
    "pid 0: prepared transactions.",
    {"target", "datname", "pid", "application_name", "usename", "client_addr", "state",
     "locktype"}};
const MetricDesc kLockManagerWaiters{
    "pglock_lock_manager_waiters",
    MetricType::Gauge,
    "Backends waiting on the lock manager's LWLock (wait_event LockManager): lock-manager "
    "contention, fast-path exhaustion.",
    {"target"}};
const MetricDesc kFull{
    "pglock_lock_table_full",
    MetricType::Gauge,
    "1 when the last poll failed with out of shared memory (SQLSTATE 53200): the shared lock "
    "table is full. The lock-table series then come from a read of the table alone, else from "
    "the last good poll.",
    {"target"}};
const MetricDesc kAge{
    "pglock_lock_table_last_good_age_seconds",
    MetricType::Gauge,
    "Age of pglock_lock_table_entries and the top sessions: 0 after an inventory poll, up to "
    "poll.inventory_interval in the tiered mode, growing while polls fail with the table full.",
    {"target"}};

constexpr char kStatement[] = "lock_table";
constexpr char kFullStatement[] = "lock_table_full";

int64_t Setting(const PgResult& r, int col) { return r.Int(0, col).value_or(0); }

Status ParseSettings(const PgResult& r, LockTableReading* reading) {
  Columns c(r, "lock_table");
  const int max_locks = c["max_locks_per_transaction"], connections = c["max_connections"],
            av_workers = c["autovacuum_max_workers"], av_slots = c["autovacuum_worker_slots"],
            workers = c["max_worker_processes"], senders = c["max_wal_senders"],
            prepared = c["max_prepared_transactions"], waiters = c["lock_manager_waiters"],
            own_pid = c["own_pid"];
  if (Status s = c.status(); !s.ok()) return s;
  if (r.Rows() != 1) return Status::UnexpectedShape("lock_table: expected one row");
  LockTableSettings& s = reading->settings;
  s.max_locks_per_transaction = Setting(r, max_locks);
  s.max_connections = Setting(r, connections);
  s.autovacuum_max_workers = Setting(r, av_workers);
  s.autovacuum_worker_slots = Setting(r, av_slots);
  s.max_worker_processes = Setting(r, workers);
  s.max_wal_senders = Setting(r, senders);
  s.max_prepared_transactions = Setting(r, prepared);
  reading->lock_manager_waiters = Setting(r, waiters);
  reading->own_pid = static_cast<int>(Setting(r, own_pid));
  return Status::Ok();
}

// Every row of the inventory's pg_locks read lies outside the fast path (advisory locks never
// take it, pending requests are in the shared table, the rest came back to be counted), but the
// exporter's own (`own_pid`).
std::vector<LockTableUse> CountEntries(const PollData& data, int own_pid) {
  std::unordered_map<int, int64_t> advisory;  // by pid: there can be 100k rows
  for (const AdvisoryLock& l : data.locks) ++advisory[l.pid];
  std::map<std::pair<int, std::string>, int64_t> other;
  for (const LockWaitRow& w : data.lock_waits) ++other[{w.pid, w.locktype}];
  for (const CountedLock& l : data.counted_locks) other[{l.pid, l.locktype}] += l.entries;
  // Granted transactionid locks come back as detail rows when a row_lock table reads them.
  for (const TransactionLock& l : data.xact_locks) ++other[{l.pid, "transactionid"}];
  std::vector<LockTableUse> use;
  use.reserve(advisory.size() + other.size());
  for (const auto& [pid, n] : advisory) {
    if (pid != own_pid) use.push_back({pid, "advisory", n});
  }
  for (const auto& [key, n] : other) {
    if (key.first != own_pid) use.push_back({key.first, key.second, n});
  }
  return use;
}

// Sums every row into view->entries and keeps the top_n by entries in view->sessions; returns how
// many rows were left out.
int64_t KeepTopSessions(std::vector<SessionLockTableEntries> rows, size_t top_n,
                        LockTableView* view) {
  for (SessionLockTableEntries& r : rows) {
    view->entries += r.entries;
    if (r.session.pid == 0) r.session.state = "prepared";
  }
  const auto more = [](const SessionLockTableEntries& a, const SessionLockTableEntries& b) {
    return std::tie(b.entries, a.session.pid, a.locktype) <
           std::tie(a.entries, b.session.pid, b.locktype);
  };
  const int64_t dropped = KeepTopN(&rows, top_n, more);
  view->sessions = std::move(rows);
  return dropped;
}

}  // namespace

int64_t LockTableSlots(int server_version_num, const LockTableSettings& s) {
  if (s.max_locks_per_transaction <= 0 || s.max_connections <= 0) return 0;
  int64_t backends = s.max_connections + s.max_worker_processes + s.max_wal_senders;
  if (server_version_num >= 180000) {
    backends += s.autovacuum_worker_slots + 2;
  } else if (server_version_num >= 170000) {
    backends += s.autovacuum_max_workers + 2;
  } else {
    backends += s.autovacuum_max_workers + 1;
  }
  return s.max_locks_per_transaction * (backends + s.max_prepared_transactions);
}

bool LockTableFull(const Status& status) {
  if (status.ok()) return false;
  return status.sqlstate() == kOutOfSharedMemory ||
         (status.sqlstate().empty() &&
          status.message().find("out of shared memory") != std::string::npos);
}

std::vector<PreparedStatement> LockTableCollector::Prepared(int) const {
  return {{kStatement, queries::kLockTable}};
}

void LockTableCollector::Plan(const PollPlan&, StatementBatch* batch) const {
  batch->AddExecute(name(), kStatement);
}

Status LockTableCollector::Parse(const PollPlan& /*plan*/, const BatchResults& results,
                                 PollData* data) const {
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::UnexpectedShape("lock_table: no result");
  LockTableReading* reading = data->parts.Mutable<LockTableReading>();
  if (Status s = ParseSettings(*r, reading); !s.ok()) return s;
  if (data->inventory) {  // not when the inventory fell back to the last one's holders
    *data->parts.Mutable<LockTableCount>() = {CountEntries(*data, reading->own_pid), data->now};
  }
  return Status::Ok();
}

void LockTableCollector::BuildView(const PollData& data, const ViewContext& ctx,
                                   TargetView* view) const {
  LockTableView& v = view->lock_table;
  if (const auto* reading = data.parts.Find<LockTableReading>(); reading != nullptr) {
    v.slots = LockTableSlots(data.server_version_num, reading->settings);
    v.lock_manager_waiters = reading->lock_manager_waiters;
  }
  const auto* count = data.parts.Find<LockTableCount>();
  v.counted = count != nullptr && count->read_at > 0;
  if (!v.counted) return;
  v.age = std::max(0.0, data.now - count->read_at);
  std::vector<SessionLockTableEntries> rows;
  rows.reserve(count->use.size());
  for (const LockTableUse& u : count->use) {
    const Session* s = ctx.index->Find(u.pid);
    rows.push_back({s != nullptr ? s->datname : "", IdentityOf(s, u.pid), u.locktype, u.entries});
  }
  (*ctx.dropped)[kSessionEntries.name] = KeepTopSessions(std::move(rows), ctx.top_n, &v);
}

Status ReadFullLockTable(PgConnection& conn, const QueryTimeouts& timeouts,
                         SteadyClock::time_point deadline, size_t top_n,
                         const LockTableView* previous, LockTableView* view) {
  StatementBatch batch;
  batch.AddExecute(kStatement, kStatement);
  batch.Add(kFullStatement, queries::kLockTableFull);
  BatchResults results;
  if (Status s = batch.Run(conn, timeouts, deadline, &results); !s.ok()) return s;
  LockTableReading reading;
  const PgResult* settings = results.Find(kStatement);
  const PgResult* r = results.Find(kFullStatement);
  if (settings == nullptr || r == nullptr) return Status::UnexpectedShape("lock_table: no result");
  if (Status s = ParseSettings(*settings, &reading); !s.ok()) return s;
  Columns c(*r, "lock_table_full");
  const int pid = c["pid"], locktype = c["locktype"], entries = c["entries"],
            app = c["application_name"], addr = c["client_addr"], state = c["state"];
  if (Status s = c.status(); !s.ok()) return s;
  // Names that need a catalog come from the last good poll's rows of the same pid.
  std::unordered_map<int, const SessionLockTableEntries*> known;
  if (previous != nullptr) {
    for (const SessionLockTableEntries& e : previous->sessions) known[e.session.pid] = &e;
  }
  std::vector<SessionLockTableEntries> rows;
  for (int i = 0; i < r->Rows(); ++i) {
    SessionLockTableEntries e;
    e.session.pid = static_cast<int>(r->Int(i, pid).value_or(0));
    if (e.session.pid == reading.own_pid && e.session.pid != 0) continue;
    e.session.application_name = r->String(i, app);
    e.session.client_addr = r->String(i, addr);
    e.session.state = r->String(i, state);
    if (const auto it = known.find(e.session.pid); it != known.end()) {
      e.datname = it->second->datname;
      e.session.usename = it->second->session.usename;
      e.pooled = it->second->pooled;
    }
    e.locktype = r->String(i, locktype);
    e.entries = r->Int(i, entries).value_or(0);
    rows.push_back(std::move(e));
  }
  *view = LockTableView{};
  view->slots = LockTableSlots(conn.ServerVersionNum(), reading.settings);
  view->lock_manager_waiters = reading.lock_manager_waiters;
  view->counted = true;
  KeepTopSessions(std::move(rows), top_n, view);
  return Status::Ok();
}

void MarkPooledLockTableSessions(TargetView* view) {
  std::unordered_map<int, PooledConnection> pooled;
  for (const PoolerView& p : view->poolers) {
    for (const PooledLockRow& l : p.locks) {
      pooled[l.pid] = {p.name, l.database, l.user, l.first_client, l.current_client};
    }
  }
  for (SessionLockTableEntries& e : view->lock_table.sessions) {
    if (const auto it = pooled.find(e.session.pid); it != pooled.end()) e.pooled = it->second;
  }
}

void LockTableCollector::ExposeCounters(const TargetSnapshot& snap, Families* f) const {
  const std::string& tg = snap.target;
  f->Add(kFull, {tg}, snap.lock_table_full ? 1 : 0);
  // A poll that failed for another reason shows none: stale figures must not hold an alert.
  if (!snap.lock_table || !(snap.up || snap.lock_table_full)) return;
  const LockTableView& v = *snap.lock_table;
  if (v.slots > 0) f->Add(kSlots, {tg}, static_cast<double>(v.slots));
  // A wait on an LWLock lasts microseconds: only this poll's count means anything.
  if (snap.up) f->Add(kLockManagerWaiters, {tg}, static_cast<double>(v.lock_manager_waiters));
  if (!v.counted) return;
  f->Add(kEntries, {tg}, static_cast<double>(v.entries));
  f->Add(kAge, {tg}, v.age);
  for (const SessionLockTableEntries& s : v.sessions) {
    f->Add(kSessionEntries,
           {tg, s.datname, std::to_string(s.session.pid), s.session.application_name,
            s.session.usename, AddrLabel(s.session.client_addr), StateLabel(s.session.state),
            s.locktype},
           static_cast<double>(s.entries));
    AddVerdictSeries(tg, VerdictSubject::kLockTableSession, s.datname, s.session.pid,
                     LockTableVerdict(s, s.entries), f);
  }
}

PGLOCK_REGISTER_COLLECTOR(LockTableCollector, 60);

}  // namespace pglock
