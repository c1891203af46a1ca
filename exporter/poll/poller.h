// One poller per target: a thread that owns the target's libpq connection, polls every
// poll.interval with a hard deadline of poll.timeout, turns the result into an immutable
// TargetSnapshot and swaps it in. Reconnects with capped exponential backoff. A poll runs the
// collectors (exporter/collectors/registry.cc): their statements in one round trip, then those
// with round trips of their own, then the view and the event diff.
// Thread-safety: Latest() may be called from any thread; Start/Stop from the owning thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exporter/collectors/collector.h"
#include "exporter/config/config.h"
#include "exporter/events/blocking_episodes.h"
#include "exporter/events/event_log.h"
#include "exporter/events/events.h"
#include "exporter/events/inventory.h"
#include "exporter/events/logged_locks.h"
#include "exporter/events/timeline.h"
#include "exporter/pg/connection.h"
#include "exporter/poll/relation_names.h"
#include "exporter/poll/resolve_lock_names.h"
#include "exporter/poll/server_identity.h"
#include "exporter/serverlog/server_log.h"
#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/preflight.h"
#include "exporter/snapshot/snapshot.h"
#include "exporter/storage/saved_state.h"
#include "exporter/storage/state_store.h"
#include "exporter/util/thread_annotations.h"

namespace pglock {

class Poller {
 public:
  // `servers`, when given, hears which server the poller connects to (two targets on one server
  // are warned about).
  Poller(TargetConfig target, PollConfig poll, std::shared_ptr<ServerRegistry> servers = nullptr);
  ~Poller();  // stops and joins
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  void Start();
  // Wakes the thread and joins it; the connection is closed. Returns within about a second even
  // when a poll is in flight (the poll's own deadline bounds it).
  void Stop() EXCLUDES(mu_);

  std::shared_ptr<const TargetSnapshot> Latest() const EXCLUDES(mu_);
  // The configuration last given (constructor or Reconfigure); any thread.
  TargetConfig target() const EXCLUDES(mu_);
  PollConfig poll() const EXCLUDES(mu_);

  // A reload changed this target's settings but not its DSN: the poller keeps its connection,
  // its counters, pglock_up and its event state, and applies the new settings from its next
  // poll. Any thread.
  void Reconfigure(TargetConfig target, PollConfig poll) EXCLUDES(mu_);

  // The target is gone from the config: Stop() removes its saved state instead of writing it.
  // Any thread, before Stop().
  void ForgetSavedState() { forget_state_.store(true); }

  // Unique for the life of the process (ServerRegistry's key); any thread.
  uint64_t id() const { return id_; }

  // Runs one poll synchronously on the calling thread (tests). Not to be mixed with Start().
  void PollOnceForTest() { PollOnce(); }
  // The target's server log reader (null without [targets.server_log]); it reads on a thread of
  // its own from construction on.
  const ServerLog* server_log() const { return server_log_.get(); }

 private:
  void Run() EXCLUDES(mu_);
  // One poll: connect if needed, collect, analyze, count events, publish. Returns success.
  bool PollOnce();
  // Applies a pending Reconfigure() (polling thread).
  void ApplyPendingConfig() EXCLUDES(mu_);
  void BuildAnalyzeOptions();
  // (Re)starts the server log reader for target_ (none when not configured), and hands it to the
  // event judgements.
  void StartServerLog();
  Status EnsureConnected(SteadyClock::time_point deadline);
  // Resolves [[targets.locks]] on `conn`; an expression that fails is logged once and left unnamed.
  Status ResolveNames(PgConnection& conn, SteadyClock::time_point deadline);
  // Runs every collector's statements and round trips into *data; *statuses gets each
  // collector's outcome and time. A poll that opens a session (the poll `started` then) gives its
  // setup SessionSetupTimeout and moves *deadline to a whole timeout after it.
  Status Collect(SteadyClock::time_point started, SteadyClock::time_point* deadline, PollData* data,
                 std::vector<CollectorStatus>* statuses);
  // The session end counters again, right after a poll that judged lock holders' sessions closed
  // with no end counted (EventTracker::Settle), within what is left of the poll's `deadline`;
  // nullopt on failure, when no time is left, or before PostgreSQL 14.
  std::optional<std::vector<DatabaseStats>> ReadSessionEndCounters(
      SteadyClock::time_point deadline);
  void CountCollectorErrors(const PollData& data);
  // The view of a good poll (every collector's part), with what building it counts: the detail
  // series left out by top_n, each collector's build time in *statuses.
  std::shared_ptr<TargetView> BuildView(const PollData& data,
                                        std::vector<CollectorStatus>* statuses);
  // Judges the blocking episodes and deadlocks of a good poll from its built view, counts them
  // and records their events (RecordEvents).
  void JudgeEpisodes(const PollData& data, const TargetView& view);
  // Publishes the snapshot of a good poll around `view`.
  void PublishSuccess(std::shared_ptr<TargetSnapshot> snap, std::shared_ptr<TargetView> view,
                      std::string role, std::string server_version,
                      std::vector<CollectorStatus> statuses);
  // Publishes the snapshot of a failed poll (pglock_up 0, counters and events kept).
  void PublishFailure(const Status& status, std::shared_ptr<TargetSnapshot> snap);
  // counters_ for a snapshot: the last one published while none moved (compared, not copied).
  std::shared_ptr<const Counters> PublishedCounters();
  // The shared lock table after a poll failed with it full: read alone on the live connection
  // (ReadFullLockTable), else the last good poll's with its age grown; null when neither exists.
  std::shared_ptr<const LockTableView> LockTableWhenFull(SteadyClock::time_point deadline);
  // "primary" or "standby" at this poll; warns when it changed since the last good poll.
  std::string NoteRole(const PollData& data);
  void Publish(std::shared_ptr<const TargetSnapshot> snapshot) EXCLUDES(mu_);
  void LogStateChange(bool up, const std::string& error);
  // Stamps the target on each event, logs it once and keeps it in event_log_ (and as markers on
  // the timeline).
  void RecordEvents(std::vector<Event> events);

  // [storage] (poller_state.cc). Reads the target's state file into saved_ (constructor).
  void LoadState();
  // At the first good poll after a start (`first`, not judged yet): applies saved_ when it is of
  // this server: counters, events, when holds were first seen, the blocking episodes in
  // progress, the lease tables' last reads, the timeline, and its inventory as the baseline the
  // first poll is judged against. Then saved_ is gone either way.
  void ApplySavedState(const PollData& first);
  // Writes the state file: at most every kStateWriteInterval after a good poll, when its
  // fingerprint (looked at no more often) changed or kUnchangedStateWriteInterval passed, and once
  // more at Stop() (`final`); never before a poll applied (or refused) the saved state.
  void SaveState(bool final);
  // A journal beside the state file (the events', the timeline's closed intervals'): the
  // generation this run wrote (0: none yet, the next write writes it whole), its lines, the
  // number of its next item, the generation the state file read at start named, and the ones to
  // remove once a state file that no longer names them is on disk.
  struct StateJournal {
    using PathOf = std::string (*)(const std::string& dir, const std::string& target,
                                   uint64_t generation);
    explicit StateJournal(PathOf p) : path(p) {}
    PathOf path;
    uint64_t generation = 0;
    uint64_t lines = 0;
    uint64_t next = 0;
    std::optional<SavedJournal> loaded;
    std::vector<uint64_t> retired;
  };
  // The items numbered `from` on, encoded as lines and handed to `write` in parts of at most
  // kJournalPartItems items (false back: stop, and return false); *count of them, *next the
  // number after.
  using JournalLines =
      std::function<bool(uint64_t from, uint64_t* next, size_t* count, const WritePart& write)>;
  // Brings a journal up to what it keeps (`kept` items): appends the items added since the last
  // write, or writes it whole under the next generation (the first write of a run, when it would
  // hold more than about twice `kept`, after a failed append). Sets *named to what the state
  // file may name: the new journal, or the last one written on an error.
  void WriteJournal(StateJournal* journal, size_t kept, const JournalLines& since,
                    SavedJournal* named);
  // Reads the journal `saved` names at start; false (and one log line) when it cannot.
  bool ReadJournal(StateJournal* journal, const SavedJournal& saved, std::string* bytes);
  // Removes the retired generations of every journal.
  void RemoveRetiredJournals();
  // An event judged across the exporter's gap (a holder gone in it, a lease transition of the
  // first read after it, an episode in progress at the stop): says so.
  void StampGap(Event* e);

  // Preflight requests (poller_preflight.cc): answers those waiting on the desk from this good
  // poll, each with one read of the table's relation locks on the poll's connection, all within
  // one poll.timeout; or refuses them with `why` (the poll failed, the exporter stops).
  void AnswerPreflights(const PollData& data, const TargetView& view);
  void RefusePreflights(const std::string& why);
  Status ReadPreflight(const PreflightRequest& request, SteadyClock::time_point deadline,
                       PreflightFacts* facts);

  // Owned by the polling thread (also read by the constructor and Stop()).
  TargetConfig target_;
  PollConfig poll_;
  const std::string masked_dsn_;
  const uint64_t id_;
  const std::shared_ptr<ServerRegistry> servers_;

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::atomic<bool> abort_{false};  // makes an in-flight poll give up
  std::shared_ptr<const TargetSnapshot> latest_ GUARDED_BY(mu_);
  TargetConfig configured_target_ GUARDED_BY(mu_);
  PollConfig configured_poll_ GUARDED_BY(mu_);
  bool reconfigure_pending_ GUARDED_BY(mu_) = false;
  std::thread thread_;
  EventLog event_log_;  // written by the polling thread, published with every snapshot
  // Written by the polling thread, shared with every snapshot (thread-safe).
  const std::shared_ptr<Timeline> timeline_ = std::make_shared<Timeline>();
  // Preflight requests from the HTTP side, answered by the polling thread (thread-safe).
  const std::shared_ptr<PreflightDesk> preflight_ = std::make_shared<PreflightDesk>();

  // Owned by the polling thread only (the reader runs a thread of its own).
  std::shared_ptr<ServerLog> server_log_;
  std::unique_ptr<PgConnection> conn_;
  std::vector<std::unique_ptr<CollectorState>> collector_states_;  // parallel to Collectors()
  LockNames names_;
  bool names_stale_ = false;  // [[targets.locks]] changed: resolve again on the connection
  AnalyzeOptions analyze_options_;
  HoldHistory history_;
  InventoryTier inventory_;
  EventTracker events_;
  BlockingEpisodeTracker episodes_;
  LoggedLockTracker logged_locks_;
  RelationNames relation_names_;  // of the logged lock records, on the current connection
  Counters counters_;
  // counters_ as the last snapshot published them; a poll that moved none shares it.
  std::shared_ptr<const Counters> published_counters_;
  double poll_errors_ = 0;
  double quiet_fallbacks_ = 0;
  double last_success_ = 0;
  // The shared lock table of the last good poll and when it was published: what a poll failing
  // with the table full keeps exporting (TargetSnapshot::lock_table), its age grown.
  std::shared_ptr<const LockTableView> last_lock_table_;
  // The settings of the last good poll on the current connection (PollPlan::settings_read);
  // none after a reconnect.
  std::optional<SettingsRead> settings_read_;
  SteadyClock::time_point last_lock_table_at_{};
  int consecutive_failures_ = 0;
  std::minstd_rand jitter_{std::random_device{}()};  // spreads the reconnects (SpreadRetryDelay)
  bool ever_polled_ = false;
  bool was_up_ = false;
  bool warned_hidden_ = false;
  std::string role_;  // "primary" or "standby" at the last good poll; "" before it
  // Lock-name expression failures already logged (each once per poller, whatever the reconnects).
  std::set<std::string> logged_lock_problems_;
  std::map<std::string, std::string> collector_last_error_;  // collector -> last error, "" = ok

  // [storage]: the state read at start, until the first good poll applies or refuses it.
  std::unique_ptr<SavedTarget> saved_;
  // The events journal's events, read with saved_ (its `events` then empty), for the same poll.
  std::unique_ptr<EventLog> saved_events_;
  std::string server_key_;                   // ServerIdentity::server at the last connect
  std::optional<LogPosition> log_position_;  // the log reader's, at the last good poll's start
  double records_taken_until_ = 0;           // wall clock of the last TakeLockRecords
  SteadyClock::time_point last_state_write_{};
  SteadyClock::time_point last_state_check_{};  // the last fingerprint taken: at or after the write
  uint64_t written_fingerprint_ = 0;            // of what the last write kept (poller_state.cc)
  bool state_write_failing_ = false;
  bool final_state_written_ = false;
  StateJournal events_journal_{&EventJournalPath};
  StateJournal timeline_journal_{&TimelineJournalPath};
  StateJournal marker_journal_{&MarkerJournalPath};
  std::atomic<bool> forget_state_{false};
  // The exporter's gap the first poll after a start judged (server epoch seconds), and the
  // sessions holding locks before it that the first poll no longer saw (pid, backend start):
  // their events say they were judged across it. Cleared after kGapPolls polls.
  double gap_from_ = 0;
  double gap_to_ = 0;
  std::set<int> gap_pids_;
  int gap_polls_left_ = 0;
  // The lease tables' reads before the stop were restored: the transitions of the first poll's
  // reads are judged across the gap (cleared after that poll).
  bool gap_leases_ = false;
  // The episodes in progress at the stop (root pid, start): their events, whenever they end,
  // carry the gap.
  std::set<std::pair<int, double>> gap_episodes_;
};

}  // namespace pglock
