#include "exporter/snapshot/verdict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "exporter/snapshot/timeouts.h"

namespace pglock {
namespace {

constexpr const char* kWraparound = "(to prevent wraparound)";

std::string Duration(double v) {
  char buf[48];
  if (v < 120) {
    std::snprintf(buf, sizeof buf, "%.0f s", v);
  } else if (v < 7200) {
    std::snprintf(buf, sizeof buf, "%.0f min", std::floor(v / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f h", v / 3600);
  }
  return buf;
}

std::string Pid(int pid) { return std::to_string(pid); }

std::string Waiters(int64_t n) {
  return std::to_string(n) + (n == 1 ? " waiting session" : " waiting sessions");
}

// "SELECT pg_cancel_backend(42)" and the like.
std::string Call(const char* function, int pid) {
  return std::string("SELECT ") + function + "(" + Pid(pid) + ")";
}

std::string Quote(const std::string& s) {
  std::string o = "'";
  for (const char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
  return o + "'";
}

// The first few items and how many more: a leaked pool connection can hold thousands of locks.
std::string Joined(const HeldLockList& locks) {
  constexpr size_t kNamed = 5;
  std::string o;
  for (size_t i = 0; i < locks.listed.size() && i < kNamed; ++i) {
    o += (o.empty() ? "" : ", ") + locks.listed[i];
  }
  const int64_t named = static_cast<int64_t>(std::min(locks.listed.size(), kNamed));
  if (locks.total > named) o += " and " + std::to_string(locks.total - named) + " more";
  return o;
}

Verdict StrongRequestVerdict(const RootFacts& f) {
  const StrongRequest& r = *f.strong_request;
  Verdict v;
  v.action = VerdictAction::kCancelStrongRequest;
  v.pid = r.waiter.id.pid;
  v.command = Call("pg_cancel_backend", v.pid);
  v.frees = r.queued_behind;
  v.lock_timeout = f.lock_timeout;
  v.lock_timeout_source = f.lock_timeout_source;
  std::string rel = r.relation.empty() ? "" : " on " + r.relation;
  v.then = "retry it with SET lock_timeout = '5s' so that it gives up instead of queueing readers";
  v.cost = "the " + r.mode + " request" + rel + " (pid " + Pid(v.pid) + ", waiting " +
           Duration(r.seconds) + ") fails and must be retried; the " + Waiters(r.queued_behind) +
           " queued behind it go on. Root pid " + Pid(f.root.id.pid) + " (" + f.root.id.state +
           ") is left alone. ";
  if (f.lock_timeout > 0) {
    v.cost += "Its lock_timeout is " + Duration(f.lock_timeout) + " (from " +
              f.lock_timeout_source + "): the request gives up by itself after that.";
  } else {
    v.cost += "No lock_timeout is set for its role or database: set one (ALTER ROLE " +
              (r.waiter.id.usename.empty() ? std::string("<role>") : r.waiter.id.usename) +
              " SET lock_timeout = '5s') or in the migration.";
  }
  return v;
}

Verdict PreparedVerdict(const RootFacts& f) {
  Verdict v;
  v.action = VerdictAction::kRollbackPrepared;
  v.frees = f.blocked;
  v.command = "ROLLBACK PREPARED " + Quote(f.root.gid);
  v.then = "check with its owner (" + f.root.id.usename +
           ") first: its transaction manager may be about to COMMIT PREPARED it";
  v.cost = "the prepared transaction (prepared " + Duration(f.state_seconds) +
           " ago, no session: no pid to cancel or terminate) rolls back; the distributed "
           "transaction it belongs to must roll back too.";
  return v;
}

Verdict PooledVerdict(const RootFacts& f) {
  const PooledConnection& p = *f.pooled;
  Verdict v;
  v.action = VerdictAction::kPoolerReconnect;
  v.pid = f.root.id.pid;
  v.frees = f.blocked;
  v.pooler = p.pooler;
  v.command = "RECONNECT " + p.database;
  v.then_command = "KILL " + p.database;
  // RECONNECT closes the connection when its client releases it; KILL works on every PgBouncer
  // (KILL_CLIENT, one client only, is not in the 1.18 Debian 12 ships).
  v.then = "on the admin console of pooler " + p.pooler +
           " (psql -p <port> pgbouncer). RECONNECT closes the connection once its client "
           "releases it: if a client keeps it in a transaction (SHOW SERVERS: close_needed 1 "
           "and the lock still held a poll later), KILL " +
           p.database +
           " closes it now, with every connection of that database's pools (their "
           "clients reconnect). Not pg_terminate_backend: that counts a loss and pages";
  v.cost = "the pool " + p.database + "/" + p.user + " closes its server connections as they " +
           "are released, so the session lock leaked on server pid " + Pid(v.pid) +
           " (first taken by " + p.first_client + ", now serving " + p.current_client +
           ") is released cleanly; clients reconnect through the pool. On the admin console "
           "(psql -p <port> pgbouncer), SHOW SERVERS says close_needed 1 while RECONNECT waits "
           "for the client; KILL also closes every other connection of that database's pools.";
  v.dropped_locks = f.advisory_locks;
  return v;
}

Verdict AutovacuumVerdict(const RootFacts& f) {
  Verdict v;
  v.pid = f.root.id.pid;
  if (f.activity_query.find(kWraparound) != std::string::npos) {
    v.action = VerdictAction::kLeaveAlone;
    v.cost =
        "an autovacuum to prevent wraparound must not be cancelled: it restarts at once and "
        "the table gets closer to a forced shutdown. Let it finish; cancel the waiters "
        "instead if they can be retried.";
    return v;
  }
  v.action = VerdictAction::kCancelAutovacuum;
  v.command = Call("pg_cancel_backend", v.pid);
  v.frees = f.blocked;
  v.cost =
      "the vacuum's work on this table so far is lost; autovacuum comes back to the table "
      "later and may block again (tune it, or vacuum it by hand at a quiet time).";
  return v;
}

// Running a statement, or between two (a tool's client works between its statements): not stuck.
bool MakingProgress(const RootFacts& f) {
  if (!f.root.state_seconds.has_value()) return false;
  if (f.root.id.state == "active") return true;
  return (f.root.id.state == "idle" || f.root.id.state == "idle in transaction") &&
         f.state_seconds < kWaitersAlertSeconds;
}

Verdict HolderVerdict(const RootFacts& f) {
  Verdict v;
  v.action = VerdictAction::kWaitForHolder;
  v.pid = f.root.id.pid;
  v.frees = f.blocked;
  v.then_command = Call("pg_cancel_backend", f.duplicate_pid);
  v.then = "to stop a duplicate instead (the run waiting longest, pid " + Pid(f.duplicate_pid) +
           "): " + v.then_command;
  const std::string doing =
      f.root.id.state == "active"
          ? "running a statement for " + Duration(f.state_seconds)
          : "between statements (" + f.root.id.state + " for " + Duration(f.state_seconds) + ")";
  v.cost = "nothing: pid " + Pid(v.pid) + " holds " + f.waited_app_lock + ", the lock its " +
           Waiters(f.blocked) + " ask for, and is making progress (" + doing +
           "). They are its duplicates, queued by design (a second deploy behind a migration): "
           "they go on when it is done. Cancelling the holder fails its work, and the waiting run "
           "redoes it.";
  return v;
}

Verdict SessionVerdict(const RootFacts& f) {
  Verdict v;
  v.pid = f.root.id.pid;
  v.frees = f.blocked;
  v.dropped_locks = f.advisory_locks;
  const std::string tx = f.xact_seconds
                             ? "its transaction (open " + Duration(*f.xact_seconds) + ") rolls back"
                             : "nothing is rolled back (no transaction open)";
  std::string locks;
  if (!f.advisory_locks.empty()) {
    locks = "; its advisory locks are dropped: " + Joined(f.advisory_locks) +
            " (a session lock dropped this way is a loss, PglockAdvisoryLockLost pages, and its "
            "next holder is a takeover)";
  }
  // Waiting is advice only for a statement known to be young: a root whose state_change could not
  // be read (an unknown age counts as 0 s) may have run for hours.
  if (f.root.id.state == "active" && f.root.state_seconds.has_value() &&
      f.state_seconds < kWaitersAlertSeconds && f.longest_wait < kWaitersAlertSeconds) {
    v.action = VerdictAction::kWait;
    v.then_command = Call("pg_cancel_backend", v.pid);
    v.then = "if it still runs when its waiters have waited " + Duration(kWaitersAlertSeconds) +
             " (their alerts' threshold): " + v.then_command;
    v.cost = "nothing yet: its statement has run " + Duration(f.state_seconds) +
             " and its longest waiter has waited " + Duration(f.longest_wait) + ", less than the " +
             Duration(kWaitersAlertSeconds) +
             " above which waits alert. A long statement (a migration, a report) is likelier "
             "than a stuck one; cancelling it now makes its work be redone by whoever waits.";
    return v;
  }
  if (f.root.id.state == "active") {
    v.action = VerdictAction::kCancel;
    v.command = Call("pg_cancel_backend", v.pid);
    v.then_command = Call("pg_terminate_backend", v.pid);
    v.then = "if it is still there a few seconds later: " + v.then_command;
    v.cost =
        "its running statement fails (the client sees an error); inside an explicit "
        "transaction the locks stay until its client rolls back (it shows idle in "
        "transaction (aborted)), then terminate it: " +
        tx + locks + ".";
    return v;
  }
  v.action = VerdictAction::kTerminate;
  v.command = Call("pg_terminate_backend", v.pid);
  v.cost = "a cancel does nothing to an idle session; terminating it ends the session: " + tx +
           locks + ". Its client gets an error on its next statement.";
  return v;
}

}  // namespace

Verdict DecideVerdict(const RootFacts& f) {
  if (f.strong_request && f.strong_request->queued_behind > 0) return StrongRequestVerdict(f);
  if (f.root.id.pid == 0) return PreparedVerdict(f);
  if (f.pooled) return PooledVerdict(f);
  if (f.root.backend_type == "autovacuum worker") return AutovacuumVerdict(f);
  if (f.root.backend_type == "client backend" && !f.waited_app_lock.empty() && MakingProgress(f)) {
    return HolderVerdict(f);
  }
  if (f.root.backend_type == "client backend" &&
      (f.root.id.state == "active" || f.root.id.state == "idle" ||
       f.root.id.state.starts_with("idle in transaction"))) {
    return SessionVerdict(f);
  }
  Verdict v;
  v.pid = f.root.id.pid;
  v.cost = f.root.backend_type.empty()
               ? "the root is not visible to the exporter's role (grant it pg_monitor) or has "
                 "just ended; look it up in pg_stat_activity."
               : "a " + f.root.backend_type +
                     " holds the lock: no command is known to be safe; look it up in "
                     "pg_stat_activity.";
  return v;
}

std::pair<double, std::string> LockTimeoutOf(uint32_t datid, uint32_t roleid,
                                             const std::vector<ServerSetting>& settings,
                                             const std::vector<SettingOverride>& overrides) {
  const SettingInForce s = SettingFor("lock_timeout", datid, roleid, settings, overrides);
  if (s.seconds <= 0) return {0, ""};
  return {s.seconds, s.source};
}

const char* VerdictActionName(VerdictAction a) {
  switch (a) {
    case VerdictAction::kTerminate:
      return "terminate";
    case VerdictAction::kCancel:
      return "cancel";
    case VerdictAction::kWait:
      return "wait";
    case VerdictAction::kWaitForHolder:
      return "wait_for_holder";
    case VerdictAction::kRollbackPrepared:
      return "rollback_prepared";
    case VerdictAction::kCancelStrongRequest:
      return "cancel_waiting_ddl";
    case VerdictAction::kCancelAutovacuum:
      return "cancel_autovacuum";
    case VerdictAction::kLeaveAlone:
      return "leave_alone";
    case VerdictAction::kPoolerReconnect:
      return "pooler_reconnect";
    case VerdictAction::kInvestigate:
      return "investigate";
  }
  return "investigate";
}

std::string VerdictAdvice(const Verdict& v) {
  // The next step, after a joint that reads after what comes before it.
  const auto then = [&](const char* joint) -> std::string {
    return v.then.empty() ? "" : joint + v.then;
  };
  switch (v.action) {
    case VerdictAction::kPoolerReconnect:
      // The pooler's console, not the server: RECONNECT waits for the client to release the
      // connection, KILL does not.
      return v.command + " on PgBouncer " + v.pooler + "'s admin console, or " + v.then_command +
             " if a client keeps that connection in a transaction; not pg_terminate_backend, "
             "which counts a loss and pages";
    case VerdictAction::kCancelStrongRequest:
      return v.command + " (the DDL waiting at the head of the queue, not the root)" +
             then(", then ");
    case VerdictAction::kWait:
      return "wait" + then(", then ");
    case VerdictAction::kWaitForHolder:
      return "wait for it: it is a migration holding its tool's lock and making progress, and its "
             "waiters are its duplicates (a second deploy)" +
             then("; ");
    case VerdictAction::kRollbackPrepared:
      return v.command + then("; ");
    case VerdictAction::kLeaveAlone:
      return "leave it alone: an autovacuum to prevent wraparound comes back at once" +
             then(", then ");
    case VerdictAction::kTerminate:
    case VerdictAction::kCancel:
    case VerdictAction::kCancelAutovacuum:
    case VerdictAction::kInvestigate:
      break;
  }
  if (v.command.empty()) return "investigate: no command is known to be safe" + then(", then ");
  return v.command + then(", then ");
}

std::optional<PooledConnection> PooledConnectionOf(int pid,
                                                   const std::vector<PoolerView>& poolers) {
  for (const PoolerView& p : poolers) {
    for (const PooledLockRow& l : p.locks) {
      if (l.pid == pid) {
        return PooledConnection{p.name, l.database, l.user, l.first_client, l.current_client};
      }
    }
  }
  return std::nullopt;
}

namespace {

// The advisory locks held by each pid: one pass over the poll's locks (100k at scale), not one per
// root.
using HeldByPid = std::unordered_map<int, HeldLockList>;

// Migration tools' locks, as the tools take them: a constant advisory key (node-pg-migrate's
// 7241865325823964, Prisma Migrate's 72707369), or the row of knex's lock table, named after its
// migrations table (knex_migrations_lock by default), inside the migration's transaction.
constexpr int64_t kMigrationKeys[] = {7241865325823964, 72707369};
constexpr std::string_view kMigrationLockTableSuffix = "migrations_lock";

bool IsMigrationKey(const AdvisoryKey& k) {
  const int64_t key = static_cast<int64_t>((uint64_t{k.classid} << 32) | k.objid);
  return k.objsubid == 1 && std::find(std::begin(kMigrationKeys), std::end(kMigrationKeys), key) !=
                                std::end(kMigrationKeys);
}

// From the poll's one pass over its advisory locks: the migration key each root holds, and the key
// each waiting process asks for (a process waits for one lock at a time).
struct MigrationKeys {
  std::unordered_map<int, AdvisoryKey> held;
  std::unordered_map<int, AdvisoryKey> wanted;
};

// The migration tool's lock root `pid` holds that every session waiting on it directly asks for
// (RootFacts::waited_app_lock): a waiter for the migration key the root holds, or, while the root
// holds the row of a migration lock table (a row_lock table), a waiter for its transaction, taken
// for a second taker of that row (pg_locks does not say which row it wants).
void WaitedMigrationLock(int pid, const TargetView& view, const MigrationKeys& keys, RootFacts* f) {
  std::string row;
  for (const RowLockHolder& h : view.row_locks) {
    if (h.holder.pid == pid && h.table.ends_with(kMigrationLockTableSuffix)) {
      row = h.table + " " + h.lease;
    }
  }
  const auto key = keys.held.find(pid);
  std::string lock;
  double longest = -1;
  for (const LockWaitEdge& w : view.lock_waits) {
    if (w.blocker.id.pid != pid) continue;
    std::string wanted;
    if (w.locktype == "advisory" && key != keys.held.end()) {
      const auto it = keys.wanted.find(w.waiter.id.pid);
      if (it != keys.wanted.end() && it->second == key->second) wanted = "advisory lock " + w.lock;
    }
    if (w.locktype == "transactionid") wanted = row;
    if (wanted.empty() || (!lock.empty() && wanted != lock)) return;
    lock = wanted;
    if (w.seconds > longest) {
      longest = w.seconds;
      f->duplicate_pid = w.waiter.id.pid;
    }
  }
  f->waited_app_lock = lock;
}

RootFacts FactsOf(const BlockingRoot& r, const PollData& data, const PollIndex& index,
                  const HeldByPid& held, const MigrationKeys& keys, const TargetView& view) {
  RootFacts f;
  f.root = r.root;
  f.state_seconds = r.state_seconds;
  f.blocked = static_cast<int64_t>(r.blocked_pids.size());
  f.longest_wait = r.longest_wait;
  f.strong_request = r.strong_request;
  const int pid = r.root.id.pid;
  if (pid == 0) return f;
  if (const Session* s = index.Find(pid); s != nullptr && s->xact_start) {
    f.xact_seconds = std::max(0.0, data.now - *s->xact_start);
  }
  for (const LockParty& p : data.lock_parties) {
    if (p.pid == pid) f.activity_query = p.query;
  }
  if (const auto it = held.find(pid); it != held.end()) f.advisory_locks = it->second;
  f.pooled = PooledConnectionOf(pid, view.poolers);
  WaitedMigrationLock(pid, view, keys, &f);
  if (f.strong_request) {
    std::tie(f.lock_timeout, f.lock_timeout_source) = LockTimeoutOf(
        f.strong_request->datid, f.strong_request->roleid, data.settings, data.overrides);
  }
  return f;
}

}  // namespace

Verdict LockTableVerdict(const SessionLockTableEntries& top, int64_t entries) {
  Verdict v;
  if (top.pooled) {
    RootFacts f;
    f.root.id = top.session;
    f.root.datname = top.datname;
    f.pooled = top.pooled;
    v = DecideVerdict(f);
  } else {
    v.action = VerdictAction::kTerminate;
    v.pid = top.session.pid;
    v.command = Call("pg_terminate_backend", v.pid);
    v.cost =
        "its session ends: its session locks are dropped (an advisory one dropped this way is a "
        "loss, PglockAdvisoryLockLost pages, and its next holder is a takeover) and its "
        "transaction rolls back; its client gets an error on its next statement.";
  }
  v.frees = entries;
  return v;
}

Verdict IdleHolderVerdict(const IdleHolder& holder, const std::vector<PoolerView>& poolers) {
  RootFacts f;
  f.root.id = holder.holder;
  f.root.datname = holder.datname;
  f.state_seconds = holder.seconds;
  f.xact_seconds = holder.seconds;  // at least
  f.pooled = PooledConnectionOf(holder.holder.pid, poolers);
  return DecideVerdict(f);
}

void AttachVerdicts(const PollData& data, const PollIndex& index, const LockNames* names,
                    TargetView* view) {
  if (view->blocking_roots.empty()) return;
  HeldByPid held;
  for (const BlockingRoot& r : view->blocking_roots) held[r.root.id.pid];
  MigrationKeys keys;
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted) keys.wanted[l.pid] = l.key;
    const auto it = held.find(l.pid);
    if (it == held.end() || !l.granted) continue;
    it->second.Add([&] { return LockLabel(l.key, names); });
    if (IsMigrationKey(l.key)) keys.held[l.pid] = l.key;
  }
  for (BlockingRoot& r : view->blocking_roots) {
    r.verdict = DecideVerdict(FactsOf(r, data, index, held, keys, *view));
  }
}

}  // namespace pglock
