// Before a migration: would a lock of `mode` on a table queue now, behind whom, and would the
// sessions after it queue behind it (GET /api/v1/preflight, docs/preflight.md). The HTTP side
// hands a request to the target's poller through a PreflightDesk; the poller reads the table's
// relation locks on its own connection during its next poll (queries/preflight.sql) and judges
// them here against that poll's sessions, wait forest and settings. Everything but PreflightDesk
// and PreflightTicket is pure and thread-compatible; those two are thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/poll_index.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/snapshot/timeouts.h"
#include "exporter/util/table_name.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

// The eight table lock modes as PostgreSQL names them in pg_locks, weakest first.
inline constexpr const char* kTableLockModes[] = {
    "AccessShareLock", "RowShareLock",          "RowExclusiveLock", "ShareUpdateExclusiveLock",
    "ShareLock",       "ShareRowExclusiveLock", "ExclusiveLock",    "AccessExclusiveLock"};

// Whether two table lock modes conflict, as PostgreSQL's conflict table says (the modes are
// pg_locks' names; an unknown name conflicts with nothing).
bool LockModesConflict(const std::string& a, const std::string& b);
bool IsTableLockMode(const std::string& mode);

struct PreflightRequest {
  std::string table;  // as given
  TableName parsed;
  std::string mode = "AccessExclusiveLock";
  std::string role;  // "" when not given
};

// One row of the table's relation locks (queries/preflight.sql).
struct RelationLock {
  int pid = 0;  // 0: a prepared transaction
  std::string mode;
  bool granted = false;
  std::optional<double> waitstart = {};  // server epoch seconds, 14+
  std::string gid = {};                  // prepared transactions
  // From pg_stat_activity, for holders the poll does not read (not client backends).
  std::string backend_type = {};
  std::string state = {};
  std::optional<double> state_change = {};  // server epoch seconds
  std::string activity_query = {};          // autovacuum workers only
};

// What the poller read for one request.
struct PreflightFacts {
  bool table_found = false;
  std::string relation;  // schema.table as the catalog names it
  std::string datname;   // the database the target's connection is to
  uint32_t datid = 0;
  std::optional<uint32_t> roleid;  // when the request named a role that exists
  std::vector<RelationLock> locks;
};

// A session whose lock on the table conflicts with the requested mode (or that waits on it).
struct PreflightParty {
  LockParticipant who;
  std::string mode;  // held, or requested by a waiter
  bool granted = false;
  std::optional<double> idle_in_transaction_seconds;
  std::optional<double> statement_seconds;  // running a statement: for how long
  std::optional<double> waited_seconds;     // a waiter: for how long
  std::optional<PooledConnection> pooled;
  int root_pid = 0;  // the root blocker of its chain: itself when it waits for nobody
  Verdict verdict;   // what the on-call page says of that root (or of it, were it one)
};

struct PreflightAnswer {
  // 200 with a verdict; else an error: 400 (bad table or role), 503 (the poll failed or the
  // poller is gone), with `error` saying why.
  int status = 200;
  std::string error;
  std::string target;
  std::string table;  // schema.table
  std::string database;
  std::string mode;
  std::string role;
  std::string verdict;                    // "clear", "would_wait", "would_block"
  double answered_at = 0;                 // Unix time of the poll that answered
  std::vector<PreflightParty> conflicts;  // holders and waiters the request would queue behind
  std::vector<PreflightParty> waiting;    // every session waiting for a lock on the table
  SettingInForce lock_timeout;
  SettingInForce statement_timeout;
  std::string advice;
};

// The answer for `request` from what the poller read and that poll's data and view.
PreflightAnswer JudgePreflight(const PreflightRequest& request, const PreflightFacts& facts,
                               const PollData& data, const PollIndex& index,
                               const TargetView& view);

// A request handed to a poller, and its answer once the poll gave it. Thread-safe.
class PreflightTicket {
 public:
  explicit PreflightTicket(PreflightRequest request) : request_(std::move(request)) {}
  const PreflightRequest& request() const { return request_; }
  void Answer(PreflightAnswer answer) EXCLUDES(mu_);
  // The answer, or nullopt when none came within `seconds`.
  std::optional<PreflightAnswer> Wait(double seconds) EXCLUDES(mu_);

 private:
  const PreflightRequest request_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::optional<PreflightAnswer> answer_ GUARDED_BY(mu_);
};

// A poller's queue of preflight requests, bounded: a flood is refused, never a slower poll.
// Thread-safe; shared by the poller and every snapshot it publishes.
class PreflightDesk {
 public:
  static constexpr size_t kCapacity = 8;

  // nullptr when kCapacity requests already wait for the next poll.
  std::shared_ptr<PreflightTicket> Submit(PreflightRequest request) EXCLUDES(mu_);
  // The requests waiting, oldest first (the poller, at each poll).
  std::vector<std::shared_ptr<PreflightTicket>> Take() EXCLUDES(mu_);
  // How long a request may wait for its answer: a poll interval and a poll's timeout (poller).
  void SetAnswerWithin(double seconds) EXCLUDES(mu_);
  double answer_within() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::deque<std::shared_ptr<PreflightTicket>> pending_ GUARDED_BY(mu_);
  double answer_within_ GUARDED_BY(mu_) = 30;
};

}  // namespace pglock
