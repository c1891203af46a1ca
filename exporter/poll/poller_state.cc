// The poller's side of [storage] (exporter/storage/): what it keeps across a restart and how the
// first poll after a start picks it up (docs/restarts.md).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <span>
#include <tuple>
#include <type_traits>

#include "exporter/events/event_names.h"  // IsLeaseEvent
#include "exporter/events/judge.h"
#include "exporter/poll/poller.h"
#include "exporter/storage/state_store.h"

namespace pglock {
namespace {

// The state is written at most this often (and at Stop()); when nothing it keeps changed (the
// holds, the counters, the events), only this often, so the log position and the sessions stay
// recent: a steady 20k locks cost one write a minute, not twelve (docs/restarts.md).
constexpr auto kStateWriteInterval = std::chrono::seconds(5);
constexpr auto kUnchangedStateWriteInterval = std::chrono::seconds(60);
// A journal is encoded this many items at a time: written whole, it never sits whole in memory.
constexpr size_t kJournalPartItems = 500;
// Events of sessions gone in the gap are stamped for at most this many polls after the first:
// a hold waiting for the log's word ends within a few.
constexpr int kGapPolls = 30;

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// FNV-1a over what a write keeps that changes with what happens: the holds (who holds which key
// since when), the counters, the event log (its length and newest event), the log's file, the
// blocking episodes in progress, the lease tables' last reads and the timeline's intervals and
// markers (not an open interval growing, nor an episode's longest wait: the next write keeps
// them, and the one at SIGTERM keeps them exact).
class Fingerprint {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 1099511628211ull;
  }
  template <typename T>
  void Value(const T& v) {
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, SharedText>) {
      Add(v.data(), v.size());
      Add("", 1);
    } else {
      static_assert(std::is_arithmetic_v<T>);
      Add(&v, sizeof v);
    }
  }
  template <typename K>
  void Map(const std::map<K, double>& m) {
    Value(m.size());
    for (const auto& [k, v] : m) {
      if constexpr (std::is_same_v<K, std::string>) {
        Value(k);
      } else {
        std::apply([&](const auto&... part) { (Value(part), ...); }, k);
      }
      Value(v);
    }
  }
  void Histogram(const CountHistogram& h) {
    for (double c : h.counts) Value(c);
    Value(h.count);
    Value(h.sum);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

uint64_t FingerprintOf(const HoldHistory& history, const Counters& c, const EventList* events,
                       const std::optional<LogPosition>& log, const PooledLockTracker& pooled,
                       const EpisodeTrackerSaved& episodes,
                       const std::map<std::string, LeaseTransitions::LeaseTableState>& lease_tables,
                       uint64_t timeline_changes) {
  Fingerprint f;
  f.Value(timeline_changes);
  for (const SavedEpisode& e : episodes.episodes) {
    f.Value(e.pid);
    f.Value(e.backend_start);
    f.Value(e.gid);
    f.Value(static_cast<int>(e.episode.state));
    f.Value(e.episode.peak_blocked);
  }
  for (const auto& [table, st] : lease_tables) {
    f.Value(table);
    for (const auto& [name, seen] : st.leases) {
      f.Value(name);
      f.Value(seen.row.holder);
      f.Value(seen.row.expires_at);
      f.Value(seen.row.taken_at);
      f.Value(static_cast<int>(seen.state));
    }
    f.Value(st.pending.size());
  }
  // A pooled lock proven session-scoped is worth a write: a restart need not prove it again.
  for (const PooledLock* l : pooled.Locks()) {
    f.Value(l->pid);
    f.Value(l->key.objid);
    f.Value(static_cast<int>(l->state));
  }
  // The log's file, not the offset within it: a first position, or a rotation, is a change.
  f.Value(log ? log->file : std::string("-"));
  for (const HoldHistory::Entry& e : history.first_seen) {
    f.Value(e.pid);
    f.Value(e.backend_start);
    f.Value(e.key.datid);
    f.Value(e.key.classid);
    f.Value(e.key.objid);
    f.Value(e.key.objsubid);
  }
  ForEachCounter(
      c, [&](const char*, const auto& m) { f.Map(m); },
      [&](const std::string& name, const CountHistogram& h) {
        f.Value(name);
        f.Histogram(h);
      });
  if (events != nullptr && !events->empty()) {
    f.Value(events->size());
    f.Value(events->newest()->time);
    f.Value(static_cast<int>(events->newest()->kind));
    f.Value(events->newest()->previous.pid);
  }
  return f.value();
}

// The newest kMarkersPerKind of each kind, in their order: the older ones were dropped (and
// counted) when they were.
std::vector<TimelineMarker> NewestMarkersOfEachKind(std::vector<TimelineMarker> markers) {
  std::map<decltype(MarkerKindKey(TimelineMarker{})), size_t> after;  // of its kind, from the end
  std::vector<bool> keep(markers.size());
  for (size_t i = markers.size(); i-- > 0;)
    keep[i] = after[MarkerKindKey(markers[i])]++ < kMarkersPerKind;
  std::vector<TimelineMarker> out;
  for (size_t i = 0; i < markers.size(); ++i) {
    if (keep[i]) out.push_back(std::move(markers[i]));
  }
  return out;
}

// A timeline journal's lines from a number on (Poller::JournalLines): `since` (the timeline's
// ClosedSince or MarkersSince) in parts of kJournalPartItems, each encoded by `encode`.
template <typename Since, typename Item>
auto TimelineJournalLines(Since since,
                          std::string (*encode)(const std::vector<Item>&, size_t* written)) {
  return [since, encode](uint64_t from, uint64_t* next, size_t* count, const WritePart& write) {
    *count = 0;
    *next = from;
    for (;;) {
      const std::vector<Item> part = since(*next, next, kJournalPartItems);
      size_t written = 0;
      const std::string lines = encode(part, &written);
      *count += written;
      if (!lines.empty() && !write(lines)) return false;
      if (part.size() < kJournalPartItems) return true;
    }
  };
}

// One log line for a timeline journal (IntervalJournalRead, MarkerJournalRead) that held fewer
// lines than the state names, or damaged ones.
template <typename Read>
void WarnIfShortOrDamaged(const std::string& target, const char* journal, const Read& read,
                          uint64_t named) {
  if (read.lines >= named && read.damaged == 0) return;
  spdlog::warn("target {}: {} journal: {} of the state's {} lines read, {} damaged and skipped{}{}",
               target, journal, read.lines, named, read.damaged,
               read.damaged > 0 ? "; the first: " : "", read.first_damage);
}

bool IsLockEvent(EventKind k) {
  return k == EventKind::kLockReleased || k == EventKind::kLockLost ||
         k == EventKind::kLockTakeover || k == EventKind::kLockHandover;
}

}  // namespace

void Poller::LoadState() {
  if (poll_.storage_path.empty()) return;
  EnableStateWrites();
  const std::string path = StateFilePath(poll_.storage_path, target_.name);
  std::string bytes;
  bool missing = false;
  Status s = ReadWholeFile(path, kMaxSavedStateBytes, &bytes, &missing);
  if (s.ok() && missing) {
    spdlog::info("target {}: no saved state in {}: a fresh start", target_.name, path);
    return;
  }
  auto saved = std::make_unique<SavedTarget>();
  if (s.ok()) s = DecodeSavedTarget(bytes, saved.get());
  if (s.ok() && saved->target != target_.name) {
    s = Status::InvalidData("it is target \"" + saved->target + "\"'s");
  }
  if (!s.ok()) {
    spdlog::warn("target {}: saved state {} ignored, a fresh start: {}", target_.name, path,
                 s.message());
    return;
  }
  std::string lines;
  if (saved->journal && ReadJournal(&events_journal_, *saved->journal, &lines)) {
    // Into a log of their own as they are read, in batches, which the first poll adopts when the
    // state is the server's: never all of them in a vector beside the log that keeps them.
    auto restored = std::make_unique<EventLog>(static_cast<size_t>(poll_.event_log_size));
    std::vector<Event> batch;
    const auto flush = [&] {
      restored->Append(std::move(batch));
      batch = {};
    };
    JournalRead read = DecodeEventLines(lines, saved->journal->lines, [&](Event&& e) {
      batch.push_back(std::move(e));
      if (batch.size() == 64) flush();
    });
    flush();
    if (read.lines < saved->journal->lines) {
      spdlog::warn("target {}: events journal ends after {} of the state's {} lines", target_.name,
                   read.lines, saved->journal->lines);
    }
    if (read.damaged > 0) {
      spdlog::warn(
          "target {}: events journal: {} of {} lines damaged and skipped, the rest restored; the "
          "first: {}",
          target_.name, read.damaged, read.lines, read.first_damage);
    }
    saved_events_ = std::move(restored);
  }
  std::string().swap(lines);  // the events journal's bytes are not kept beside the timeline's
  if (saved->timeline && saved->timeline_journal &&
      ReadJournal(&timeline_journal_, *saved->timeline_journal, &lines)) {
    IntervalJournalRead read = DecodeIntervalLines(lines, saved->timeline_journal->lines);
    WarnIfShortOrDamaged(target_.name, "timeline", read, saved->timeline_journal->lines);
    // The newest kClosedIntervals: the older ones were dropped (and counted) when they were.
    const size_t skip =
        read.intervals.size() > kClosedIntervals ? read.intervals.size() - kClosedIntervals : 0;
    read.intervals.erase(read.intervals.begin(),
                         read.intervals.begin() + static_cast<std::ptrdiff_t>(skip));
    saved->timeline->closed = std::move(read.intervals);
  }
  std::string().swap(lines);
  if (saved->timeline && saved->marker_journal &&
      ReadJournal(&marker_journal_, *saved->marker_journal, &lines)) {
    MarkerJournalRead read = DecodeMarkerLines(lines, saved->marker_journal->lines);
    WarnIfShortOrDamaged(target_.name, "markers", read, saved->marker_journal->lines);
    saved->timeline->markers = NewestMarkersOfEachKind(std::move(read.markers));
  }
  saved_ = std::move(saved);  // StartServerLog(), next, resumes the log reader from it
}

void Poller::ApplySavedState(const PollData& first) {
  const std::unique_ptr<EventLog> saved_events = std::move(saved_events_);
  if (!saved_) return;
  const std::unique_ptr<SavedTarget> saved = std::move(saved_);
  if (!saved->inventory) return;
  if (server_key_.empty() || saved->server != server_key_) {
    spdlog::warn(
        "target {}: saved state not applied: it was read from server {}, this is {} (a fresh "
        "start)",
        target_.name, saved->server.empty() ? "unknown" : saved->server,
        server_key_.empty() ? "unknown (pg_control_system() not readable)" : server_key_);
    return;
  }
  counters_ = saved->counters;
  // A file written before the journal keeps its events itself.
  size_t restored_events = saved->events.size();
  event_log_.Append(std::move(saved->events));
  if (saved_events) restored_events += event_log_.Adopt(saved_events.get());
  events_.RestorePooled(saved->pooled);
  // The episodes in progress, the lease tables' last reads and the timeline, judged by this poll
  // as after a long interval (their own headers say how).
  if (saved->episodes) episodes_.Restore(*saved->episodes);
  if (saved->leases) events_.RestoreLeases(*saved->leases);
  if (saved->timeline) timeline_->Restore(*saved->timeline);
  gap_leases_ = saved->leases.has_value();
  gap_episodes_.clear();
  if (saved->episodes) {
    for (const SavedEpisode& e : saved->episodes->episodes) {
      gap_episodes_.emplace(e.episode.root.id.pid, e.episode.started);
    }
  }
  history_.first_seen = saved->first_seen;
  // The saved inventory is the poll before this one: the first judgement spans the gap.
  auto baseline = std::make_shared<PollData>(*saved->inventory);
  JudgePoll(SteadyClock::time_point{}, &baseline, &inventory_, &events_, &names_, nullptr,
            &counters_, nullptr);
  gap_from_ = saved->inventory->now;
  gap_to_ = first.now;
  gap_pids_.clear();
  std::set<std::pair<int, double>> alive;
  for (const Session& s : first.sessions) alive.emplace(s.pid, s.backend_start);
  std::set<int> holders;
  for (const AdvisoryLock& l : saved->inventory->locks) {
    if (l.granted) holders.insert(l.pid);
  }
  for (const Session& s : saved->inventory->sessions) {
    if (holders.count(s.pid) != 0 && alive.count({s.pid, s.backend_start}) == 0) {
      gap_pids_.insert(s.pid);
    }
  }
  gap_polls_left_ = kGapPolls;
  spdlog::info(
      "target {}: saved state applied ({} locks held, {} events, {} blocking episodes in "
      "progress, {} timeline intervals, saved {:.0f} s ago); judging the {:.0f} s since its last "
      "poll, {} lock holders gone meanwhile",
      target_.name, saved->inventory->locks.size(), restored_events,
      saved->episodes ? saved->episodes->episodes.size() : 0,
      saved->timeline ? saved->timeline->open.size() + saved->timeline->closed.size() : 0,
      WallNow() - saved->saved_at, gap_to_ - gap_from_, gap_pids_.size());
}

void Poller::StampGap(Event* e) {
  if (gap_from_ == 0) return;
  // Judged across the gap: a lock event of a holder gone in it, a lease transition between the
  // reads on either side, an episode that was in progress at the stop (its peak and longest
  // wait do not see the gap).
  const bool across =
      (gap_polls_left_ > 0 && IsLockEvent(e->kind) && gap_pids_.count(e->previous.pid) != 0) ||
      (gap_leases_ && IsLeaseEvent(e->kind)) ||
      (e->kind == EventKind::kBlockingEpisode &&
       gap_episodes_.erase({e->previous.pid, e->started}) != 0);
  if (!across) return;
  e->gap_from = gap_from_;
  e->gap_to = gap_to_;
}

void Poller::SaveState(bool final) {
  if (gap_polls_left_ > 0 && !final && --gap_polls_left_ == 0) gap_pids_.clear();
  if (poll_.storage_path.empty() || final_state_written_) return;
  const std::string path = StateFilePath(poll_.storage_path, target_.name);
  if (forget_state_.load()) {
    if (!final) return;
    final_state_written_ = true;
    for (StateJournal* j : {&events_journal_, &timeline_journal_, &marker_journal_}) {
      if (j->generation != 0) j->retired.push_back(j->generation);
      if (j->loaded) j->retired.push_back(j->loaded->generation);
      j->generation = 0;  // none is current now
    }
    RemoveRetiredJournals();
    if (Status s = RemoveFile(path); !s.ok()) {
      spdlog::warn("target {}: removed from the config: {}", target_.name, s.message());
    } else {
      spdlog::info("target {}: removed from the config: its saved state is removed", target_.name);
    }
    return;
  }
  // Until a poll applied or refused the saved state, the file is still the best there is.
  if (saved_ || !inventory_.last()) return;
  const auto now = SteadyClock::now();
  const auto since = now - last_state_write_;
  const bool first = last_state_write_ == SteadyClock::time_point{};
  // Within the interval of the last look (every write follows one), nothing is hashed: four polls
  // in five at 1 s return here, idle or not. (Timed from the last write once: an idle exporter
  // hashed every counter, lease and first-seen hold at every poll from 5 s after a write to the
  // next, 60 s on.)
  if (!final && !first && now - last_state_check_ < kStateWriteInterval) return;
  last_state_check_ = now;
  const std::shared_ptr<const EventList> events = event_log_.Contents();
  EpisodeTrackerSaved episodes = episodes_.Save();
  const uint64_t fingerprint =
      FingerprintOf(history_, counters_, events.get(), log_position_, events_.pooled(), episodes,
                    events_.lease_tables(), timeline_->changes());
  if (!final && !first && fingerprint == written_fingerprint_ &&
      since < kUnchangedStateWriteInterval) {
    return;
  }
  last_state_write_ = now;
  written_fingerprint_ = fingerprint;
  if (final) final_state_written_ = true;
  SavedTarget s;
  s.target = target_.name;
  s.server = server_key_;
  s.saved_at = WallNow();
  s.inventory = inventory_.last();
  s.first_seen = history_.first_seen;
  s.counters = counters_;
  s.journal.emplace();
  WriteJournal(
      &events_journal_, events ? events->size() : 0,
      [&](uint64_t from, uint64_t* next, size_t* count, const WritePart& write) {
        const auto added = event_log_.Since(from, next);
        *count = added.size();
        const std::span<const std::shared_ptr<const Event>> all(added);
        for (size_t i = 0; i < all.size(); i += kJournalPartItems) {
          if (!write(
                  EncodeEventLines(all.subspan(i, std::min(kJournalPartItems, all.size() - i))))) {
            return false;
          }
        }
        return true;
      },
      &*s.journal);
  if (log_position_) s.log = SavedLogPosition{*log_position_, records_taken_until_};
  for (const PooledLock* l : events_.pooled().Locks()) s.pooled.push_back(*l);
  s.episodes = std::move(episodes);
  s.leases = events_.SaveLeases();  // copied only for a write
  // The closed intervals and the markers go to their journals: a write costs those closed or
  // taken since the last one.
  s.timeline = timeline_->Save(/*with_closed=*/false, /*with_markers=*/false);
  s.timeline_journal.emplace();
  WriteJournal(
      &timeline_journal_, timeline_->closed_count(),
      TimelineJournalLines([&](uint64_t from, uint64_t* next,
                               size_t max) { return timeline_->ClosedSince(from, next, max); },
                           &EncodeIntervalLines),
      &*s.timeline_journal);
  s.marker_journal.emplace();
  WriteJournal(
      &marker_journal_, timeline_->markers(),
      TimelineJournalLines([&](uint64_t from, uint64_t* next,
                               size_t max) { return timeline_->MarkersSince(from, next, max); },
                           &EncodeMarkerLines),
      &*s.marker_journal);
  const Status written = WriteFileAtomically(path, EncodeSavedTarget(s));
  CountStateWrite(written.ok(), s.saved_at);
  if (written.ok()) RemoveRetiredJournals();  // no state file names them now
  if (written.ok() == !state_write_failing_) return;
  state_write_failing_ = !written.ok();
  if (state_write_failing_) {
    spdlog::error("target {}: cannot save its state (polling goes on): {}", target_.name,
                  written.message());
  } else {
    spdlog::info("target {}: saving its state again in {}", target_.name, path);
  }
}

bool Poller::ReadJournal(StateJournal* journal, const SavedJournal& saved, std::string* bytes) {
  journal->loaded = saved;
  const std::string path = journal->path(poll_.storage_path, target_.name, saved.generation);
  bool missing = false;
  Status s = ReadWholeFile(path, kMaxJournalBytes, bytes, &missing);
  if (s.ok() && missing) s = Status::IoFailed("missing");
  if (s.ok()) return true;
  spdlog::warn("target {}: journal {} not read, what it keeps is not restored (the rest is): {}",
               target_.name, path, s.message());
  return false;
}

void Poller::RemoveRetiredJournals() {
  for (StateJournal* j : {&events_journal_, &timeline_journal_, &marker_journal_}) {
    for (uint64_t g : j->retired) {
      if (g == j->generation) continue;
      if (Status r = RemoveFile(j->path(poll_.storage_path, target_.name, g)); !r.ok()) {
        spdlog::warn("target {}: {}", target_.name, r.message());
      }
    }
    j->retired.clear();
  }
}

void Poller::WriteJournal(StateJournal* j, size_t kept, const JournalLines& since,
                          SavedJournal* named) {
  const auto current = [&] {
    if (j->generation != 0) return SavedJournal{j->generation, j->lines};
    return j->loaded.value_or(SavedJournal{});
  };
  if (j->generation != 0) {
    uint64_t next = 0;
    size_t count = 0;
    std::string added;  // what a few seconds added
    since(j->next, &next, &count, [&](std::string_view part) {
      added += part;
      return true;
    });
    if (!JournalWantsRewrite(j->lines, count, kept)) {
      const Status s =
          count == 0
              ? Status::Ok()
              : AppendToFile(j->path(poll_.storage_path, target_.name, j->generation), added);
      if (s.ok()) {
        j->lines += count;
        j->next = next;
        *named = current();
        return;
      }
      // The file may end in part of a line now: the state keeps naming the lines before it, and
      // the journal is written whole below.
      spdlog::warn("target {}: {}", target_.name, s.message());
    }
  }
  const uint64_t generation = std::max(j->generation, j->loaded ? j->loaded->generation : 0) + 1;
  uint64_t next = 0;
  size_t count = 0;
  const Status s =
      WriteFileAtomically(j->path(poll_.storage_path, target_.name, generation),
                          [&](const WritePart& write) { return since(0, &next, &count, write); });
  if (!s.ok()) {
    // Counted and logged with the state's write, whose file keeps naming the last journal.
    spdlog::warn("target {}: {}", target_.name, s.message());
    *named = current();
    return;
  }
  if (j->generation != 0) j->retired.push_back(j->generation);
  if (j->loaded && j->loaded->generation != generation) {
    j->retired.push_back(j->loaded->generation);
    j->loaded.reset();
  }
  j->generation = generation;
  j->lines = count;
  j->next = next;
  *named = current();
}

}  // namespace pglock
