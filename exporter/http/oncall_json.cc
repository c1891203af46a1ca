#include "exporter/http/oncall_json.h"

#include <algorithm>
#include <cstddef>

#include "exporter/events/event_log.h"
#include "exporter/http/page_text.h"
#include "exporter/snapshot/verdict.h"

namespace pglock {
namespace {

std::string IdentityJson(const Identity& id) {
  std::string o = "\"pid\":" + std::to_string(id.pid) +
                  ",\"application_name\":" + J(id.application_name) +
                  ",\"usename\":" + J(id.usename) + ",\"client_addr\":" + J(id.client_addr) +
                  ",\"state\":" + J(id.state);
  if (!id.query.empty()) o += ",\"query\":" + J(id.query);
  return o;
}

std::string VerdictJson(const Verdict& v) {
  std::string locks = "[";
  for (const std::string& l : v.dropped_locks.listed) locks += (locks.size() > 1 ? "," : "") + J(l);
  return "{\"action\":" + J(VerdictActionName(v.action)) + ",\"pid\":" + std::to_string(v.pid) +
         ",\"command\":" + J(v.command) + ",\"then\":" + J(v.then) +
         ",\"then_command\":" + J(v.then_command) + ",\"advice\":" + J(VerdictAdvice(v)) +
         ",\"pooler\":" + J(v.pooler) + ",\"frees\":" + std::to_string(v.frees) +
         ",\"cost\":" + J(v.cost) + ",\"dropped_locks\":" + locks + "]" +
         ",\"dropped_locks_total\":" + std::to_string(v.dropped_locks.total) +
         ",\"lock_timeout_seconds\":" + (v.lock_timeout > 0 ? Num(v.lock_timeout) : "null") +
         ",\"lock_timeout_source\":" + J(v.lock_timeout_source) + "}";
}

void NodeJson(const WaitNode& n, std::string* o) {
  const LockParticipant& p = n.who;
  *o += "{" + IdentityJson(p.id) + ",\"backend_type\":" + J(p.backend_type) +
        ",\"gid\":" + J(p.gid) + ",\"datname\":" + J(p.datname) +
        ",\"state_seconds\":" + (p.state_seconds ? Num(*p.state_seconds) : "null") +
        ",\"locktype\":" + J(n.locktype) + ",\"mode\":" + J(n.mode) +
        ",\"relation\":" + J(n.relation) + ",\"lock\":" + J(n.lock) +
        ",\"wait_seconds\":" + Num(n.seconds) +
        ",\"blocked_sessions\":" + std::to_string(n.blocked);
  if (n.verdict != nullptr) *o += ",\"verdict\":" + VerdictJson(*n.verdict);
  *o += ",\"waiters\":[";
  for (size_t i = 0; i < n.waiters.size(); ++i) {
    if (i > 0) *o += ",";
    NodeJson(n.waiters[i], o);
  }
  *o += "]}";
}

std::string HeldJson(const HeldLock& h) {
  return "{\"lock\":" + J(h.lock) + ",\"datname\":" + J(h.datname) + "," + IdentityJson(h.holder) +
         ",\"scope\":" + J(h.scope) + ",\"held_seconds\":" + Num(h.seconds) + "}";
}

std::string RowLockJson(const RowLockHolder& r) {
  return "{\"table\":" + J(r.table) + ",\"lease\":" + J(r.lease) + "," + IdentityJson(r.holder) +
         ",\"held_seconds\":" + Num(r.seconds) +
         ",\"transaction_seconds\":" + (r.xact_seconds ? Num(*r.xact_seconds) : "null") + "}";
}

std::string IdleJson(const IdleHolder& h) {
  return "{\"datname\":" + J(h.datname) + "," + IdentityJson(h.holder) +
         ",\"holds\":" + J(h.holds) + ",\"idle_seconds\":" + Num(h.seconds) +
         ",\"timeout_remaining_seconds\":" + (h.remaining ? Num(*h.remaining) : "null") + "}";
}

std::string PooledJson(const std::string& pooler, const PooledLockRow& l) {
  return "{\"pooler\":" + J(pooler) + ",\"database\":" + J(l.database) + ",\"user\":" + J(l.user) +
         ",\"lock\":" + J(l.lock) + ",\"pid\":" + std::to_string(l.pid) +
         ",\"first_client\":" + J(l.first_client) + ",\"current_client\":" + J(l.current_client) +
         ",\"held_seconds\":" + Num(l.seconds) + ",\"inherited\":" + std::to_string(l.inherited) +
         "}";
}

std::string LeaseJson(const LeaseItem& l) {
  return "{\"table\":" + J(l.table) + ",\"lease\":" + J(l.lease->lease) +
         ",\"state\":" + J(l.state) + ",\"holder\":" + J(l.lease->holder) +
         ",\"age_seconds\":" + Num(l.lease->age) +
         ",\"expires_in_seconds\":" + (l.lease->expires_in ? Num(*l.lease->expires_in) : "null") +
         "}";
}

std::string ServerLogJson(const ServerLogStatus& log) {
  return "{\"up\":" + std::string(log.up ? "true" : "false") + ",\"error\":" + J(log.error) +
         ",\"format\":" + J(log.format) +
         ",\"untranslated\":" + (log.untranslated ? "true" : "false") +
         ",\"dropped\":" + Count(log.dropped) + "}";
}

std::string LockTableJson(const TargetSnapshot& s, const LockTableView& v) {
  std::string o = "{\"full\":" + std::string(s.lock_table_full ? "true" : "false") +
                  ",\"entries\":" + std::to_string(v.entries) +
                  ",\"slots\":" + std::to_string(v.slots) + ",\"age_seconds\":" + Num(v.age) +
                  ",\"sessions\":";
  JsonArray(
      v.sessions,
      [&](const SessionLockTableEntries& e) {
        o += "{\"datname\":" + J(e.datname) + "," + IdentityJson(e.session) +
             ",\"locktype\":" + J(e.locktype) + ",\"entries\":" + std::to_string(e.entries) +
             ",\"pooler\":" + (e.pooled ? J(e.pooled->pooler) : "null") + "}";
      },
      &o);
  const auto [top, entries] = TopFiller(v);
  o += ",\"verdict\":" + (top == nullptr ? "null" : VerdictJson(LockTableVerdict(*top, entries)));
  return o + "}";
}

}  // namespace

void TargetJson(const TargetPart& t, std::string* o) {
  const TargetSnapshot& s = *t.snap;
  *o += "{\"target\":" + J(s.target) + ",\"up\":" + (s.up ? "true" : "false") +
        ",\"state\":" + J(s.state) + ",\"last_error\":" + J(s.up ? "" : s.last_error) +
        ",\"server_version\":" + J(s.server_version) +
        ",\"lock_waiters\":" + std::to_string(t.lock_waiters) +
        ",\"advisory_waiters\":" + std::to_string(t.waiters) +
        ",\"advisory_locks_held\":" + std::to_string(t.held_total) +
        ",\"lock_table\":" + (t.lock_table != nullptr ? LockTableJson(s, *t.lock_table) : "null") +
        ",\"wait_forest\":";
  JsonArray(
      t.forest, [&](const WaitNode& n) { NodeJson(n, o); }, o);
  *o += ",\"held\":";
  JsonArray(
      t.held, [&](const HeldLock* h) { *o += HeldJson(*h); }, o);
  *o += ",\"row_locks\":";
  JsonArray(
      t.row_locks, [&](const RowLockHolder* r) { *o += RowLockJson(*r); }, o);
  *o += ",\"idle_in_transaction\":";
  JsonArray(
      t.idle, [&](const IdleHolder* h) { *o += IdleJson(*h); }, o);
  *o += ",\"pooled_locks\":";
  JsonArray(
      t.pooled,
      [&](const std::pair<std::string, const PooledLockRow*>& p) {
        *o += PooledJson(p.first, *p.second);
      },
      o);
  *o += ",\"pooled_locks_total\":" + std::to_string(t.pooled_total);
  *o += ",\"leases\":";
  JsonArray(
      t.leases, [&](const LeaseItem& l) { *o += LeaseJson(l); }, o);
  // The newest kPageEvents, oldest first (all of them: /api/v1/events).
  const std::vector<const Event*> recent(
      t.events.end() - static_cast<std::ptrdiff_t>(std::min(t.events.size(), kPageEvents)),
      t.events.end());
  *o += ",\"leases_total\":" + std::to_string(t.leases_total) +
        ",\"leases_held_normally\":" + std::to_string(t.leases_fine) + ",\"events\":";
  JsonArray(
      recent, [&](const Event* e) { *o += EventJson(*e); }, o);
  *o += ",\"events_total\":" + std::to_string(t.events.size());
  *o += ",\"server_log\":" + (s.server_log ? ServerLogJson(*s.server_log) : "null");
  *o += ",\"between_polls\":";
  JsonArray(
      LoggedEvents(t), [&](const Event* e) { *o += EventJson(*e); }, o);
  *o += "}";
}

namespace {

std::string OptionalSeconds(const std::optional<double>& v) { return v ? Num(*v) : "null"; }

std::string PartyJson(const PreflightParty& p) {
  std::string o =
      "{" + IdentityJson(p.who.id) + ",\"backend_type\":" + J(p.who.backend_type) +
      ",\"gid\":" + J(p.who.gid) + ",\"datname\":" + J(p.who.datname) + ",\"mode\":" + J(p.mode) +
      ",\"granted\":" + (p.granted ? "true" : "false") +
      ",\"idle_in_transaction_seconds\":" + OptionalSeconds(p.idle_in_transaction_seconds) +
      ",\"statement_seconds\":" + OptionalSeconds(p.statement_seconds) +
      ",\"waited_seconds\":" + OptionalSeconds(p.waited_seconds) + ",\"pooled\":";
  if (p.pooled) {
    o += "{\"pooler\":" + J(p.pooled->pooler) + ",\"database\":" + J(p.pooled->database) +
         ",\"user\":" + J(p.pooled->user) + ",\"client\":" + J(p.pooled->current_client) + "}";
  } else {
    o += "null";
  }
  return o + ",\"root_pid\":" + std::to_string(p.root_pid) +
         ",\"verdict\":" + VerdictJson(p.verdict) + "}";
}

std::string Parties(const std::vector<PreflightParty>& parties) {
  std::string o = "[";
  for (const PreflightParty& p : parties) o += (o.size() > 1 ? "," : "") + PartyJson(p);
  return o + "]";
}

std::string TimeoutJson(const SettingInForce& s) {
  return "{\"seconds\":" + Num(s.seconds) + ",\"source\":" + J(s.source) + "}";
}

}  // namespace

std::string PreflightJson(const PreflightAnswer& a, double now) {
  if (a.status != 200) {
    return "{\"error\":" + J(a.error) + ",\"target\":" + J(a.target) + ",\"table\":" + J(a.table) +
           "}\n";
  }
  return "{\"target\":" + J(a.target) + ",\"database\":" + J(a.database) +
         ",\"table\":" + J(a.table) + ",\"mode\":" + J(a.mode) + ",\"role\":" + J(a.role) +
         ",\"verdict\":" + J(a.verdict) +
         ",\"poll_age_seconds\":" + Num(std::max(0.0, now - a.answered_at)) +
         ",\"conflicts\":" + Parties(a.conflicts) + ",\"waiting\":" + Parties(a.waiting) +
         ",\"role_timeouts\":{\"lock_timeout\":" + TimeoutJson(a.lock_timeout) +
         ",\"statement_timeout\":" + TimeoutJson(a.statement_timeout) +
         "},\"advice\":" + J(a.advice) + "}\n";
}

}  // namespace pglock
