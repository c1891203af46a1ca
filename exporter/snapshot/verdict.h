// What on-call should do about a root blocker: the command that frees its waiters with the least
// damage, how many it frees, and what it costs. DecideVerdict() is a pure function of what one
// poll shows of the root (RootFacts, shaped as pg_stat_activity and pg_prepared_xacts give
// them); AttachVerdicts() gathers those facts for every root of a view. The exporter only says
// the command, it never runs it. Pure; thread-safe.
//
// The cases, first match wins:
//   a strong lock request (ALTER TABLE, DROP, VACUUM FULL, REINDEX ...) waits on the root with
//       sessions queued behind it -> cancel that request, not the root; retry it with
//       SET lock_timeout (and say whether its role or database already has one);
//   a prepared transaction          -> ROLLBACK PREPARED '<gid>' after checking with its owner;
//   a pooled server connection holding a session lock -> the pooler's RECONNECT of that pool;
//   an autovacuum worker            -> cancel it, unless it runs "(to prevent wraparound)": then
//                                      leave it alone (it comes back at once);
//   holding a migration tool's lock (node-pg-migrate's or Prisma Migrate's advisory key, the row
//       of knex's lock table read as a row_lock table) that every session waiting on it asks for,
//       and making progress (running a statement, or its last one ended under
//       kWaitersAlertSeconds ago) -> wait for it: the waiters are its duplicates (a second deploy
//       behind the migration), queued by design; cancelling the migration fails it and the
//       duplicate redoes it. To stop a duplicate, cancel it;
//   idle, or idle in transaction    -> terminate (a cancel does nothing to an idle session); its
//                                      transaction rolls back and its advisory locks are dropped;
//   running a statement younger than its waiters' alert threshold (kWaitersAlertSeconds), none
//       of whose waiters has waited that long -> wait: a long statement (a migration, a report) is
//       likelier than a stuck one, and cancelling it makes its work be redone;
//   running a statement             -> cancel, then terminate if the cancel does not end it;
//   anything else                   -> investigate (no command is known to be safe).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/poll_index.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// The waiters' alert threshold: PglockLockWaitLong and PglockAdvisoryLockWaitLong alert on a wait
// above 30 s (held for 1 m). Below it "wait" is the verdict; by the time either alert (or
// PglockLockQueue, 1 m of waits) fires, the verdict is the command, so no alert says "wait".
inline constexpr double kWaitersAlertSeconds = 30;

struct RootFacts {
  LockParticipant root;  // pid 0 and gid for a prepared transaction
  double state_seconds = 0;
  std::optional<double> xact_seconds;  // how long its transaction has been open
  // pg_stat_activity.query of a background process (autovacuum: "autovacuum: VACUUM public.t
  // (to prevent wraparound)"); not needed for client sessions.
  std::string activity_query;
  HeldLockList advisory_locks;  // held by the root's session
  // The pooled server connection (PgBouncer, transaction or statement mode) the root's backend
  // is, with a session lock known held on it.
  std::optional<PooledConnection> pooled;
  std::optional<StrongRequest> strong_request;
  // The migration tool's lock the root holds that every session waiting on it directly asks for
  // ("" when one asks for anything else), and the one of them that has waited longest.
  std::string waited_app_lock;
  int duplicate_pid = 0;
  int64_t blocked = 0;      // sessions blocked through the root
  double longest_wait = 0;  // the longest wait among them
  // The strong request's effective lock_timeout and where it comes from (LockTimeoutOf()).
  double lock_timeout = 0;
  std::string lock_timeout_source;
};

Verdict DecideVerdict(const RootFacts& facts);

// The lock_timeout a session of (datid, roleid) gets from pg_db_role_setting or the server, and
// where it comes from ("role app in database shop", "role app", "database shop", "all roles",
// "server"); 0 and "" when none.
std::pair<double, std::string> LockTimeoutOf(uint32_t datid, uint32_t roleid,
                                             const std::vector<ServerSetting>& settings,
                                             const std::vector<SettingOverride>& overrides);

// Fills the verdict of every root in view->blocking_roots from the poll (sessions, their locks,
// background processes) and the view's pooled locks. REQUIRES: the view is complete.
void AttachVerdicts(const PollData& data, const PollIndex& index, const LockNames* names,
                    TargetView* view);

// What frees the shared lock table of `top`'s `entries`: a pooled connection's leak the pooler's
// RECONNECT (the verdict's rule), any other session its end, whatever its state (a cancel
// releases no session lock).
Verdict LockTableVerdict(const SessionLockTableEntries& top, int64_t entries);

// What ends an idle-in-transaction holder's hold: the verdict's rule for an idle session (or its
// pooled connection's), whether or not it blocks anyone.
Verdict IdleHolderVerdict(const IdleHolder& holder, const std::vector<PoolerView>& poolers);

// The pooled connection that server pid `pid` is, with a session lock known held on it.
std::optional<PooledConnection> PooledConnectionOf(int pid, const std::vector<PoolerView>& poolers);

// The name of an action as /api/v1/locks writes it: "terminate", "cancel", ...
const char* VerdictActionName(VerdictAction a);

// The verdict's words, the one sentence on-call reads: what to do, with the command and the next
// step (then_command), on which pooler's admin console for a pooled connection. /locks prints it
// after "Do:", /api/v1/locks as `advice`, and pglock_session_verdict_info as its `advice` label,
// which the alert descriptions print: no template words a verdict of its own. One line; it names
// no duration or count that changes from poll to poll, so that the series it labels stays one
// series per session and verdict, and for ordinary names it fits a label value (256 bytes).
std::string VerdictAdvice(const Verdict& v);

}  // namespace pglock
