// Lease transitions: a state machine per (lease table, lease name), judged at every good read of
// the table against the last good one, by the database's own timestamps.
//
//   (no row) --new row--> held --expires_at moved, same holder--> held (renewed)
//      ^                   |  \--expiry moved to the past----> given back --+
//      |                   |                                               |
//      +----row gone-------+ (released)        another holder -------------+--> held (handover)
//                          |
//                          +--another holder, taken after the old expiry----> held
//                          (expired_takeover)
//                          +--another holder, edited in place, still valid--> held (overlap)
//                          +--another holder, new taken_at, still valid-----> pending change
//   pending change --the table's write counters show a give-back----------> held (handover)
//                  --no give-back after kLeaseWritesDelaySeconds----------> held (overlap)
//
// Proof of an overlap (mutual exclusion broken), the only transition that must never come from
// normal operation: a new holder while the old lease was valid and not given back. "Not given
// back" needs evidence: either the row was edited in place (taken_at unchanged, which a take
// writes), or the table's write counters (pg_stat_all_tables n_tup_del / n_tup_upd) show no
// delete and no expiry update since the last read that nothing seen since accounts for, once
// their flush delay has passed. Without counters on both sides, or across a counter reset, a
// change is a hand-over: the judgement errs toward not paging. Thread-compatible: owned by one
// poller's EventTracker.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// Distinct lease names per table that get their own transition counters; the rest count as
// lease="other", so tables with per-job lease names cannot grow the counters without bound.
inline constexpr size_t kMaxLeaseCounterNames = 1'000;
// Lease tables with at most this many rows get their transition counters created at 0, and no
// table gets more than this many names seeded over the exporter's life: a job queue's ever-new
// ids get their counters when something is counted for them (kMaxLeaseCounterNames, then
// "other"), never one set of zeros per id seen.
inline constexpr size_t kMaxSeededLeases = 100;
// A table whose `queue` the config leaves unset is a queue once this many names appeared in it
// after its first read while at most kQueueDetectReturns percent of them were names it had shown
// before (a job id is seen once; a lease name comes back). Then its per-name counters become the
// table's (Counters::lease_transitions under lease "").
inline constexpr uint64_t kQueueDetectNames = 200;
inline constexpr uint64_t kQueueDetectReturns = 5;
// How long a lease that changed holder while valid waits for its table's write counters to show
// that it was given back before it counts as an overlap. PostgreSQL 15+ backends flush their
// counters at transaction end at most once a second (PGSTAT_MIN_INTERVAL) and, when that defers
// them, at the latest 10 s after going idle (PGSTAT_IDLE_INTERVAL); 2 s of margin.
inline constexpr double kLeaseWritesDelaySeconds = 12.0;

// The states of a lease row of the diagram above that a read leaves it in ("no row" has no entry;
// a pending change is a PendingHolderChange until its evidence comes).
enum class LeaseState {
  kHeld,       // held by its holder as the last read showed it
  kGivenBack,  // its holder moved its expiry to the past: the next holder is a hand-over
};

class LeaseTransitions {
 public:
  // Counts the transitions between the last good read of each lease table and its read in `cur`
  // into *counters; each but a renewal is also appended to *events (may be null). A table whose
  // read failed keeps its last good read.
  void Observe(const PollData& cur, Counters* counters, std::vector<Event>* events);
  // Creates the transition counters of the leases of small tables at 0.
  void SeedZeroCounters(const PollData& cur, Counters* counters);
  // The tables found to be queues by their names (kQueueDetectNames), by table label.
  const std::set<std::string>& detected_queues() const { return detected_; }

  // The state kept per table (plain data; the judgement's file-local helpers read it).
  // What the last good read of a lease table showed, and the evidence kept for the holder changes
  // still waiting for it.
  struct LeaseSeen {
    LeaseRow row;
    LeaseState state = LeaseState::kHeld;
    // LeaseTableState::reads at the read that showed it last: never more than reads (neither is
    // in the state file, where both start at 0 again).
    uint64_t read = 0;
  };
  // The table's write counters at one good read, and the writes that what that read showed
  // accounts for (releases, renewals, and the give-backs claimed by hand-overs).
  struct LeaseWriteMark {
    uint64_t seq = 0;
    double now = 0;
    std::optional<TableWrites> writes;
    TableWrites explained;
  };
  // A lease whose holder changed while valid, with a new taken_at (it was taken, not edited in
  // place): a hand-over when the counters show a give-back, an overlap when they still do not
  // after kLeaseWritesDelaySeconds.
  struct PendingHolderChange {
    std::string lease;
    uint64_t base_seq = 0;  // the read before the change
    uint64_t seen_seq = 0;  // the read that showed it
    std::string previous_holder;
    std::string current_holder;
  };
  struct LeaseTableState {
    std::map<std::string, LeaseSeen> leases;  // by name
    bool complete = false;                    // not capped by max_leases
    uint64_t next_seq = 0;
    uint64_t reads = 0;                // good reads taken by this process (not in the state file)
    std::deque<LeaseWriteMark> marks;  // oldest first; back() is the last good read
    std::vector<PendingHolderChange> pending;  // oldest first
    bool queue = false;  // a table of work: transitions count per table (LeaseTableData::queue)
    // Queue detection while undecided: names that left, names that appeared new or returned.
    bool detecting = true;
    std::set<std::string> gone;
    uint64_t new_names = 0;
    uint64_t returned = 0;
  };

  // What a restart keeps (exporter/storage/saved_state.h writes it): each table's last good read
  // and its evidence, the tables found to be queues and the names given zero counters. Put back
  // at a start, the first read after it is judged against the last read before the stop as any
  // read against the one before: a lease still held by the same holder is no transition; one
  // that changed holder in the gap is a hand-over, expired takeover or overlap by the rules above
  // (the table's write counters, kept by the server across the exporter's restart, say whether
  // it was given back; a counter reset, or none, is a hand-over).
  struct Saved {
    std::map<std::string, LeaseTableState> tables;
    std::set<std::string> detected;
    std::map<std::string, size_t> seeded_names;
  };
  Saved Save() const { return {tables_, detected_, seeded_names_}; }
  const std::map<std::string, LeaseTableState>& tables() const { return tables_; }
  void Restore(Saved saved) {
    tables_ = std::move(saved.tables);
    detected_ = std::move(saved.detected);
    seeded_names_ = std::move(saved.seeded_names);
  }

 private:
  // Compares one table's rows with its last good read; adds what they explain to *mark.
  // `sessions_now` name the sessions of row_lock holders in the events.
  void CompareLeaseRows(const LeaseTableData& t, const std::vector<Session>& sessions_now,
                        LeaseTableState* st, LeaseWriteMark* mark, Counters* counters,
                        std::vector<Event>* events);
  // Judges the pending holder changes against the counters of the read just added to st->marks.
  void ResolveHolderChanges(const std::string& table, LeaseTableState* st, Counters* counters,
                            std::vector<Event>* events);

  // Counts the names that appear in `t` since the last read (st->leases) and decides whether the
  // table is a queue; when it is, moves its per-name counters to the table's.
  void DetectQueue(const LeaseTableData& t, LeaseTableState* st, Counters* counters);

  std::map<std::string, LeaseTableState> tables_;  // by table
  std::set<std::string> detected_;
  std::map<std::string, size_t> seeded_names_;  // by table: names given zero counters
};

}  // namespace pglock
