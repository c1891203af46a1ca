// The immutable result of a poll, ready to be turned into metric families: per-database
// aggregates (exact), detail rows (capped at top_n, most severe first) and the cumulative event
// counters. A TargetSnapshot is built by the poller thread and read by scrapes through
// shared_ptr<const TargetSnapshot>; it is never modified after publication.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/snapshot/poll_data.h"

namespace pglock {

struct Event;  // exporter/events/event_log.h
using EventList = std::vector<std::shared_ptr<const Event>>;

// Identity of a session as labels show it.
struct Identity {
  int pid = 0;
  std::string application_name;
  std::string client_addr;
  std::string usename;
  std::string state;
  std::string query;  // only with web.show_query_text (PollPlan::query_text), at most 1 KB
};

struct WaitEdge {
  std::string datname;
  std::string lock;
  Identity waiter;
  Identity blocker;
  double seconds = 0;
};

// A party to a lock wait as the wait forest shows it: a client session, a background process
// (backend_type says which) or a prepared transaction (pid 0, state "prepared", its gid).
struct LockParticipant {
  Identity id;
  std::string datname;
  std::string backend_type = "client backend";
  std::string gid;  // prepared transactions only
  // How long it has been in its current state (since PREPARE TRANSACTION for a prepared one),
  // when known.
  std::optional<double> state_seconds;
};

// One waiter -> blocker edge of any lock type. The blocker holds the object the waiter asks for;
// when none of the waiter's blockers holds it (a reader queued behind a waiting ALTER TABLE), the
// blockers are the waiters queued ahead whose requests conflict with its own.
struct LockWaitEdge {
  std::string datname;  // the waiter's database
  std::string locktype;
  std::string mode;      // requested by the waiter
  std::string relation;  // schema.table, else the OID (another database's), else ""
  std::string lock;      // advisory waits: the lock's configured name, else its key
  LockParticipant waiter;
  LockParticipant blocker;
  double seconds = 0;  // how long the waiter has waited
};

// A blocker that waits for nothing, with every session blocked by it directly or through a chain.
struct BlockingRoot {
  LockParticipant root;
  double state_seconds = 0;       // time in its current state (since prepared, for those)
  std::vector<int> blocked_pids;  // sorted; size() = the blocked sessions
  int64_t depth = 0;              // longest chain of waits ending at this root
};

struct LockTypeWaits {
  int64_t waiters = 0;
  double wait_max = 0;
};

struct HeldLock {
  std::string datname;
  std::string lock;
  Identity holder;
  std::string scope;  // "session" or "unknown"
  double seconds = 0;
};

struct IdleHolder {
  std::string datname;
  Identity holder;
  std::string holds;  // "advisory", "row", "blocking" joined by ",", in that order
  double seconds = 0;
  std::optional<double> remaining;  // effective idle_in_transaction_session_timeout - idle
};

struct ClientKey {
  std::string datname;
  std::string application_name;
  std::string client_addr;
  std::string usename;
  auto Tie() const { return std::tie(datname, application_name, client_addr, usename); }
  bool operator<(const ClientKey& o) const { return Tie() < o.Tie(); }
};

struct ClientRow {
  ClientKey key;
  std::map<std::string, int> sessions_by_state;
  int total = 0;
  int idle_lock_holders = 0;
};

struct DatabaseAggregate {
  int64_t advisory_locks_held = 0;
  int64_t advisory_waiters = 0;
  double advisory_wait_max = 0;
  int64_t idle_in_transaction = 0;
  double idle_in_transaction_max = 0;
  int64_t idle_in_transaction_holders = 0;
  int64_t lock_queue_depth_max = 0;  // longest chain of waits starting in this database
};

struct LeaseView {
  std::string lease;
  std::string holder;
  std::vector<std::string> holder_parts;  // capture groups of holder_pattern, in label order
  bool held = false;
  double age = 0;
  double expires_in = 0;
  // row_lock tables: the session whose open transaction locked or changed the row (pid 0: none),
  // and how long that transaction has been open.
  Identity session;
  std::optional<double> xact_seconds;
};

// A row of a row_lock table held by a session's open transaction (top_n by age, all tables).
struct RowLockHolder {
  std::string table;
  std::string lease;
  Identity holder;
  double seconds = 0;  // since the exporter first saw it held by this session (see leases.h)
  std::optional<double> xact_seconds;
};

struct LeaseTableView {
  std::string table;
  bool ok = false;
  bool has_expiry = true;                  // false: no pglock_lease_expires_in_seconds
  double max_hold = 0;                     // seconds, from the config; 0 when unset
  std::vector<std::string> holder_labels;  // empty: one "holder" label with the whole text
  int64_t held = 0;
  int64_t expired = 0;
  std::vector<LeaseView> leases;
};

// A session advisory lock known to sit on a pooled server connection.
struct PooledLockRow {
  std::string database;
  std::string user;
  std::string lock;
  int pid = 0;  // the server connection's backend
  std::string first_client;
  std::string current_client;
  double seconds = 0;  // since first seen
  int64_t inherited = 0;
};

struct PoolerView {
  std::string name;
  bool ok = false;
  // (database, user) -> session locks known held by that pool's server connections.
  std::map<std::pair<std::string, std::string>, int64_t> session_locks;
  std::vector<PooledLockRow> locks;
};

// Everything a successful poll shows at one point in time.
struct TargetView {
  std::map<std::string, DatabaseAggregate> databases;
  std::vector<WaitEdge> waits;
  std::vector<HeldLock> held;
  // Waits of every lock type (exporter/collectors/lock_waits.h): exact counts per (datname,
  // locktype), the top_n edges by wait and the top_n roots by sessions blocked.
  std::map<std::pair<std::string, std::string>, LockTypeWaits> lock_waits_by_type;
  std::vector<LockWaitEdge> lock_waits;
  std::vector<BlockingRoot> blocking_roots;
  std::vector<IdleHolder> idle_holders;
  std::vector<ClientRow> clients;
  std::vector<ServerSetting> settings;
  std::vector<SettingOverride> overrides;
  std::vector<LeaseTableView> leases;
  std::vector<RowLockHolder> row_locks;
  std::vector<PoolerView> poolers;
  int64_t hidden_sessions = 0;  // sessions whose details the exporter's role cannot see
  bool inventory = true;
};

// Cumulative counters of one target; they survive failed polls and reconnects.
struct Counters {
  std::map<std::tuple<std::string, std::string, std::string>, double> releases;  // db, lock, reason
  std::map<std::tuple<std::string, std::string, std::string>, double> losses;    // db, lock, cause
  std::map<std::tuple<std::string, std::string>, double> takeovers;              // db, lock
  std::map<std::tuple<std::string, std::string>, double> handovers;              // db, lock
  // pooler, database, user
  std::map<std::tuple<std::string, std::string, std::string>, double> pooled_inherited;
  std::map<std::tuple<std::string, std::string>, double> sessions_ended;  // db, reason
  std::map<std::tuple<std::string, std::string, std::string>, double>
      lease_transitions;                           // table, lease, kind
  std::map<std::string, double> series_dropped;    // metric
  std::map<std::string, double> collector_errors;  // collector
};

// How one collector fared at the last poll.
struct CollectorStatus {
  std::string name;
  bool up = false;
  double seconds = 0;  // its parse, own round trips and view building
};

// What a scrape serialises for one target.
struct TargetSnapshot {
  std::string target;
  bool up = false;
  double poll_duration = 0;
  double poll_errors = 0;
  double last_success = 0;  // Unix time; 0 = never
  std::string server_version;
  std::string role;   // "primary" or "standby" at the last good poll
  std::string state;  // "connecting", "up", "down": for the landing page
  std::string last_error;
  std::shared_ptr<const TargetView> view;   // null when the last poll failed
  std::vector<CollectorStatus> collectors;  // empty before the first poll
  Counters counters;
  // The target's recent events, oldest first (web.event_log_size); kept across failed polls.
  std::shared_ptr<const EventList> events;
};

}  // namespace pglock
