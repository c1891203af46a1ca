// The collector interface: one implementation per signal family (exporter/collectors/*.cc, each
// registered by its own PGLOCK_REGISTER_COLLECTOR line). A collector owns its SQL
// (queries/<name>.sql), parses its rows by column name, builds its part of the point-in-time view
// and owns its metric descriptors. On each new connection the poller prepares every collector's
// Prepared() statements. A poll:
//   1. Plan():     every collector adds its statements to the poll's one StatementBatch;
//   2. Parse():    after the single round trip, each reads its own results into PollData;
//   3. Collect():  collectors with round trips of their own (lease tables, poolers) run them;
//   4. BuildView(): each fills its part of the TargetView from the (complete) PollData;
//   5. ExposeView()/ExposeCounters(): on each scrape, its series from the latest snapshot.
// Batch statements must succeed (their failure fails the poll); an optional collector's own
// failure is its own (`pglock_collector_up 0`) and never fails the poll.
// What only one collector parses, builds and exposes goes into PollData::parts / TargetView::parts
// under a type declared in its own header (snapshot/collector_parts.h): adding such a signal edits
// no shared struct. Collectors are stateless and shared by every target and thread; per-target
// state lives in a CollectorState owned by that target's poller thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/metrics/families.h"
#include "exporter/pg/batch.h"
#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/util/status.h"

namespace pglock {

// What decides a collector's statements for one poll.
// The settings as last read on a connection, with its session's pg_conf_load_time() then.
struct SettingsRead {
  std::vector<ServerSetting> settings;
  int64_t loaded_us = 0;
};

struct PollPlan {
  int server_version_num = 0;
  bool inventory = true;    // read every advisory lock (else only waiters': the tiered poll)
  bool query_text = false;  // web.show_query_text: read the sessions' query texts
  // The target has a row_lock table: the inventory also reads the granted transactionid locks.
  bool row_locks = false;
  // The settings of the last good poll on this connection, null on a new one: the settings
  // statement reads them again only after a reload, and the poll takes them from here otherwise.
  const SettingsRead* settings_read = nullptr;
  // An inventory's baseline for its quiet holders (queries/advisory_locks_quiet.sql): the last
  // inventory, whose sessions idle across its read of pg_locks and still idle in the same spell
  // hold the same locks now. Null: every holder is read (InventoryTier::QuietBaseline).
  const PollData* quiet_baseline = nullptr;
};

// Per-target state a collector keeps between polls (e.g. a pooler's admin connections). Owned
// by the poller thread.
class CollectorState {
 public:
  virtual ~CollectorState() = default;
};

// What a collector with its own round trips gets. Valid for one poll.
struct PollContext {
  PgConnection* conn = nullptr;  // the target's connection (the batch already succeeded on it)
  const TargetConfig* target = nullptr;
  const PollConfig* poll = nullptr;
  QueryTimeouts timeouts;
  SteadyClock::time_point deadline;
  const std::atomic<bool>* abort = nullptr;
};

class Collector {
 public:
  virtual ~Collector() = default;

  // The `collector` label of pglock_collector_up / pglock_collector_duration_seconds.
  virtual const char* name() const = 0;

  // Statements to prepare once per connection (names prefixed "pglock_"), which Plan() runs with
  // StatementBatch::AddExecute: a statement that every poll sends is then planned once.
  virtual std::vector<PreparedStatement> Prepared(int /*server_version_num*/) const { return {}; }
  // Statements for the poll's batch.
  virtual void Plan(const PollPlan& /*plan*/, StatementBatch* /*batch*/) const {}
  // Reads this collector's results. kUnexpectedShape when a column the SQL promises is missing.
  virtual Status Parse(const PollPlan& /*plan*/, const BatchResults& /*results*/,
                       PollData* /*data*/) const {
    return Status::Ok();
  }

  virtual std::unique_ptr<CollectorState> NewState() const { return nullptr; }
  // Round trips of its own, after the batch. Its failures go into *data (the collector is then
  // down); the returned Status is not ok only when the target's connection was lost.
  virtual Status Collect(const PollContext& /*ctx*/, CollectorState* /*state*/,
                         PollData* /*data*/) const {
    return Status::Ok();
  }
  // False when the last Collect() of this collector failed in `data`.
  virtual bool Healthy(const PollData& /*data*/) const { return true; }

  virtual void BuildView(const PollData& /*data*/, const ViewContext& /*ctx*/,
                         TargetView* /*view*/) const {}

  // Series of a target whose last poll succeeded.
  virtual void ExposeView(const TargetSnapshot& /*snap*/, const TargetView& /*view*/,
                          Families* /*out*/) const {}
  // Cumulative counters: exposed whether or not the last poll succeeded.
  virtual void ExposeCounters(const TargetSnapshot& /*snap*/, Families* /*out*/) const {}
};

}  // namespace pglock

// Registers a collector: one line of its .cc, at the start of the line, inside namespace pglock:
//   PGLOCK_REGISTER_COLLECTOR(LeasesCollector, 90);
// The build lists every such line (cmake/collector_list.cmake) and the registry runs the
// collectors by ascending `order` (registry.cc says which orders matter and why). The instance is
// made on first use, whatever the order of static initialisation.
#define PGLOCK_REGISTER_COLLECTOR(Class, order) \
  const Collector& Registered##Class() {        \
    static const Class instance;                \
    return instance;                            \
  }                                             \
  static_assert((order) > 0, "a collector's order is positive")
