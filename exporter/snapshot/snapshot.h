// The result of a poll, ready to be turned into metric families: per-database aggregates
// (exact), detail rows (capped at top_n, most severe first) and the cumulative event counters. A
// TargetSnapshot is built by the poller thread and read by scrapes through
// shared_ptr<const TargetSnapshot>; its own fields never change after publication, but it shares
// one live object with the poller: the timeline (TargetSnapshot::timeline, thread-safe), which
// keeps growing after it (the page shows the history up to the latest poll).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "exporter/snapshot/collector_parts.h"
#include "exporter/snapshot/event_list.h"
#include "exporter/snapshot/poll_data.h"

namespace pglock {

class Timeline;       // exporter/events/timeline.h
class PreflightDesk;  // exporter/snapshot/preflight.h

// Identity of a session as labels show it.
struct Identity {
  int pid = 0;
  std::string application_name;
  std::string client_addr;
  std::string usename;
  std::string state;
  std::string query = {};  // only with web.show_query_text (PollPlan::query_text), at most 1 KB
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

// A strong lock request (ACCESS EXCLUSIVE and the other modes that conflict with readers or
// writers: an ALTER TABLE, DROP, VACUUM FULL, REINDEX, CREATE INDEX ...) waiting directly on a
// root blocker with other sessions queued behind it.
struct StrongRequest {
  LockParticipant waiter;
  uint32_t datid = 0;
  uint32_t roleid = 0;
  std::string mode;
  std::string relation;
  double seconds = 0;         // how long it has waited
  int64_t queued_behind = 0;  // sessions blocked through it
};

// What to do about a root blocker (exporter/snapshot/verdict.h): the command that frees its
// waiters with the least damage and its cost. The exporter never runs it.
enum class VerdictAction {
  kTerminate,            // idle (in transaction): a cancel does nothing to an idle session
  kCancel,               // running a statement: cancel first, terminate if that fails
  kWait,                 // running a statement younger than its waiters' alert threshold
  kWaitForHolder,        // holds a migration tool's lock its waiters ask for, making progress
  kRollbackPrepared,     // a prepared transaction: no session to end
  kCancelStrongRequest,  // a DDL heads the queue: cancel it, retry it with lock_timeout
  kCancelAutovacuum,     // an ordinary autovacuum worker
  kLeaveAlone,           // an autovacuum to prevent wraparound: cancelling it is useless
  kPoolerReconnect,      // a leaked session lock on a pooled server connection
  kInvestigate,          // nothing known to be safe (another background process, not visible)
};

// The advisory locks a session holds, as a verdict names them: the first kListed in the poll's
// order (configured names, else keys) and how many in all. A leak can hold 100k: a label for every
// one, made at every poll, cost more than everything else a verdict needs.
struct HeldLockList {
  static constexpr size_t kListed = 20;
  std::vector<std::string> listed;
  int64_t total = 0;

  // Counts one more lock; `label()` is called only while the list has room.
  template <typename Label>
  void Add(Label&& label) {
    if (listed.size() < kListed) listed.push_back(label());
    ++total;
  }
  bool empty() const { return total == 0; }
};

struct Verdict {
  VerdictAction action = VerdictAction::kInvestigate;
  int pid = 0;          // the process the command acts on (0: none, a prepared transaction)
  std::string command;  // SQL, or a pooler admin console command; "" for kLeaveAlone/kInvestigate
  std::string then;     // the next step when the command does not do it, "" if none
  // The command of that next step alone ("SELECT pg_terminate_backend(42)", "KILL app"), "" if
  // none: what an alert's description names after the command.
  std::string then_command;
  std::string pooler;          // kPoolerReconnect: the pooler whose admin console takes the command
  int64_t frees = 0;           // waiters freed by the command
  std::string cost;            // what it costs, in one or two sentences
  HeldLockList dropped_locks;  // the advisory locks its session loses
  // The strong-request case: the lock_timeout its role and database get, and from where
  // ("role app", "database app", "role app in database app", "server"); 0 and "" when none.
  double lock_timeout = 0;
  std::string lock_timeout_source;
};

// A blocker that waits for nothing, with every session blocked by it directly or through a chain.
struct BlockingRoot {
  LockParticipant root;
  double state_seconds = 0;       // time in its current state (since prepared, for those)
  std::vector<int> blocked_pids;  // sorted; size() = the blocked sessions
  int64_t depth = 0;              // longest chain of waits ending at this root
  double longest_wait = 0;        // the longest wait among the blocked sessions
  std::optional<StrongRequest> strong_request;  // the longest-queued one, when any
  Verdict verdict;
};

// Sessions seen waiting on each other in a closed chain: a deadlock the server has not broken yet.
struct DeadlockCycle {
  std::vector<LockWaitEdge> edges;  // waiter -> blocker, around the cycle
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
  SharedText lease;  // shared with the row read
  SharedText holder;
  // The capture groups of holder_pattern, in label order (shared with the pattern's memo); null
  // when it did not match or the table has none.
  std::shared_ptr<const std::vector<std::string>> holder_parts;
  bool held = false;
  double age = 0;
  std::optional<double> expires_in;  // absent for a table without an expiry (held_sql)
  // row_lock tables: the session whose open transaction locked or changed the row (pid 0: none),
  // and how long that transaction has been open.
  Identity session = {};
  std::optional<double> xact_seconds = {};
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
  // A queue (LeaseTableData::queue): no series per row; its held rows past max_hold and its
  // oldest held row's age (0: none held), of the rows read; `leases` keeps the top_n oldest.
  bool queue = false;
  int64_t held_past_max = 0;
  double oldest_held = 0;
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

// A pooled server connection with a session lock known held on it (PoolerView::locks).
struct PooledConnection {
  std::string pooler;
  std::string database;  // the pool's
  std::string user;
  std::string first_client;
  std::string current_client;
};

// One session's entries in the shared lock table, of one lock type.
struct SessionLockTableEntries {
  std::string datname;
  Identity session;  // pid 0: prepared transactions
  std::string locktype;
  int64_t entries = 0;
  std::optional<PooledConnection> pooled = {};  // the session is a pooler's server connection
};

// The server's shared lock table as one poll saw it (exporter/collectors/lock_table.h).
struct LockTableView {
  bool counted = false;  // entries known: some inventory poll of this server run read pg_locks
  int64_t entries = 0;   // pg_locks rows outside the fast path, exact
  int64_t slots = 0;     // the nominal size from the settings; 0 when unknown
  // The top_n (session, lock type) pairs by entries.
  std::vector<SessionLockTableEntries> sessions;
  int64_t lock_manager_waiters = 0;
  double age = 0;  // seconds between the pg_locks read that counted entries and this poll
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
  // Every root, not capped by top_n (no verdicts): what blocking episodes are judged on.
  std::vector<BlockingRoot> all_blocking_roots;
  std::vector<DeadlockCycle> deadlock_cycles;
  std::vector<IdleHolder> idle_holders;
  std::vector<ServerSetting> settings;
  std::vector<SettingOverride> overrides;
  std::vector<LeaseTableView> leases;
  std::vector<RowLockHolder> row_locks;
  std::vector<PoolerView> poolers;
  LockTableView lock_table;
  int64_t hidden_sessions = 0;  // sessions whose details the exporter's role cannot see
  bool inventory = true;
  // What one collector alone builds and exposes (e.g. ActivityCollector's clients).
  CollectorParts parts;
};

// A cumulative histogram: counts per upper bound (le), their sum and count.
struct CountHistogram {
  std::vector<double> bounds;  // ascending, +Inf not included
  std::vector<double> counts;  // per bound, cumulative; empty until the first Observe
  double sum = 0;
  double count = 0;
  void Observe(double v, const std::vector<double>& with_bounds) {
    if (bounds.empty()) {
      bounds = with_bounds;
      counts.assign(bounds.size(), 0);
    }
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (v <= bounds[i]) counts[i] += 1;
    }
    sum += v;
    count += 1;
  }
  bool operator==(const CountHistogram&) const = default;
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
      lease_transitions;                                                     // table, lease, kind
  std::map<std::tuple<std::string, std::string>, double> blocking_episodes;  // db, outcome
  std::map<std::string, double> deadlocks;                                   // db
  // From the server's log (events/logged_locks.h): waits that outlasted deadlock_timeout by
  // (db, locktype, lock), how long they lasted by locktype, lock timeouts by (db, role).
  std::map<std::tuple<std::string, std::string, std::string>, double> logged_lock_waits;
  std::map<std::string, CountHistogram> logged_wait_seconds;
  std::map<std::tuple<std::string, std::string>, double> lock_timeouts;
  CountHistogram episode_seconds;
  CountHistogram episode_peak_blocked;
  std::map<std::string, double> series_dropped;    // metric
  std::map<std::string, double> collector_errors;  // collector
  bool operator==(const Counters&) const = default;
};

// The one empty Counters, shared by snapshots that count nothing.
inline const std::shared_ptr<const Counters>& NoCounters() {
  static const std::shared_ptr<const Counters> none = std::make_shared<const Counters>();
  return none;
}

// Calls visit(name, map) for each labelled counter map of `c` (Counters or const Counters) and
// visit_histogram(name, histogram) for each histogram: the one list of what Counters holds, for
// code that handles them all alike (the state file, its change detection).
inline constexpr std::string_view kLoggedWaitHistogram = "logged_wait_seconds:";  // + locktype
template <typename C, typename F, typename H>
void ForEachCounter(C& c, F&& visit, H&& visit_histogram) {
  visit("releases", c.releases);
  visit("losses", c.losses);
  visit("takeovers", c.takeovers);
  visit("handovers", c.handovers);
  visit("pooled_inherited", c.pooled_inherited);
  visit("sessions_ended", c.sessions_ended);
  visit("lease_transitions", c.lease_transitions);
  visit("blocking_episodes", c.blocking_episodes);
  visit("deadlocks", c.deadlocks);
  visit("logged_lock_waits", c.logged_lock_waits);
  visit("lock_timeouts", c.lock_timeouts);
  visit("series_dropped", c.series_dropped);
  visit("collector_errors", c.collector_errors);
  visit_histogram(std::string("episode_seconds"), c.episode_seconds);
  visit_histogram(std::string("episode_peak_blocked"), c.episode_peak_blocked);
  for (auto& [locktype, h] : c.logged_wait_seconds) {
    visit_histogram(std::string(kLoggedWaitHistogram) + locktype, h);
  }
}

// How one collector fared at the last poll.
struct CollectorStatus {
  std::string name;
  bool up = false;
  double seconds = 0;  // its parse, own round trips and view building
};

// The server's log reader of a target ([targets.server_log]), as of its last read.
struct ServerLogStatus {
  bool up = false;            // the last read succeeded
  double records = 0;         // records read since the exporter started
  double unparsed = 0;        // records skipped: malformed, oversized, of an unknown shape
  double dropped = 0;         // lock records dropped: more than the poller took between polls
  bool untranslated = false;  // lc_messages is not English: the lock-wait lines cannot be read
  std::string error;          // why the last read failed ("" when up)
  std::string source;         // the file or directory read, or "sql"
  std::string format;         // "jsonlog" or "csvlog"
  std::string file;           // the file being followed
};

// What a scrape serialises for one target.
struct TargetSnapshot {
  std::string target;
  bool up = false;
  double poll_duration = 0;
  double poll_errors = 0;
  // Inventories whose quiet holders' locks changed under the read: kept as tiered polls.
  double quiet_fallbacks = 0;
  double last_success = 0;  // Unix time; 0 = never
  std::string server_version;
  std::string role;   // "primary" or "standby" at the last good poll
  std::string state;  // "connecting", "up", "down": for the landing page
  std::string last_error;
  std::shared_ptr<const TargetView> view;  // null when the last poll failed
  // The shared lock table: this poll's view, or, while polls fail because the table is full, the
  // last good poll's with its age grown (the only figures a failed poll keeps). Null otherwise.
  std::shared_ptr<const LockTableView> lock_table;
  // This poll failed with out of shared memory (SQLSTATE 53200): the lock table is full. False
  // before the first poll and after any other outcome.
  bool lock_table_full = false;
  std::vector<CollectorStatus> collectors;  // empty before the first poll
  // Shared with the snapshots before it while no counter moved (the poller's PublishedCounters):
  // a quiet poll copies none of them. Never null.
  std::shared_ptr<const Counters> counters = NoCounters();
  // The target's recent events, oldest first (web.event_log_size); kept across failed polls.
  std::shared_ptr<const EventList> events;
  // The target's recent history of holders, waits and events (the poller's, live: it shows up to
  // the latest poll); null in snapshots not built by a poller.
  std::shared_ptr<const Timeline> timeline;
  // The server's log reader; null when no [targets.server_log] is configured.
  std::shared_ptr<const ServerLogStatus> server_log;
  // Where preflight requests go to the target's poller (thread-safe; shared by its snapshots);
  // null in snapshots not built by a poller.
  std::shared_ptr<PreflightDesk> preflight;
};

}  // namespace pglock
