// Blocking episodes: how long each root blocker (a blocker that waits for nothing) kept sessions
// waiting, how many at most, and how it ended; plus the server's deadlock counter and the
// deadlock cycles a poll sees. One state machine per root, judged at every successful poll (a
// failed poll is never observed: it neither starts nor ends an episode; the state survives
// reconnects and reloads, which keep the poller and its tracker).
//
//   (none) --a poll sees the root block >= 1 session--> blocking
//   blocking --seen blocking again------------------------------> blocking (peak, longest wait)
//   blocking --blocks none; root still there and, since the last poll that saw it blocking, ran
//              no statement in the same transaction (its locks cannot have gone)----> ended
//                                                                          (waiters_left)
//   blocking --blocks none; root still there otherwise-------------------> ended (released)
//   blocking --root gone (pid gone or a new backend_start; a server restart)--> ended
//                                                                    (root_ended, end cause)
//   blocking --root gone, the server's log shows its end------------------> ended (root_ended,
//                                                                  the log's cause, evidence log)
//   blocking --root gone, the log shows no cause (a disconnection line)---> ending
//   ending --next poll: the abandoned ends of its database in both polls shared out
//            (JudgeNoCauseEnd)----------------> ended (root_ended, that cause, log+counters)
//   blocking --root gone, no end counted in pg_stat_database yet, or the log readable but
//              silent on it (the counters' cause kept)--------------------> ending
//   ending --next poll: the log shows its end---------------------------> ended (the log's cause)
//   ending --next poll, else: the counters' cause kept, or an end counted since explains it
//            (InferEnd)--> ended (root_ended, that cause); none counted: session_closed
//
// Proof of waiters_left, the one rule: a client session's transaction keeps its locks until it
// ends, and an unlock is a statement; the root's xact_start and state_change both unchanged
// since the last poll that saw it blocking mean it let nothing go, so the waiters left (a
// lock_timeout, a cancel, a client giving up). A prepared transaction or a background process
// that no poll shows any more (they are read only while someone waits) is taken as released.
// Root end causes are those of lock losses (session_ends.h, InferEnd) over this tracker's own
// reading of the session end counters: a clean close is "session_closed".
// Limits: an episode shorter than a poll is not seen; its start and end are polls' now(), so a
// duration is a multiple of the interval, give or take the poll's own time.
// Thread-compatible: owned by one poller; judge.h (JudgeBlocking) is the way in.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/events/session_ends.h"
#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/session_end.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// The buckets of pglock_blocking_episode_duration_seconds and _peak_blocked.
inline const std::vector<double> kEpisodeSecondsBuckets = {1,   5,   15,   30,   60,  120,
                                                           300, 600, 1200, 1800, 3600};
inline const std::vector<double> kEpisodePeakBuckets = {1, 2, 3, 5, 10, 20, 50, 100, 200, 500};

enum class EpisodeState { kBlocking, kEnding };
// How an episode can end: the `outcome` label (EventOutcomeName) and the event's outcome.
inline constexpr EventOutcome kEpisodeOutcomes[] = {
    EventOutcome::kReleased, EventOutcome::kRootEnded, EventOutcome::kWaitersLeft};

struct Episode {
  EpisodeState state = EpisodeState::kBlocking;
  LockParticipant root;
  double started = 0;  // now() of the first poll that saw it block
  int64_t peak_blocked = 0;
  double longest_wait = 0;
  // What its waiters wait for, as the last poll that saw a wait on the root shows it: the advisory
  // lock's name (else key), the relation, else the lock type ("" when no wait edge was seen).
  std::string lock;
  // What the last poll that saw it blocking showed of the root's session (client roots only).
  std::optional<Session> last_seen;
  double last_seen_at = 0;
  std::optional<double> party_since;  // background processes and prepared transactions
  // kEnding: the counters' word on the root's end when it went there (nullopt: none yet).
  std::optional<HoldEnd> counters_end;
  // With the log read, from the poll that first saw the root gone: its database's share of the
  // abandoned ends, for a root whose log shows no cause (JudgeNoCauseEnd).
  std::optional<AbandonedShare> share;
};

// How an episode ended: its outcome, the root's end cause ("" unless root_ended) and what
// decided that cause.
struct EpisodeEnd {
  EventOutcome outcome = EventOutcome::kReleased;  // one of kEpisodeOutcomes
  EventCause cause = EventCause::kNone;
  EndEvidence evidence = EndEvidence::kNone;
};

// An episode in progress as a restart keeps it, with its root's key (pid, backend start, gid).
struct SavedEpisode {
  int pid = 0;
  double backend_start = 0;
  std::string gid;
  Episode episode;
};

// What a restart keeps of the tracker (plain data; exporter/storage/saved_state.h writes it).
struct EpisodeTrackerSaved {
  std::vector<SavedEpisode> episodes;
  std::vector<DatabaseStats> last_stats;  // the session end and deadlock counters last read
  double postmaster_start = 0;
  std::vector<std::vector<int>> cycles;  // the deadlock cycles the last poll saw, by pids
};

class BlockingEpisodeTracker {
 public:
  BlockingEpisodeTracker() = default;
  BlockingEpisodeTracker(const BlockingEpisodeTracker&) = delete;
  BlockingEpisodeTracker& operator=(const BlockingEpisodeTracker&) = delete;

  // Judges one successful poll: `view` is its view (TargetView::all_blocking_roots,
  // deadlock_cycles). Counts ended episodes and deadlocks into *counters; appends a
  // blocking_episode event per ended episode and a deadlock event per cycle first seen to
  // *events (may be null).
  void Observe(const PollData& data, const TargetView& view, Counters* counters,
               std::vector<Event>* events);

  // Open episodes (blocking or ending), for tests and the page.
  size_t open() const { return episodes_.size(); }

  // The server's log, asked first for how a root's session ended; null: none configured.
  void set_log(std::shared_ptr<const SessionEndLog> log) { log_ = std::move(log); }

  // The episodes in progress and what the next poll is judged against, for the state file; and
  // put back at a start (replacing what the tracker had). The next Observe() judges a restored
  // episode as after a long poll interval: its root still blocking carries it on with its start
  // and peak; a root that blocks no one, or is gone, ends it by the rules above (the counters
  // read since the stop and the server's log say how its session ended).
  EpisodeTrackerSaved Save() const;
  void Restore(const EpisodeTrackerSaved& saved);

 private:
  // pid and backend_start for a client session; pid 0 and the gid for a prepared transaction;
  // pid and 0 for a background process.
  using RootKey = std::tuple<int, double, std::string>;

  void See(const PollData& data, const BlockingRoot& r, const RootKey& key);
  void Judge(const PollData& data, const std::set<RootKey>& blocking, Counters* counters,
             std::vector<Event>* events);
  // What happened to the root of an episode that blocks no one now (nullopt: wait a poll).
  std::optional<EpisodeEnd> Outcome(const PollData& data, Episode* e);
  // The same for a client root whose session is gone.
  std::optional<EpisodeEnd> RootEnded(const PollData& data, Episode* e);
  // The same for a root whose log shows no cause; `d` the ends of its database this poll left.
  std::optional<EpisodeEnd> NoCauseRootEnded(const PollData& data, Episode* e, SessionEndDeltas* d);
  void End(const PollData& data, const Episode& e, const EpisodeEnd& end, Counters* counters,
           std::vector<Event>* events) const;
  void CountDeadlocks(const PollData& data, Counters* counters);
  void SeeCycles(const PollData& data, const TargetView& view, std::vector<Event>* events);

  std::map<RootKey, Episode> episodes_;
  std::shared_ptr<const SessionEndLog> log_;
  std::map<uint32_t, DatabaseStats> last_stats_;
  std::map<uint32_t, DatabaseStats> deltas_;  // of this poll, consumed by root ends
  double postmaster_start_ = 0;
  std::set<std::set<int>> cycles_;  // the pids of each cycle the last poll saw
};

}  // namespace pglock
