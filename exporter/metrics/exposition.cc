#include "exporter/metrics/exposition.h"

#include <map>
#include <set>
#include <utility>

#include "exporter/metrics/labels.h"

namespace pglock {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<std::pair<std::string, std::string>>;

// Collects families by name so each name appears once, in first-use order.
class Families {
 public:
  void Add(const std::string& name, MetricType type, const std::string& help, const Labels& labels,
           double value) {
    auto it = index_.find(name);
    if (it == index_.end()) {
      MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = type;
      families_.push_back(std::move(f));
      it = index_.emplace(name, families_.size() - 1).first;
      seen_.emplace_back();
    }
    ClientMetric m;
    std::string identity;
    for (const auto& [k, v] : labels) {
      m.label.push_back({k, SanitizeLabelValue(v)});
      identity += m.label.back().value;
      identity += '\xff';  // never inside a sanitised (valid UTF-8) value
    }
    // Two rows can sanitise to the same labels (a lock held in both modes by one session,
    // different invalid bytes): a duplicate series would make Prometheus drop samples. Keep the
    // first, which is the most severe since detail rows are sorted.
    if (!seen_[it->second].insert(std::move(identity)).second) return;
    switch (type) {
      case MetricType::Counter:
        m.counter.value = value;
        break;
      case MetricType::Gauge:
        m.gauge.value = value;
        break;
      default:
        m.untyped.value = value;
        break;
    }
    families_[it->second].metric.push_back(std::move(m));
  }

  void Gauge(const std::string& name, const std::string& help, const Labels& labels, double v) {
    Add(name, MetricType::Gauge, help, labels, v);
  }
  void Counter(const std::string& name, const std::string& help, const Labels& labels, double v) {
    Add(name, MetricType::Counter, help, labels, v);
  }

  std::vector<MetricFamily> Take() { return std::move(families_); }

 private:
  std::vector<MetricFamily> families_;
  std::map<std::string, size_t> index_;
  std::vector<std::set<std::string>> seen_;  // per family: label values already emitted
};

std::string Addr(const std::string& a) { return a.empty() ? "local" : a; }
std::string State(const std::string& s) { return s.empty() ? "unknown" : s; }

void AddHealth(const TargetSnapshot& t, Families* f) {
  const Labels tl = {{"target", t.target}};
  f->Gauge("pglock_up", "1 if the last poll of the target succeeded, else 0.", tl, t.up ? 1 : 0);
  f->Gauge("pglock_poll_duration_seconds", "Duration of the last poll of the target.", tl,
           t.poll_duration);
  f->Counter("pglock_poll_errors_total", "Polls of the target that failed.", tl, t.poll_errors);
  if (t.last_success > 0) {
    f->Gauge("pglock_last_poll_success_timestamp_seconds",
             "Unix time of the last successful poll of the target.", tl, t.last_success);
  }
  if (t.up && !t.server_version.empty()) {
    f->Gauge("pglock_postgres_info", "PostgreSQL server version of the target (value 1).",
             {{"target", t.target}, {"server_version", t.server_version}}, 1);
  }
  for (const auto& [metric, n] : t.counters.series_dropped) {
    f->Counter("pglock_series_dropped_total",
               "Detail series left out because of poll.top_n, summed over polls.",
               {{"target", t.target}, {"metric", metric}}, n);
  }
  for (const auto& [collector, n] : t.counters.collector_errors) {
    f->Counter("pglock_collector_errors_total",
               "Failures of an optional collector (a lease table, a pooler) that did not fail "
               "the poll.",
               {{"target", t.target}, {"collector", collector}}, n);
  }
}

void AddView(const TargetSnapshot& t, const TargetView& v, Families* f) {
  const std::string& tg = t.target;
  for (const auto& [db, a] : v.databases) {
    const Labels l = {{"target", tg}, {"datname", db}};
    f->Gauge("pglock_advisory_locks_held", "Granted advisory locks.", l,
             static_cast<double>(a.advisory_locks_held));
    f->Gauge("pglock_advisory_lock_waiters", "Sessions waiting for an advisory lock.", l,
             static_cast<double>(a.advisory_waiters));
    f->Gauge("pglock_advisory_lock_wait_seconds_max",
             "Longest current advisory lock wait, 0 if none.", l, a.advisory_wait_max);
    f->Gauge("pglock_idle_in_transaction_sessions",
             "Sessions idle in transaction (including aborted).", l,
             static_cast<double>(a.idle_in_transaction));
    f->Gauge("pglock_idle_in_transaction_seconds_max",
             "Longest time a session has been idle in transaction, from state_change.", l,
             a.idle_in_transaction_max);
    f->Gauge("pglock_idle_in_transaction_lock_holders",
             "Sessions idle in transaction that hold an advisory lock or block another session.", l,
             static_cast<double>(a.idle_in_transaction_holders));
  }
  for (const WaitEdge& w : v.waits) {
    f->Gauge("pglock_advisory_lock_wait_seconds",
             "How long a session has waited for an advisory lock, one series per waiter->blocker "
             "edge (top_n by wait; from pg_locks.waitstart on 14+).",
             {{"target", tg},
              {"datname", w.datname},
              {"lock", w.lock},
              {"waiter_pid", std::to_string(w.waiter.pid)},
              {"waiter_application_name", w.waiter.application_name},
              {"blocker_pid", std::to_string(w.blocker.pid)},
              {"blocker_application_name", w.blocker.application_name},
              {"blocker_client_addr", Addr(w.blocker.client_addr)},
              {"blocker_usename", w.blocker.usename},
              {"blocker_state", State(w.blocker.state)}},
             w.seconds);
  }
  for (const HeldLock& h : v.held) {
    f->Gauge("pglock_advisory_lock_held_seconds",
             "Observed age of a held advisory lock (top_n by age): since first seen, or since "
             "xact_start when later. scope=session when the holder has no open transaction.",
             {{"target", tg},
              {"datname", h.datname},
              {"lock", h.lock},
              {"pid", std::to_string(h.holder.pid)},
              {"application_name", h.holder.application_name},
              {"client_addr", Addr(h.holder.client_addr)},
              {"usename", h.holder.usename},
              {"state", State(h.holder.state)},
              {"scope", h.scope}},
             h.seconds);
  }
  for (const IdleHolder& h : v.idle_holders) {
    const Labels l = {{"target", tg},
                      {"datname", h.datname},
                      {"pid", std::to_string(h.holder.pid)},
                      {"application_name", h.holder.application_name},
                      {"client_addr", Addr(h.holder.client_addr)},
                      {"usename", h.holder.usename},
                      {"holds", h.holds}};
    f->Gauge("pglock_idle_in_transaction_holder_seconds",
             "Idle-in-transaction time of a session that holds an advisory lock or blocks "
             "someone (top_n, least time left first).",
             l, h.seconds);
    if (h.remaining) {
      f->Gauge("pglock_idle_in_transaction_timeout_remaining_seconds",
               "Effective idle_in_transaction_session_timeout (role/database overrides apply to "
               "sessions started after the change) minus idle time: when the server will end "
               "the session and drop its session locks. Negative: overdue.",
               l, *h.remaining);
    }
  }
  for (const ClientRow& c : v.clients) {
    for (const auto& [state, n] : c.sessions_by_state) {
      f->Gauge("pglock_client_sessions", "Backends per client and state (top_n clients).",
               {{"target", tg},
                {"datname", c.key.datname},
                {"application_name", c.key.application_name},
                {"client_addr", Addr(c.key.client_addr)},
                {"usename", c.key.usename},
                {"state", state}},
               n);
    }
    f->Gauge("pglock_client_idle_lock_holding_sessions",
             "Sessions of the client holding an advisory lock while not running a statement "
             "(idle or idle in transaction): when it equals the client's sessions, its pool is "
             "starved.",
             {{"target", tg},
              {"datname", c.key.datname},
              {"application_name", c.key.application_name},
              {"client_addr", Addr(c.key.client_addr)},
              {"usename", c.key.usename}},
             c.idle_lock_holders);
  }
  for (const ServerSetting& s : v.settings) {
    f->Gauge("pglock_setting_seconds",
             "Server value of a timeout setting, in seconds; 0 = disabled.",
             {{"target", tg}, {"name", s.name}, {"source", s.source}}, s.seconds);
  }
  for (const SettingOverride& o : v.overrides) {
    f->Gauge("pglock_setting_override_seconds",
             "Per-role / per-database value from pg_db_role_setting (* = all), in seconds; it "
             "applies to sessions started after the change.",
             {{"target", tg}, {"name", o.name}, {"database", o.database}, {"role", o.role}},
             o.seconds);
  }
  for (const LeaseTableView& lt : v.leases) {
    f->Gauge("pglock_lease_table_up", "1 if the lease table could be read at the last poll.",
             {{"target", tg}, {"table", lt.table}}, lt.ok ? 1 : 0);
    if (!lt.ok) continue;
    f->Gauge("pglock_leases", "Lease rows by state.",
             {{"target", tg}, {"table", lt.table}, {"state", "held"}},
             static_cast<double>(lt.held));
    f->Gauge("pglock_leases", "Lease rows by state.",
             {{"target", tg}, {"table", lt.table}, {"state", "expired"}},
             static_cast<double>(lt.expired));
    for (const LeaseView& l : lt.leases) {
      const Labels ll = {{"target", tg}, {"table", lt.table}, {"lease", l.lease}};
      f->Gauge("pglock_lease_held", "1 while expires_at > now().", ll, l.held ? 1 : 0);
      f->Gauge("pglock_lease_age_seconds", "now() - taken_at.", ll, l.age);
      f->Gauge("pglock_lease_expires_in_seconds", "expires_at - now(), negative once expired.", ll,
               l.expires_in);
      Labels hl = ll;
      if (lt.holder_labels.empty()) {
        hl.emplace_back("holder", l.holder);
      } else {
        for (size_t i = 0; i < lt.holder_labels.size(); ++i) {
          hl.emplace_back(lt.holder_labels[i], i < l.holder_parts.size() ? l.holder_parts[i] : "");
        }
      }
      f->Gauge("pglock_lease_holder_info", "Who holds the lease (value 1).", hl, 1);
    }
  }
  for (const PoolerView& p : v.poolers) {
    f->Gauge("pglock_pooler_up", "1 if the pooler's admin console answered at the last poll.",
             {{"target", tg}, {"pooler", p.name}}, p.ok ? 1 : 0);
    for (const auto& [key, n] : p.session_locks) {
      f->Gauge("pglock_pooled_session_advisory_locks",
               "Advisory locks held outside a transaction by server connections of a "
               "transaction- or statement-mode PgBouncer pool: session locks that outlived "
               "their client.",
               {{"target", tg}, {"pooler", p.name}, {"database", key.first}, {"user", key.second}},
               static_cast<double>(n));
    }
  }
  f->Gauge("pglock_sessions_hidden",
           "Sessions whose state the exporter's role cannot see (grant pg_monitor).",
           {{"target", tg}}, static_cast<double>(v.hidden_sessions));
}

void AddCounters(const TargetSnapshot& t, Families* f) {
  const std::string& tg = t.target;
  const Counters& c = t.counters;
  for (const auto& [k, n] : c.releases) {
    f->Counter("pglock_advisory_lock_releases_total",
               "Held advisory locks gone at the next poll: unlocked (holder still connected) or "
               "session_ended.",
               {{"target", tg},
                {"datname", std::get<0>(k)},
                {"lock", std::get<1>(k)},
                {"reason", std::get<2>(k)}},
               n);
  }
  for (const auto& [k, n] : c.losses) {
    f->Counter("pglock_advisory_lock_losses_total",
               "Advisory locks lost because their session ended while holding them, by inferred "
               "cause.",
               {{"target", tg},
                {"datname", std::get<0>(k)},
                {"lock", std::get<1>(k)},
                {"cause", std::get<2>(k)}},
               n);
  }
  for (const auto& [k, n] : c.takeovers) {
    f->Counter("pglock_advisory_lock_takeovers_total",
               "An advisory key held by another session than at the last poll, or taken after "
               "its holder's session ended.",
               {{"target", tg}, {"datname", std::get<0>(k)}, {"lock", std::get<1>(k)}}, n);
  }
  for (const auto& [k, n] : c.sessions_ended) {
    f->Counter("pglock_sessions_ended_total",
               "Mirror of pg_stat_database sessions_fatal / sessions_killed / sessions_abandoned "
               "(14+), monotonic across reconnects and server restarts.",
               {{"target", tg}, {"datname", std::get<0>(k)}, {"reason", std::get<1>(k)}}, n);
  }
  for (const auto& [k, n] : c.lease_transitions) {
    f->Counter("pglock_lease_transitions_total",
               "Lease changes between polls: acquired, released, renewed, expired_takeover (work "
               "may have run twice), overlap (mutual exclusion broken).",
               {{"target", tg},
                {"table", std::get<0>(k)},
                {"lease", std::get<1>(k)},
                {"kind", std::get<2>(k)}},
               n);
  }
}

}  // namespace

std::vector<MetricFamily> BuildFamilies(
    const std::vector<std::shared_ptr<const TargetSnapshot>>& targets, const BuildInfo& build) {
  Families f;
  f.Gauge("pglock_build_info", "pglock_exporter build (value 1).",
          {{"version", build.version}, {"revision", build.revision}}, 1);
  for (const auto& t : targets) {
    if (t) AddHealth(*t, &f);
  }
  for (const auto& t : targets) {
    // A failed poll drops the target's lock series: stale data must not hold or hide alerts.
    if (t && t->up && t->view) AddView(*t, *t->view, &f);
  }
  for (const auto& t : targets) {
    if (t) AddCounters(*t, &f);
  }
  return f.Take();
}

std::vector<MetricFamily> SnapshotCollectable::Collect() const {
  try {
    return BuildFamilies(source_(), build_);
  } catch (...) {
    // Collect runs inside CivetWeb's C callback: nothing may escape. An empty scrape is visible
    // (pglock_up missing fires PglockTargetDown); a crash would not be.
    return {};
  }
}

}  // namespace pglock
