// What the server's log says about locks, as structured observations: ClassifyLockRecord() reads
// one LogRecord (jsonlog and csvlog alike) and returns the lock wait, lock timeout, failed NOWAIT
// or deadlock it reports. Pure functions over the record; plain data; thread-safe.
//
// The records, as PostgreSQL 14 to 18 write them (the formats are older and unchanged since):
//
//   LOG 00000 (log_lock_waits = on; after deadlock_timeout, then once more when the wait ends)
//     "process %d still waiting for %s on %s after %ld.%03d ms"              kStillWaiting
//     "process %d acquired %s on %s after %ld.%03d ms"                      kAcquired (no DETAIL)
//     "process %d avoided deadlock for %s on %s by rearranging queue order after %ld.%03d ms"
//                                                                           kAvoidedDeadlock
//     "process %d detected deadlock while waiting for %s on %s after %ld.%03d ms"
//                                                                           kDetectedDeadlock
//     "process %d failed to acquire %s on %s after %ld.%03d ms"             kFailedToAcquire
//     DETAIL "Process holding the lock: %s. Wait queue: %s." (or "Processes ...": pid lists, ", ")
//   LOG 00000 (18, log_lock_failures = on; before the NOWAIT's ERROR)
//     "process %d could not obtain %s on %s"                                kLockFailure
//     DETAIL "Process holding the lock: %s, Wait queue: %s." (a comma, not a full stop)
//   ERROR 55P03
//     "canceling statement due to lock timeout"                             kLockTimeout
//     "could not obtain lock on relation \"%s\"" (or "%s.%s"),
//     "could not obtain lock on row in relation \"%s\"",
//     "aborting because lock on relation \"%s.%s\" is not available"        kNowaitFailed
//     any other text (another language, a form not listed here)           kLockNotAvailable
//   ERROR 40P01                                                             kDeadlock
//     "deadlock detected"; DETAIL (the server log's errdetail_log): one line per process of the
//     cycle, "Process %d waits for %s on %s; blocked by process %d.", then one per process,
//     "Process %d: %s" with its query (which may hold newlines: it ends where the next
//     process's line begins, the last at the end of the DETAIL).
//
// The lock ("on %s") is DescribeLockTag()'s text, parsed by ParseLockTag().
//
// Language: the SQLSTATE decides kLockTimeout/kNowaitFailed/kLockNotAvailable and kDeadlock in
// any lc_messages; the texts (which of the two for 55P03, the cycle of a deadlock, the lock's
// description) are read in English only. The LOG lines have no SQLSTATE of their own (00000), so a
// translated wait line is not classified at all: LooksLikeTranslatedLockWait() recognises one by
// its shape, so that an unreadable log is reported instead of counted as silence.
//
// Bounds: at most kMaxPids pids per holder or queue list and kMaxCycle processes per deadlock (the
// rest are dropped and `truncated` set); every string is a copy of part of the record, so memory
// stays within the record's own size. Any bytes are accepted; a text that does not follow the
// format leaves its fields empty (or 0) rather than guessing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/serverlog/log_record.h"

namespace pglock {

enum class LockRecordKind {
  kStillWaiting,
  kAcquired,
  kAvoidedDeadlock,
  kDetectedDeadlock,
  kFailedToAcquire,
  kLockFailure,
  kLockTimeout,
  kNowaitFailed,
  kLockNotAvailable,
  kDeadlock,
};

// "still_waiting", "acquired", "avoided_deadlock", "detected_deadlock", "failed_to_acquire",
// "lock_failure", "lock_timeout", "nowait_failed", "lock_not_available", "deadlock".
const char* LockRecordKindName(LockRecordKind kind);

// One lock as DescribeLockTag() describes it.
struct LoggedLockTag {
  // As pg_locks.locktype spells it: relation, extend, frozenid, page, tuple, transactionid,
  // virtualxid, spectoken, object, userlock, advisory, applytransaction. Empty when the text is
  // not one of DescribeLockTag()'s English forms (translated, "unrecognized locktag type", junk).
  std::string locktype;
  uint32_t database = 0;  // pg_locks.database, for the types that have one
  uint32_t relation = 0;  // pg_locks.relation: relation, extend, page, tuple
  // LOCKTAG's locktag_field1..4, as pg_locks derives its columns from them:
  //   relation, extend     [database, relation, -, -]
  //   frozenid             [database, -, -, -]
  //   page                 [database, relation, page, -]
  //   tuple                [database, relation, page, tuple]
  //   transactionid        [xid, -, -, -]
  //   virtualxid           [procnumber (%d, as its uint32 bits), local xid, -, -]
  //   spectoken            [xid, token, -, -]
  //   object               [database, classid, objid, -]   (objsubid is not logged)
  //   userlock             [f1, f2, f3, -]
  //   advisory             [database, classid, objid, objsubid]: a bigint key k is
  //                        [db, k >> 32, k & 0xffffffff, 1], two int4 keys (a, b) are [db, a, b, 2]
  //   applytransaction     [database, subscription, remote xid, -]
  uint32_t field[4] = {};
  std::string text;  // as logged
  // The relation as the poll names it (schema.table), set by the poller from the catalog
  // (poll/relation_names.h); empty until then, or when it cannot be named there.
  std::string relation_name;
};

// A process of a deadlock's cycle.
struct DeadlockProcess {
  int pid = 0;
  std::string mode;  // the lock mode it waited for ("ShareLock")
  LoggedLockTag lock;
  int blocked_by = 0;  // the next process of the cycle
  std::string query;   // its query as logged ("" when not logged)
};

struct LockRecord {
  LockRecordKind kind = LockRecordKind::kStillWaiting;
  double time = 0;  // the record's log_time
  // The process the record is about: the waiter, the one that gave up, the deadlock's victim.
  int pid = 0;
  int64_t session_start = 0;  // its backend's start (from session_id), epoch seconds
  std::string backend_type;   // "client backend", "autovacuum worker" ... ("" before 13)
  std::string dbname;
  std::string user;
  std::string application_name;
  std::string statement;  // the statement being run, when logged
  std::string sqlstate;
  std::string message;  // as logged

  // The lock: waited for (the LOG kinds), or the victim's in a deadlock's cycle.
  std::string mode;
  LoggedLockTag lock;
  double waited_seconds = 0;  // "after %ld.%03d ms": the time waited so far (timed LOG kinds)
  std::vector<int> holders;   // from the DETAIL (wait lines, kLockFailure)
  std::vector<int> queue;     // the wait queue, the waiter itself included

  // kNowaitFailed: the relation its message names ("%s" or "schema.name", as logged);
  // kLockTimeout: the relation its CONTEXT names when it waited for a row ("while updating tuple
  // (0,1) in relation \"t\""). Empty otherwise.
  std::string relation_name;

  std::vector<DeadlockProcess> cycle;  // kDeadlock, from its DETAIL, in the order logged
  bool truncated = false;              // a pid list or the cycle was longer than its bound
};

inline constexpr size_t kMaxPids = 100;
inline constexpr size_t kMaxCycle = 100;

// The lock observation `record` reports, or nullopt when it reports none.
std::optional<LockRecord> ClassifyLockRecord(const LogRecord& record);

// DescribeLockTag()'s text as a lock: `text` is always kept; locktype and the numbers only when
// the whole text is one of its English forms.
LoggedLockTag ParseLockTag(std::string_view text);

// True when `record` is not one ClassifyLockRecord() reads but has the shape of a log_lock_waits
// line in another language: LOG, SQLSTATE 00000, a message that holds the record's own pid, a lock
// mode name (GetLockmodeName() is never translated) and a "%ld.%03d" time ('.' or ','). Every
// translation shipped with PostgreSQL 15 has that shape; a statement or duration line does not
// unless it names both the pid and a lock mode.
bool LooksLikeTranslatedLockWait(const LogRecord& record);

}  // namespace pglock
