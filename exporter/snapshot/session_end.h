// How a session ended, as the words the events, the server log reader and the pages share: the
// end of a hold's session (a release or a loss and its cause), and which evidence decided it.
// Plain values; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pglock {

// A session by pid and backend start (epoch seconds): pids are reused. The server log's
// session_id carries the same two facts (backend start truncated to the second).
using SessionId = std::pair<int, double>;

// How a hold that is gone from pg_locks ended: its session still connected (an unlock or the end
// of its transaction), a clean close of its session, or a loss and its cause. An event's cause
// (exporter/events/event_names.h) is one of these or a lock wait's failure.
enum class HoldEnd : uint8_t {
  kStillConnected,
  kCleanClose,
  kIdleInTransactionTimeout,
  kIdleSessionTimeout,
  kTransactionTimeout,  // PostgreSQL 17+
  kTerminated,
  kConnectionLost,
  kServerRestart,
  kUnknown,  // an abnormal end that matches no rule
  // Its log shows no cause and its database's abandoned count cannot say whether it was the
  // vanished one: some, not all, of the no-cause ends that shared the interval were abandoned.
  kUndetermined,
};
// Every end, in the order of the enum (the saved state reads them back by their labels).
inline constexpr HoldEnd kHoldEnds[] = {
    HoldEnd::kStillConnected,     HoldEnd::kCleanClose,         HoldEnd::kIdleInTransactionTimeout,
    HoldEnd::kIdleSessionTimeout, HoldEnd::kTransactionTimeout, HoldEnd::kTerminated,
    HoldEnd::kConnectionLost,     HoldEnd::kServerRestart,      HoldEnd::kUnknown,
    HoldEnd::kUndetermined};
constexpr bool HoldEndsInEnumOrder() {
  for (size_t i = 0; i < std::size(kHoldEnds); ++i) {
    if (static_cast<size_t>(kHoldEnds[i]) != i) return false;
  }
  return true;
}
static_assert(HoldEndsInEnumOrder(),
              "kHoldEnds lists every HoldEnd once, in the order of the enum");
inline constexpr HoldEnd kLossCauses[] = {HoldEnd::kIdleInTransactionTimeout,
                                          HoldEnd::kIdleSessionTimeout,
                                          HoldEnd::kTransactionTimeout,
                                          HoldEnd::kTerminated,
                                          HoldEnd::kConnectionLost,
                                          HoldEnd::kServerRestart,
                                          HoldEnd::kUnknown,
                                          HoldEnd::kUndetermined};
inline bool IsLoss(HoldEnd e) { return e != HoldEnd::kStillConnected && e != HoldEnd::kCleanClose; }
// Whether the key's next holder after this end is a takeover (else a hand-over): a loss the
// evidence pins on the session; an undetermined end may have been a clean close, and a takeover
// pages as critical.
inline bool MakesTakeover(HoldEnd e) { return IsLoss(e) && e != HoldEnd::kUndetermined; }
// The label value where metrics and JSON are written: the `cause` of a loss, the `reason` of a
// release ("unlocked", "session_closed").
const char* HoldEndLabel(HoldEnd e);

// Which evidence decided a session's end: the server's log (the backend's own FATAL line), the
// session end counters of pg_stat_database, the timing alone (a timeout matched on a server
// without those counters), the server's restart (its start time changed), or the log and the
// counters together (its disconnection line with no cause, and its database's abandoned count).
enum class EndEvidence { kNone, kLog, kCounters, kTiming, kRestart, kLogAndCounters };
// Every evidence but kNone (docs and tests).
inline constexpr EndEvidence kEndEvidences[] = {EndEvidence::kLog, EndEvidence::kCounters,
                                                EndEvidence::kTiming, EndEvidence::kRestart,
                                                EndEvidence::kLogAndCounters};
// "", "log", "counters", "timing", "restart", "log+counters".
const char* EndEvidenceLabel(EndEvidence e);

// A session's end as the log shows it, for a database and a span of log time.
struct LoggedSessionEnd {
  SessionId session;  // backend start truncated to the second, as the log has it
  HoldEnd end = HoldEnd::kCleanClose;
};

// What the server's log says of how sessions ended (exporter/serverlog/server_log.h reads it on a
// thread of its own). The events ask it first, and the session end counters only when it has not
// shown a session's end. Implementations are thread-safe.
class SessionEndLog {
 public:
  virtual ~SessionEndLog() = default;
  // How `session` ended, once the log has shown it: the cause of its FATAL (or lost-connection)
  // line, final; or kCleanClose for its disconnection line with no cause before it, which is NOT
  // final: PostgreSQL logs a client's EOF outside a transaction only at DEBUG1, so a client that
  // vanished while idle leaves the same line as a clean close (JudgeNoCauseEnd decides).
  virtual std::optional<HoldEnd> EndOf(const SessionId& session) const = 0;
  // The ends the log showed for sessions of database `datname` logged between `from` and `to`
  // (log time, epoch seconds), those of sessions no poll saw included.
  virtual std::vector<LoggedSessionEnd> EndsLoggedBetween(const std::string& datname, double from,
                                                          double to) const = 0;
  // True while the log is read without error: an end it has not shown yet is worth waiting for.
  virtual bool readable() const = 0;
  // How many reads reached the end of the log so far: a judgement that found no end for a gone
  // session waits until the log was read through again after it (see kMaxLogWaitSeconds).
  virtual uint64_t reads_through() const = 0;
};

// How long, at most, a judgement waits for the log to show a gone session's end before it takes
// the counters' word (the log's write lag is milliseconds; a reader a poll behind is not).
inline constexpr double kMaxLogWaitSeconds = 10.0;
// How long, at least, it waits (by the polls' clock), however often the log is read: a backend
// hands its last line to the logging collector over a pipe and leaves pg_stat_activity, and the
// collector writes the line to the file when it is scheduled. On a loaded machine that took more
// than two reads of a log read every 200 ms, and a terminated session was judged by its counters.
inline constexpr double kMinLogWaitSeconds = 1.0;

}  // namespace pglock
