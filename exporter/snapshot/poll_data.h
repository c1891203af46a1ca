// What one poll observed on one PostgreSQL server, as plain values: the collectors in
// exporter/collectors fill it, exporter/snapshot turns two of them into metrics and events.
// Immutable once built, but for its index, set once the poll is complete (IndexPoll); shared
// between threads through shared_ptr<const PollData>.
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
#include "exporter/util/shared_text.h"

namespace pglock {

// An advisory lock key as pg_locks shows it: objsubid 1 = one bigint (classid = high 32 bits,
// objid = low 32 bits), objsubid 2 = two int4 (classid = key1, objid = key2).
struct AdvisoryKey {
  uint32_t datid = 0;
  uint32_t classid = 0;
  uint32_t objid = 0;
  int objsubid = 1;

  auto Tie() const { return std::tie(datid, classid, objid, objsubid); }
  bool operator<(const AdvisoryKey& o) const { return Tie() < o.Tie(); }
  bool operator==(const AdvisoryKey& o) const { return Tie() == o.Tie(); }
};

// "<bigint>" for objsubid 1, "<int4>:<int4>" for objsubid 2, signed as the application passed them.
std::string RenderAdvisoryKey(const AdvisoryKey& key);

// pg_blocking_pids() as array_to_string(..., ','): "12,0,34" -> {12, 0, 34}.
std::vector<int> ParsePidList(std::string_view text);

// One client backend from pg_stat_activity (never the exporter's own).
struct Session {
  int pid = 0;
  uint32_t datid = 0;
  std::string datname;
  uint32_t usesysid = 0;
  std::string usename;
  std::string application_name;
  std::string client_addr;   // "" for Unix sockets; "local" is rendered by the metrics layer
  std::string state;         // "active", "idle", "idle in transaction", ...; "" if not visible
  double backend_start = 0;  // server epoch seconds
  std::optional<double> xact_start;
  std::optional<double> state_change;
  std::optional<double> query_start;
  bool waiting_on_lock = false;  // wait_event_type = 'Lock'
  bool advisory_wait = false;    // ... and wait_event = 'advisory'
  std::vector<int> blocked_by;   // pg_blocking_pids(pid), only when waiting on a lock
  std::string query;  // only with web.show_query_text: the first 1 KB of pg_stat_activity.query
  // pg_stat_activity.backend_xid: the top-level transaction id, once the transaction has one.
  std::optional<uint32_t> backend_xid;

  bool IdleInTransaction() const {
    return state == "idle in transaction" || state == "idle in transaction (aborted)";
  }
  bool NotRunning() const { return state == "idle" || IdleInTransaction(); }
};

// One advisory row of pg_locks.
struct AdvisoryLock {
  AdvisoryKey key;
  int pid = 0;
  bool exclusive = true;  // ExclusiveLock vs ShareLock
  bool granted = true;
  std::optional<double> waitstart;  // 14+, NULL briefly after the wait starts
  // Held while its session stayed idle, outside any transaction, across the whole read of
  // pg_locks (its state_change the same before and after): only a session lock can be. False
  // when that is not proven (the holder was in or entered a transaction, or is not visible).
  bool outside_transaction = false;
};

// A lock request not granted yet, of every type but advisory (PollData::locks has those). Read by
// the advisory collector's statement, the poll's one read of pg_locks.
struct LockWaitRow {
  int pid = 0;  // the waiting process (a parallel worker's own pid, not its leader's)
  std::string locktype;
  std::string mode;
  uint32_t datid = 0;         // 0: a shared object, or a lock type without a database
  std::string relation;       // schema.table when resolved in the polled database, else the OID
  std::string transactionid;  // the xid waited for (transactionid waits)
  std::string locktag;        // names the locked object: equal tags, one object
  std::optional<double> waitstart;  // 14+, NULL briefly after the wait starts
};

// A transaction id some session holds (its granted `transactionid` lock in pg_locks): its own top
// level transaction's, and one per subtransaction that wrote or locked something.
struct TransactionLock {
  int pid = 0;
  uint32_t xid = 0;
};

// A party to lock waits that is not a client backend: a background process (autovacuum, a
// parallel worker, ...) or a prepared transaction (pid 0: it holds locks without a backend).
struct LockParty {
  int pid = 0;
  int leader_pid = 0;        // a parallel worker's leader (13+), else 0
  std::string backend_type;  // pg_stat_activity.backend_type; "prepared transaction" for those
  uint32_t datid = 0;        // 0: no database (some background processes)
  std::string usename;
  std::string application_name;
  std::string client_addr;
  std::string state;
  std::optional<double> since;  // state_change (else xact_start), or when it was prepared
  bool waiting_on_lock = false;
  std::vector<int> blocked_by;
  std::string gid;  // prepared transactions
  std::string xid;  // prepared transactions: their transaction id
  // An autovacuum worker's pg_stat_activity.query ("autovacuum: VACUUM public.t (to prevent
  // wraparound)"); "" for other processes.
  std::string query;
};

// A granted lock outside the fast path that the advisory statement returns only to be counted in
// the shared lock table (a relation lock past a backend's fast-path slots, a transaction id, the
// exporter's own, a prepared transaction's): its holder and type, nothing else.
struct CountedLock {
  int pid = 0;
  std::string locktype;
  int64_t entries = 1;  // rows of that pid and type the statement returned as one
};

// Its texts are shared: every poll carries the settings on, copied from the last read.
struct ServerSetting {
  SharedText name;
  double seconds = 0;  // 0 = disabled
  SharedText source;   // pg_settings.source
};

// One per-role/per-database override from pg_db_role_setting. 0 oid / "*" = all.
struct SettingOverride {
  std::string name;
  uint32_t datid = 0;
  uint32_t roleid = 0;
  std::string database = "*";
  std::string role = "*";
  double seconds = 0;
};

struct DatabaseStats {
  uint32_t datid = 0;
  std::string datname;
  int64_t sessions_fatal = 0;
  int64_t sessions_killed = 0;
  int64_t sessions_abandoned = 0;
  int64_t deadlocks = 0;
};

// Its texts are shared: a row read again as it was costs no allocation, nor its copies.
struct LeaseRow {
  SharedText name;
  SharedText holder;      // "" when the table has no holder
  double taken_at = 0;    // server epoch seconds; when the table has no taken_at, the now() of the
                          // read that first saw the row held (by this holder)
  double expires_at = 0;  // server epoch seconds; 0 when the table has no expiry
  // row_lock tables: held because an open transaction has locked or changed the row (its xmax,
  // `xid`), and that transaction's session (`pid`; 0 when no live session holds a lock on the id:
  // a released savepoint, a prepared transaction). The holder text then names the session, or the
  // transaction. False for rows held by held_sql only.
  bool row_locked = false;
  int pid = 0;
  uint32_t xid = 0;
};

// A lease table's cumulative write counters (pg_stat_all_tables.n_tup_upd, n_tup_del). They are
// the evidence that a lease was given back before it changed holder
// (exporter/events/lease_transitions.h).
struct TableWrites {
  int64_t updated = 0;
  int64_t deleted = 0;
};

struct LeaseTableData {
  std::string table;
  bool ok = false;
  std::string error;           // why the read failed (missing table/column, permission, ...)
  std::vector<LeaseRow> rows;  // at most poll.max_leases, soonest expiry first
  // Which fields the table has (its config): without an expiry every row read is held (held_sql);
  // without taken_at, rows' taken_at is when the exporter first saw them held. `filtered`: rows
  // leave and enter the read by updates too (where_sql, held_sql), not only by DELETE and INSERT.
  bool has_expiry = true;
  bool has_taken_at = true;
  bool filtered = false;
  bool row_lock = false;
  // A table of work ([[targets.leases]] queue): its rows are jobs, seen once; exported per table.
  // queue_detectable: the config leaves it unset, so its names decide (LeaseTransitions).
  bool queue = false;
  bool queue_detectable = false;
  int64_t total = 0;  // rows in the table (rows.size() is smaller when capped)
  double now = 0;     // the server clock when the table was read (the poll's, when no row was)
  int64_t held = 0;   // exact counts over the whole table
  int64_t expired = 0;
  // Read just before `rows`; absent when the counters do not follow the table's writes (standby,
  // track_counts off, not a plain table).
  std::optional<TableWrites> writes;
};

// A PgBouncer server connection (SHOW SERVERS) of a transaction- or statement-mode pool.
struct PooledServer {
  std::string database;
  std::string user;
  int remote_pid = 0;
  std::string linked_client = {};  // "addr:port" of the client it serves right now; "" when idle
};

struct PoolerData {
  std::string name;
  bool ok = false;
  std::string error;
  std::vector<PooledServer> servers;  // only pools in transaction or statement mode
};

class PollIndex;  // poll_index.h

// Where a complete poll keeps its index (IndexPoll, poll_index.h). The index points into the
// PollData that holds it: a copy of the PollData starts without one, and a move keeps it (a
// moved vector keeps its elements where they were).
class PollIndexSlot {
 public:
  PollIndexSlot() = default;
  PollIndexSlot(const PollIndexSlot&) noexcept {}
  PollIndexSlot& operator=(const PollIndexSlot&) noexcept {
    index_.reset();
    return *this;
  }
  PollIndexSlot(PollIndexSlot&&) noexcept = default;
  PollIndexSlot& operator=(PollIndexSlot&&) noexcept = default;
  ~PollIndexSlot() = default;

  const PollIndex* get() const { return index_.get(); }
  void Set(std::shared_ptr<const PollIndex> index) { index_ = std::move(index); }

 private:
  std::shared_ptr<const PollIndex> index_;
};

struct PollData {
  std::string server_version;
  int server_version_num = 0;
  double postmaster_start = 0;  // epoch seconds; a change means the server restarted
  double now = 0;               // the server's now() at the poll
  std::string lc_messages;      // the language of the server's log messages
  bool in_recovery = false;     // a standby (pg_is_in_recovery()); promotion is not a restart
  bool inventory = true;        // false when the tiered poll skipped the pg_locks inventory
  // An inventory whose quiet holders' rows disagreed with the last inventory's (a holder ran a
  // statement between the poll's snapshot of pg_stat_activity and its read of pg_locks): kept as
  // a tiered poll, the next reads every holder (queries/advisory_locks.sql).
  bool quiet_mismatch = false;
  std::vector<Session> sessions;
  std::vector<AdvisoryLock> locks;
  // Read only when some backend waits on a lock (exporter/collectors/lock_waits.h); lock_waits by
  // the advisory collector, with its locks.
  std::vector<LockWaitRow> lock_waits;
  std::vector<LockParty> lock_parties;
  // The advisory collector's one read of pg_locks (inventory polls) also returns the rows outside
  // the fast path it does not otherwise need, for the lock-table collector to count.
  std::vector<CountedLock> counted_locks;
  // Granted transactionid locks, read with the inventory when a row_lock table is configured
  // (xact_locks_read); the row-lock tables' holders are matched against them.
  std::vector<TransactionLock> xact_locks;
  bool xact_locks_read = false;
  std::vector<ServerSetting> settings;
  // pg_conf_load_time() of this session when `settings` were read (epoch microseconds): they
  // change only with it, so a poll reads them again only when it moved (queries/settings.sql).
  int64_t settings_loaded_us = 0;
  std::vector<SettingOverride> overrides;
  std::optional<std::vector<DatabaseStats>> database_stats;  // 14+
  // 14 only: when the stats collector wrote database_stats (epoch seconds), possibly before now.
  std::optional<double> database_stats_snapshot;
  std::vector<LeaseTableData> leases;
  std::vector<PoolerData> poolers;
  // False when the exporter's role cannot see other sessions' details (no pg_monitor).
  bool full_visibility = true;
  // What one collector alone parses and reads (collector_parts.h).
  CollectorParts parts;
  // Its sessions and databases indexed, once the poll is complete (IndexPoll).
  PollIndexSlot index;
};

}  // namespace pglock
