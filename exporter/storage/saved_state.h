// What a target's poller keeps across a restart of the exporter ([storage] path, docs/restarts.md):
// the last inventory's holds and sessions, when each hold was first seen, the counters, the event
// log, where the server-log reader was, the session locks proven on pooled connections, the
// blocking episodes in progress, the lease tables' last reads and the timeline; and the server it
// was all read from. The next start judges its first poll against it as against any
// earlier poll (docs/restarts.md). Encoding and decoding are pure; DecodeSavedTarget takes any
// bytes (a torn, truncated, corrupt or foreign file) and answers an error, never a crash and never
// a partial state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/events/blocking_episodes.h"
#include "exporter/events/event_log.h"
#include "exporter/events/lease_transitions.h"
#include "exporter/events/pooled_locks.h"
#include "exporter/events/timeline.h"
#include "exporter/serverlog/log_follower.h"
#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/util/status.h"

namespace pglock {

// Bumped when the layout changes: a file of another version is ignored (a fresh start).
inline constexpr int kSavedStateVersion = 1;
// A file larger than this is not read (at 100k held locks a state file is about 12 MB).
inline constexpr size_t kMaxSavedStateBytes = 64u << 20;
// The timeline is written last, within this many bytes and the room the rest left under
// kMaxSavedStateBytes: past them its oldest closed intervals, then its oldest markers, are left
// out (counted as dropped), and the timeline as a whole when even its open intervals do not fit.
// Names of ordinary length take a few MB at the timeline's bounds (docs/restarts.md).
inline constexpr size_t kMaxSavedTimelineBytes = 16u << 20;

// Where the server-log reader was, and until when its lock records were judged.
struct SavedLogPosition {
  LogPosition at;
  double records_taken_until = 0;  // wall clock (epoch seconds)
};

// The target's events live beside its state file, in an events journal (docs/restarts.md): one
// event a line, oldest first, appended as events happen and rewritten whole, under the next
// generation's name, once it holds about twice what the log keeps; so a write costs the events
// added since the last, not the events kept. The state file names the generation and how many of
// its lines the state covers: lines past them (appended before a crash stopped the state's write)
// are not read.
struct SavedJournal {
  uint64_t generation = 0;
  uint64_t lines = 0;
};

struct SavedTarget {
  std::string target;
  // The server's system identifier and port ("" when unknown): a file of another server is not
  // applied. A restart of the same server (another postmaster start) is judged, not refused.
  std::string server;
  double saved_at = 0;  // the exporter's wall clock when written
  // The last inventory poll (only what the judgement of holds reads: sessions, advisory locks,
  // session end counters, timeouts, the server's start and clock).
  std::shared_ptr<const PollData> inventory;
  std::vector<HoldHistory::Entry> first_seen;
  Counters counters;
  // Files written before the journal keep the events here; a file with a journal keeps none here.
  std::vector<Event> events;
  std::optional<SavedJournal> journal;
  std::optional<SavedLogPosition> log;
  // Session locks on pooled server connections, with what proved them (absent in older files).
  std::vector<PooledLock> pooled;
  // Absent from files written before they were kept (nullopt: they start afresh, as then).
  std::optional<EpisodeTrackerSaved> episodes;
  std::optional<LeaseTransitions::Saved> leases;
  std::optional<TimelineSaved> timeline;
  // The timeline's closed intervals are in a journal of their own, as the events (then
  // timeline->closed is empty in the file); absent: they are in the timeline section.
  std::optional<SavedJournal> timeline_journal;
  // Its markers too, in the order they were added (then timeline->markers is empty in the file).
  std::optional<SavedJournal> marker_journal;
};

std::string EncodeSavedTarget(const SavedTarget& state);
// Fills *out from `bytes`; on any error *out is left empty and the status says what was wrong.
Status DecodeSavedTarget(std::string_view bytes, SavedTarget* out);

// The journal is written whole again, instead of appended to, once it would hold more than twice
// the events the log keeps and kJournalSlackLines: each event is encoded about twice in all,
// whatever the history kept, and a journal holds at most about twice what it restores.
inline constexpr uint64_t kJournalSlackLines = 256;
// A journal larger than this is not read (what it keeps is lost, the rest of the state is not): at
// the default event_log_size a full events journal is about 7 MB.
inline constexpr size_t kMaxJournalBytes = 256u << 20;
inline bool JournalWantsRewrite(uint64_t lines, uint64_t added, uint64_t kept) {
  return lines + added > 2 * kept + kJournalSlackLines;
}

// The journal's lines for `events`, each a JSON object ending in '\n'.
std::string EncodeEventLines(std::span<const std::shared_ptr<const Event>> events);

// What a journal's first lines hold.
struct JournalRead {
  std::vector<Event> events;  // oldest first
  uint64_t lines = 0;         // lines read (at most the `lines` asked for)
  // Lines that did not decode, each skipped (the rest kept), and the first one's error.
  uint64_t damaged = 0;
  std::string first_damage;
};
// Reads the first `lines` lines of `bytes` (fewer when it holds fewer). Takes any bytes.
JournalRead DecodeEventLines(std::string_view bytes, uint64_t lines);
// The same, each event handed to `each` as it is read (JournalRead::events stays empty): the
// journal's events need not sit in one vector beside where they go.
JournalRead DecodeEventLines(std::string_view bytes, uint64_t lines,
                             const std::function<void(Event&& event)>& each);

// The same for the timeline's closed intervals, each line naming its row; an interval without a
// row is not written. `*written`, where given, is the number of lines.
std::string EncodeIntervalLines(const std::vector<TimelineInterval>& intervals,
                                size_t* written = nullptr);
struct IntervalJournalRead {
  std::vector<TimelineInterval> intervals;  // oldest first
  uint64_t lines = 0;
  uint64_t damaged = 0;
  std::string first_damage;
};
IntervalJournalRead DecodeIntervalLines(std::string_view bytes, uint64_t lines);

// The same for the timeline's markers, each line naming its row.
std::string EncodeMarkerLines(const std::vector<TimelineMarker>& markers,
                              size_t* written = nullptr);
struct MarkerJournalRead {
  std::vector<TimelineMarker> markers;  // in the order they were added
  uint64_t lines = 0;
  uint64_t damaged = 0;
  std::string first_damage;
};
MarkerJournalRead DecodeMarkerLines(std::string_view bytes, uint64_t lines);

}  // namespace pglock
