// The recent history of a target, for the timeline on /locks and GET /api/v1/timeline: who held
// what and who waited, compressed from polls into intervals, and the events the poller records
// as markers on the same rows.
//
//   poll ──Observe()──> open intervals (one per row and holder, or per row, holder and waiter;
//                        extended to each poll's now() while the poll still sees them)
//                          │ not seen by a good poll
//                          v
//                       closed intervals (ordered by end; the oldest dropped first)
//   events ──AddMarkers()──> markers, one ring per event kind (the oldest of a kind dropped first)
//
// Rows: an advisory lock (database, name or key), a lease (table, lease; its holders, and the
// time a holder's row sat expired with a lease_expiry marker), a row-lock table (its
// row-lock holders, the lease in the holder's text), a blocking root (database, pid), and the
// deadlocks of a database. A wait is drawn under the holder it waited on (`blocker_pid`).
//
// Memory is bounded by counts: at most kOpenIntervals open intervals (holders past that, at one
// poll, are not drawn; the latest poll's are counted), kClosedIntervals closed ones and
// kMarkersPerKind markers of each event kind, each text at most kTimelineTextBytes. What is
// dropped is counted and shown. Besides, the latest poll's granted locks as (key, pid), 20 bytes
// a lock, to tell a poll that saw the same ones (its capacity follows the load down).
//
// Times are the database server's clock (PollData::now, Event::time). A failed poll leaves the
// open intervals as they were; the next good poll extends those it still sees across the gap.
//
// A restart of the exporter ([storage] path, docs/restarts.md) keeps the history: Save() before
// the stop, Restore() at the start. The first poll after it records the exporter's gap (shown
// on the page), closes the open intervals of sessions it no longer sees (by pid and backend
// start: a reused pid is not the same holder) at their last sighting before the stop, and
// extends the others across the gap as it would across failed polls.
//
// Thread-safe: the poller calls Observe() and AddMarkers(); HTTP threads call Query() through
// the snapshot, which shares the live object (the page shows the history up to the latest poll).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exporter/events/event_names.h"
#include "exporter/snapshot/lock_names.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/poll_index.h"
#include "exporter/snapshot/session_end.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/util/shared_text.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

struct Event;  // exporter/events/event_log.h

inline constexpr size_t kOpenIntervals = 5000;
// Of those, kept for waits and root blockers: held locks and lease rows never take them.
inline constexpr size_t kOpenReserved = 1000;
inline constexpr size_t kClosedIntervals = 20000;
inline constexpr size_t kMarkersPerKind = 300;
// Bytes kept of each name, holder text and application name (longer ones are cut, with "…").
inline constexpr size_t kTimelineTextBytes = 128;
// A lease table that polls cannot read keeps its leases' intervals open (not extended) this long
// from its first failed read, then closes them: a table that stays unreadable holds no open slot.
inline constexpr double kUnreadLeaseTableSeconds = 60;
// The exporter's own gaps (from a stop to the next start's first poll) kept, the newest.
inline constexpr size_t kTimelineGaps = 16;

enum class TimelineRowKind { kLock, kLease, kRowLocks, kRoot, kDeadlocks };

// "lock", "lease", "row_locks", "root", "deadlocks".
const char* TimelineRowKindLabel(TimelineRowKind k);

struct TimelineRow {
  TimelineRowKind kind = TimelineRowKind::kLock;
  std::string scope;  // the database; a lease's or a row-lock table's table
  std::string name;   // lock name or key, lease, "pid 123" for a root; "" for the others
  auto Tie() const { return std::tie(kind, scope, name); }
  bool operator<(const TimelineRow& o) const { return Tie() < o.Tie(); }
};

// Its members are ordered for size (64 bytes; a timeline keeps tens of thousands).
struct TimelineInterval {
  std::shared_ptr<const TimelineRow> row;
  double start = 0;
  double end = 0;       // the last poll that saw it
  SharedText who;       // application_name, or a lease's holder text
  SharedText detail;    // a row-lock holder's lease; a wait's lock type and mode
  int pid = 0;          // the holder (0: a lease holder without a session), or the waiter
  int blocker_pid = 0;  // waits: the holder waited on
  bool wait = false;
  bool open = false;
  bool expired = false;  // a lease row still naming its holder after its expiry
};

// What a marker marks: an event, a blocking episode's start or end (two markers of the one
// event), or a lease's expiry (no event: from the lease table, its expires_at, when the first
// poll saw the row expired).
enum class MarkerMoment : uint8_t { kEvent, kEpisodeStart, kEpisodeEnd, kLeaseExpiry };

struct TimelineMarker {
  std::shared_ptr<const TimelineRow> row;
  double time = 0;
  MarkerMoment moment = MarkerMoment::kEvent;
  // The recorded event it was taken from (none for a lease's expiry): its kind, which is the
  // marker's for kEvent, and its time (blocking episodes: the end) and the pids, which find it in
  // the event log.
  std::optional<EventKind> event_kind;
  double event_time = 0;
  EventCause cause = EventCause::kNone;
  EndEvidence evidence = EndEvidence::kNone;
  EventOutcome outcome = EventOutcome::kNone;
  double duration = 0;
  int64_t count = 1;
  int previous_pid = 0;
  SharedText previous;  // application_name, or the holder text
  int current_pid = 0;
  SharedText current;
  // Its number in the order the timeline took its markers (the markers journal's): set by it.
  uint64_t seq = 0;
};

// A marker's kind as the page, the JSON and the saved state write it: its event's kind, or
// "blocking_episode_start", "blocking_episode_end", "lease_expiry" ("" for an event marker
// without its event).
const char* MarkerKindName(const TimelineMarker& m);
// The marker an event kind's name or one of those words makes (kind and event): its moment, and
// its event kind for kEvent; nullopt for a word that is neither.
std::optional<std::pair<MarkerMoment, std::optional<EventKind>>> MarkerKindNamed(
    std::string_view name);
// Markers of one kind share a ring (kMarkersPerKind): the moment and the event kind.
inline auto MarkerKindKey(const TimelineMarker& m) {
  return std::make_pair(m.moment, m.event_kind);
}
// True for the markers that need a look (a loss, a takeover, an expiry, an overlap, an
// inheritance, a deadlock, a lock timeout): their rows come first.
bool TimelineAlarming(const TimelineMarker& m);

// One row of a window: its intervals and markers, in time order.
struct TimelineRowWindow {
  std::shared_ptr<const TimelineRow> row;
  std::vector<TimelineInterval> holds;
  std::vector<TimelineInterval> waits;
  std::vector<TimelineMarker> markers;
  int attention = 0;  // 2: a loss, takeover, expiry, inheritance, deadlock or timeout; 1: waits
  double last = 0;    // the latest time anything happened on it
};

// The exporter was not running from `from` (its last poll before a stop) to `to` (the first poll
// after the start): nothing was observed then.
struct TimelineGap {
  double from = 0;
  double to = 0;
};

struct TimelineWindow {
  double now = 0;         // the latest poll's now(); 0 before the first
  double from = 0;        // now - the window asked for, never before kept_since
  double kept_since = 0;  // the oldest time still kept (0: nothing kept)
  uint64_t dropped_intervals = 0;
  // Holders and waits the latest poll saw that got no interval: kOpenIntervals were open.
  uint64_t untracked = 0;
  uint64_t dropped_markers = 0;
  std::vector<TimelineGap> gaps;        // of the exporter, overlapping the window, oldest first
  std::vector<TimelineRowWindow> rows;  // what needs attention first
};

// An open interval as a restart keeps it: the interval and what the poller follows it by.
struct TimelineSavedOpen {
  TimelineRowKind key_kind = TimelineRowKind::kLock;
  uint32_t datid = 0, classid = 0, objid = 0;
  int objsubid = 0;
  int pid = 0;
  bool wait = false;
  std::string text;
  // The backend start of the session `pid` when the interval opened (0: not a client session's,
  // or none was listed): after a restart the interval goes on only under the same session.
  double backend_start = 0;
  TimelineInterval interval;
};

// What a restart keeps of a timeline (plain data; exporter/storage/saved_state.h writes it).
struct TimelineSaved {
  double now = 0;
  double first_poll = 0;
  uint64_t dropped_intervals = 0;
  uint64_t dropped_markers = 0;
  std::vector<TimelineGap> gaps;         // oldest first
  std::vector<TimelineSavedOpen> open;   // at most kOpenIntervals
  std::vector<TimelineInterval> closed;  // oldest first, at most kClosedIntervals
  std::vector<TimelineMarker> markers;   // oldest first within each kind
};

class Timeline {
 public:
  Timeline() = default;
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A good poll: its advisory holders (every granted lock in `data`, the inventory tier's for a
  // tiered poll) and lease rows (`data`, with the table's own times), its advisory waits, blocking
  // roots and row-lock holders (`view`). `names` names configured keys (may be null).
  void Observe(const PollData& data, const TargetView& view, const LockNames* names) EXCLUDES(mu_);
  // The events the poller records, before coalescing (one marker per lock). Lock releases are
  // left out: a holder's bar ends there.
  void AddMarkers(const std::vector<Event>& events) EXCLUDES(mu_);

  // What overlaps the last `seconds` before the latest poll (a copy).
  TimelineWindow Query(double seconds) const EXCLUDES(mu_);

  // A copy of the history for the state file; Restore() on a fresh timeline puts it back (the
  // bounds enforced again: what is past them is dropped and counted). The next Observe() judges
  // its open intervals against that poll's sessions and records the gap.
  // `with_closed` false: without the closed intervals (they are kept in a journal of their own,
  // ClosedSince); `with_markers` false: without the markers (MarkersSince).
  TimelineSaved Save(bool with_closed = true, bool with_markers = true) const EXCLUDES(mu_);
  // The kept closed intervals closed (or restored) at or after number `from`, oldest first, and in
  // *next the number the next one will have: from 0, all that are kept. Costs the ones returned.
  // At most `max` of them: *next is then the number after the last one returned.
  std::vector<TimelineInterval> ClosedSince(uint64_t from, uint64_t* next,
                                            size_t max = SIZE_MAX) const EXCLUDES(mu_);
  size_t closed_count() const EXCLUDES(mu_);
  // The same for the markers: those kept that were taken (or restored) at or after number
  // `from`, in the order taken, at most `max`; *next the number after the last one returned.
  // Costs a look at every kept marker (a few thousand at most) and a copy of those returned.
  std::vector<TimelineMarker> MarkersSince(uint64_t from, uint64_t* next,
                                           size_t max = SIZE_MAX) const EXCLUDES(mu_);
  void Restore(const TimelineSaved& saved) EXCLUDES(mu_);
  // Moves with every interval opened or closed, marker added and gap recorded (not with an open
  // interval extended): whether a write of the state has something new to keep.
  uint64_t changes() const EXCLUDES(mu_);

  // Approximate heap bytes held (the measured bound of the tests).
  size_t ApproxBytes() const EXCLUDES(mu_);
  size_t intervals() const EXCLUDES(mu_);
  size_t markers() const EXCLUDES(mu_);

 private:
  struct OpenKey {
    TimelineRowKind kind;
    uint32_t datid, classid, objid;
    int objsubid;
    int pid;
    bool wait;
    std::string text;  // what else tells the row and holder apart (leases, roots, waits)
    bool operator==(const OpenKey& o) const;
  };
  struct OpenKeyHash {
    size_t operator()(const OpenKey& k) const;
  };
  struct Open {
    TimelineInterval interval;
    uint64_t seen = 0;         // the poll that last saw it
    uint64_t opened = 0;       // the poll that opened it
    double backend_start = 0;  // of the session `pid` when it opened (TimelineSavedOpen)
  };

  // REQUIRES: mu_ held.
  std::shared_ptr<const TimelineRow> Row(TimelineRowKind kind, std::string scope, std::string name)
      REQUIRES(mu_);
  // Sets probe_ to the key of a text-keyed row (leases, row locks, roots, waits) with an empty
  // text for the caller to write. Its buffer is kept, so a row seen again, as most are at most
  // polls, costs no allocation.
  OpenKey& Probe(TimelineRowKind kind, int pid, bool wait) REQUIRES(mu_);
  // The key of a lease row's interval (`expired`: its interval past the expiry) in probe_.
  const OpenKey& LeaseKey(const LeaseTableData& t, const LeaseRow& row, bool expired) REQUIRES(mu_);
  // Extends the open interval of `key` to `now` and returns null; or opens one from `now` and
  // returns it for the caller to fill (null too when kOpenIntervals are open: counted untracked).
  // The opened one gets the backend start of `key.pid`'s session in `data`.
  TimelineInterval* See(const OpenKey& key, double now, const PollData& data) REQUIRES(mu_);
  void CloseUnseen() REQUIRES(mu_);
  // Closes `it` at its end; returns the next.
  std::unordered_map<OpenKey, Open, OpenKeyHash>::iterator Close(
      std::unordered_map<OpenKey, Open, OpenKeyHash>::iterator it) REQUIRES(mu_);
  // The first poll after Restore(): the gap, and the restored intervals of sessions `data` no
  // longer lists closed.
  void ResumeAfterRestore(const PollData& data) REQUIRES(mu_);
  // The lazily built index of the poll being observed (reset by each Observe()).
  const PollIndex& Index(const PollData& data) REQUIRES(mu_);
  void ObserveLocks(const PollData& data, const LockNames* names) REQUIRES(mu_);
  // Whether `data` has the very granted locks (key and pid, in order) of the poll before.
  bool SameLocksAsLastPoll(const PollData& data) const REQUIRES(mu_);
  // An open interval's last poll and end, held-lock intervals counting the polls that saw the
  // locks of the poll before (locks_seen_, locks_end_).
  static bool IsHeldLock(const OpenKey& key);
  uint64_t SeenAt(const OpenKey& key, const Open& o) const REQUIRES(mu_);
  // Marks `o` seen by this poll, counting it in seen_now_ the first time.
  void MarkSeen(const OpenKey& key, Open* o) REQUIRES(mu_);
  double EndOf(const OpenKey& key, const Open& o) const REQUIRES(mu_);
  void ObserveWaits(const PollData& data, const TargetView& view) REQUIRES(mu_);
  void ObserveLeases(const PollData& data, const TargetView& view) REQUIRES(mu_);
  // A lease row still naming its holder past its expiry: an interval from the expiry on, and a
  // lease_expiry marker when first seen.
  void ObserveExpired(const PollData& data, const LeaseTableData& t, const LeaseRow& row)
      REQUIRES(mu_);
  void AddMarker(TimelineMarker m) REQUIRES(mu_);
  // A saved interval as Restore() keeps it.
  TimelineInterval Restored(const TimelineInterval& saved) REQUIRES(mu_);

  mutable Mutex mu_;
  double now_ GUARDED_BY(mu_) = 0;
  double first_poll_ GUARDED_BY(mu_) = 0;
  uint64_t poll_ GUARDED_BY(mu_) = 0;
  std::unordered_map<OpenKey, Open, OpenKeyHash> open_ GUARDED_BY(mu_);
  OpenKey probe_ GUARDED_BY(mu_){TimelineRowKind::kLease, 0, 0, 0, 0, 0, false, {}};
  std::deque<TimelineInterval> closed_ GUARDED_BY(mu_);  // by end, oldest first
  std::map<std::pair<MarkerMoment, std::optional<EventKind>>, std::deque<TimelineMarker>> markers_
      GUARDED_BY(mu_);  // by MarkerKindKey
  // Rows interned: intervals and markers share them; entries nobody holds are swept.
  std::map<TimelineRow, std::weak_ptr<const TimelineRow>> rows_ GUARDED_BY(mu_);
  size_t rows_sweep_at_ GUARDED_BY(mu_) = 1024;
  uint64_t dropped_intervals_ GUARDED_BY(mu_) = 0;
  uint64_t untracked_ GUARDED_BY(mu_) = 0;  // at the latest poll, past kOpenIntervals
  // The latest poll's granted locks (key, pid) in its order, and how many of them got no
  // interval: a poll that sees the same extends their intervals without a lookup per lock.
  std::vector<std::pair<AdvisoryKey, int>> last_locks_ GUARDED_BY(mu_);
  uint64_t last_locks_untracked_ GUARDED_BY(mu_) = 0;
  // The latest poll that saw the very locks of the poll before, and its now(): it saw every
  // held-lock interval open at the time, which is recorded here once instead of in each.
  uint64_t locks_seen_ GUARDED_BY(mu_) = 0;
  double locks_end_ GUARDED_BY(mu_) = 0;
  size_t open_held_locks_ GUARDED_BY(mu_) = 0;  // of open_
  // Open intervals seen by the current poll: when all are, CloseUnseen() visits none.
  size_t seen_now_ GUARDED_BY(mu_) = 0;
  // Lease tables whose last read failed: since when (the poll of the first failed read).
  std::map<std::string, double> unread_since_ GUARDED_BY(mu_);
  uint64_t dropped_markers_ GUARDED_BY(mu_) = 0;
  uint64_t markers_total_ GUARDED_BY(mu_) = 0;  // markers ever taken: the next one's seq
  // The index of the poll being observed: its own, or one built into built_index_.
  const PollIndex* index_ GUARDED_BY(mu_) = nullptr;
  std::optional<PollIndex> built_index_ GUARDED_BY(mu_);
  std::deque<TimelineGap> gaps_ GUARDED_BY(mu_);  // oldest first
  bool restored_ GUARDED_BY(mu_) = false;         // until the first Observe() after Restore()
  uint64_t changes_ GUARDED_BY(mu_) = 0;
  uint64_t closed_total_ GUARDED_BY(mu_) = 0;  // intervals ever put in closed_
};

}  // namespace pglock
