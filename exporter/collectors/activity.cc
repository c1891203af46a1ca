#include "exporter/collectors/activity.h"

#include <set>
#include <unordered_set>

#include "exporter/collectors/verdict_series.h"
#include "exporter/pg/columns.h"
#include "exporter/queries.h"
#include "exporter/snapshot/timeouts.h"
#include "exporter/snapshot/verdict.h"

namespace pglock {
namespace {

using prometheus::MetricType;

const MetricDesc kIdleSessions{"pglock_idle_in_transaction_sessions",
                               MetricType::Gauge,
                               "Sessions idle in transaction (including aborted).",
                               {"target", "datname"}};
const MetricDesc kIdleMax{"pglock_idle_in_transaction_seconds_max",
                          MetricType::Gauge,
                          "Longest time a session has been idle in transaction, from state_change.",
                          {"target", "datname"}};
const MetricDesc kIdleHolders{
    "pglock_idle_in_transaction_lock_holders",
    MetricType::Gauge,
    "Sessions idle in transaction that hold an advisory lock or a row of a row_lock table, or "
    "block another session.",
    {"target", "datname"}};
const MetricDesc kIdleHolderSeconds{
    "pglock_idle_in_transaction_holder_seconds",
    MetricType::Gauge,
    "Idle-in-transaction time of a session that holds an advisory lock or a row of a row_lock "
    "table, or blocks someone (top_n, least time left first); holds lists advisory, row, "
    "blocking.",
    {"target", "datname", "pid", "application_name", "client_addr", "usename", "holds"}};
const MetricDesc kIdleRemaining{
    "pglock_idle_in_transaction_timeout_remaining_seconds", MetricType::Gauge,
    "Effective idle_in_transaction_session_timeout (role/database overrides apply to sessions "
    "started after the change) minus idle time: when the server will end the session and drop "
    "its session locks. Negative: overdue.",
    kIdleHolderSeconds.labels};
const MetricDesc kClientSessions{
    "pglock_client_sessions",
    MetricType::Gauge,
    "Backends per client and state (top_n clients).",
    {"target", "datname", "application_name", "client_addr", "usename", "state"}};
const MetricDesc kClientIdleHolders{
    "pglock_client_idle_lock_holding_sessions",
    MetricType::Gauge,
    "Sessions of the client holding an advisory lock while not running a statement (idle or idle "
    "in transaction): when it equals the client's sessions, its pool is starved.",
    {"target", "datname", "application_name", "client_addr", "usename"}};
const MetricDesc kHidden{"pglock_sessions_hidden",
                         MetricType::Gauge,
                         "Sessions whose state the exporter's role cannot see (grant pg_monitor).",
                         {"target"}};

// Idle in transaction, and which of those sessions hold something others need.
void BuildIdleHolders(const PollData& data, const std::unordered_set<int>& advisory_holders,
                      TargetView* view) {
  std::unordered_set<int> row_holders;  // pids holding a row of a row_lock table
  for (const LeaseTableData& t : data.leases) {
    for (const LeaseRow& r : t.rows) {
      if (r.pid != 0) row_holders.insert(r.pid);
    }
  }
  std::set<int> blockers;  // pids that block some waiting session
  for (const Session& s : data.sessions) blockers.insert(s.blocked_by.begin(), s.blocked_by.end());
  for (const Session& s : data.sessions) {
    if (s.state.empty()) ++view->hidden_sessions;
    if (!s.IdleInTransaction()) continue;
    DatabaseAggregate& agg = view->databases[s.datname];
    const double idle = s.state_change ? std::max(0.0, data.now - *s.state_change) : 0;
    ++agg.idle_in_transaction;
    agg.idle_in_transaction_max = std::max(agg.idle_in_transaction_max, idle);
    const bool holds = advisory_holders.count(s.pid) != 0;
    const bool rows = row_holders.count(s.pid) != 0;
    const bool blocks = blockers.count(s.pid) != 0;
    if (!holds && !rows && !blocks) continue;
    ++agg.idle_in_transaction_holders;
    IdleHolder h;
    h.datname = s.datname;
    h.holder = IdentityOf(&s, s.pid);
    for (const auto& [yes, what] :
         {std::pair{holds, "advisory"}, {rows, "row"}, {blocks, "blocking"}}) {
      if (!yes) continue;
      if (!h.holds.empty()) h.holds += ',';
      h.holds += what;
    }
    h.seconds = idle;
    const double timeout = EffectiveTimeout("idle_in_transaction_session_timeout", s.datid,
                                            s.usesysid, data.settings, data.overrides);
    if (timeout > 0) h.remaining = timeout - idle;
    view->idle_holders.push_back(std::move(h));
  }
}

// Clients: who connects, in which state, and how many of their sessions sit on a lock.
void BuildClients(const PollData& data, const std::unordered_set<int>& advisory_holders,
                  TargetView* view) {
  std::map<ClientKey, ClientRow> clients;
  for (const Session& s : data.sessions) {
    ClientKey key{s.datname, s.application_name, s.client_addr, s.usename};
    ClientRow& row = clients[key];
    row.key = key;
    ++row.sessions_by_state[s.state.empty() ? "unknown" : s.state];
    ++row.total;
    if (s.NotRunning() && advisory_holders.count(s.pid) != 0) ++row.idle_lock_holders;
  }
  std::vector<ClientRow>& rows = view->parts.Mutable<ClientSessions>()->rows;
  for (auto& [key, row] : clients) rows.push_back(std::move(row));
}

}  // namespace

// Two variants: with the sessions' query texts (web.show_query_text) and without.
constexpr const char* kWithQueryStatement = "activity_with_query";

std::vector<PreparedStatement> ActivityCollector::Prepared(int) const {
  return {
      {name(), FillTemplate(queries::kActivity, {{"query", "NULL::text"}})},
      {kWithQueryStatement, FillTemplate(queries::kActivity, {{"query", "left(a.query, 1024)"}})}};
}

void ActivityCollector::Plan(const PollPlan& plan, StatementBatch* batch) const {
  batch->AddExecute(name(), plan.query_text ? kWithQueryStatement : name());
}

Status ActivityCollector::Parse(const PollPlan&, const BatchResults& results,
                                PollData* data) const {
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::UnexpectedShape("activity: no result");
  Columns c(*r, "activity");
  const int pid = c["pid"], datid = c["datid"], datname = c["datname"], usesysid = c["usesysid"],
            usename = c["usename"], app = c["application_name"], addr = c["client_addr"],
            state = c["state"], backend_start = c["backend_start"], xact_start = c["xact_start"],
            state_change = c["state_change"], query_start = c["query_start"],
            waiting = c["waiting"], advisory_wait = c["advisory_wait"],
            blocked_by = c["blocked_by"], query = c["query"], backend_xid = c["backend_xid"];
  if (Status s = c.status(); !s.ok()) return s;
  data->sessions.clear();
  data->sessions.reserve(static_cast<size_t>(r->Rows()));
  for (int i = 0; i < r->Rows(); ++i) {
    Session s;
    s.pid = static_cast<int>(r->Int(i, pid).value_or(0));
    s.datid = static_cast<uint32_t>(r->Int(i, datid).value_or(0));
    s.datname = r->String(i, datname);
    s.usesysid = static_cast<uint32_t>(r->Int(i, usesysid).value_or(0));
    s.usename = r->String(i, usename);
    s.application_name = r->String(i, app);
    s.client_addr = r->String(i, addr);
    s.state = r->String(i, state);
    s.backend_start = r->Double(i, backend_start).value_or(0);
    s.xact_start = r->Double(i, xact_start);
    s.state_change = r->Double(i, state_change);
    s.query_start = r->Double(i, query_start);
    s.waiting_on_lock = r->Bool(i, waiting);
    s.advisory_wait = r->Bool(i, advisory_wait);
    if (!r->IsNull(i, blocked_by)) s.blocked_by = ParsePidList(r->Text(i, blocked_by));
    s.query = r->String(i, query);
    if (const auto xid = r->Int(i, backend_xid)) s.backend_xid = static_cast<uint32_t>(*xid);
    // Without pg_monitor (or superuser) another role's state and timings read as NULL.
    if (r->IsNull(i, state)) data->full_visibility = false;
    data->sessions.push_back(std::move(s));
  }
  return Status::Ok();
}

void ActivityCollector::BuildView(const PollData& data, const ViewContext& ctx,
                                  TargetView* view) const {
  // Every database with a client session gets its aggregates, zero or not, so alerts on them
  // see 0 rather than an absent series on a quiet server.
  for (const Session& s : data.sessions) {
    if (!s.datname.empty()) view->databases[s.datname];
  }
  std::unordered_set<int> advisory_holders;  // pids holding at least one granted advisory lock
  for (const AdvisoryLock& l : data.locks) {
    if (l.granted) advisory_holders.insert(l.pid);
  }
  BuildIdleHolders(data, advisory_holders, view);
  BuildClients(data, advisory_holders, view);
  (*ctx.dropped)[kIdleHolderSeconds.name] =
      KeepTopN(&view->idle_holders, ctx.top_n, [](const IdleHolder& a, const IdleHolder& b) {
        if (a.remaining.has_value() != b.remaining.has_value()) return a.remaining.has_value();
        if (a.remaining && *a.remaining != *b.remaining) return *a.remaining < *b.remaining;
        return a.seconds > b.seconds;
      });
  (*ctx.dropped)[kClientSessions.name] =
      KeepTopN(&view->parts.Mutable<ClientSessions>()->rows, ctx.top_n,
               [](const ClientRow& a, const ClientRow& b) {
                 if (a.idle_lock_holders != b.idle_lock_holders) {
                   return a.idle_lock_holders > b.idle_lock_holders;
                 }
                 return a.total > b.total;
               });
}

void ActivityCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                   Families* f) const {
  const std::string& tg = snap.target;
  for (const auto& [db, a] : v.databases) {
    f->Add(kIdleSessions, {tg, db}, static_cast<double>(a.idle_in_transaction));
    f->Add(kIdleMax, {tg, db}, a.idle_in_transaction_max);
    f->Add(kIdleHolders, {tg, db}, static_cast<double>(a.idle_in_transaction_holders));
  }
  for (const IdleHolder& h : v.idle_holders) {
    const std::vector<std::string> l = {tg,
                                        h.datname,
                                        std::to_string(h.holder.pid),
                                        h.holder.application_name,
                                        AddrLabel(h.holder.client_addr),
                                        h.holder.usename,
                                        h.holds};
    f->Add(kIdleHolderSeconds, l, h.seconds);
    if (h.remaining) f->Add(kIdleRemaining, l, *h.remaining);
    AddVerdictSeries(tg, VerdictSubject::kIdleInTransactionHolder, h.datname, h.holder.pid,
                     IdleHolderVerdict(h, v.poolers), f);
  }
  const ClientSessions* clients = v.parts.Find<ClientSessions>();
  for (const ClientRow& c : clients != nullptr ? clients->rows : std::vector<ClientRow>{}) {
    for (const auto& [state, n] : c.sessions_by_state) {
      f->Add(kClientSessions,
             {tg, c.key.datname, c.key.application_name, AddrLabel(c.key.client_addr),
              c.key.usename, state},
             n);
    }
    f->Add(kClientIdleHolders,
           {tg, c.key.datname, c.key.application_name, AddrLabel(c.key.client_addr), c.key.usename},
           c.idle_lock_holders);
  }
  f->Add(kHidden, {tg}, static_cast<double>(v.hidden_sessions));
}

PGLOCK_REGISTER_COLLECTOR(ActivityCollector, 30);

}  // namespace pglock
