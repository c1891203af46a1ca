#include "exporter/snapshot/session_end.h"

namespace pglock {

const char* HoldEndLabel(HoldEnd e) {
  switch (e) {
    case HoldEnd::kStillConnected:
      return "unlocked";
    case HoldEnd::kCleanClose:
      return "session_closed";
    case HoldEnd::kIdleInTransactionTimeout:
      return "idle_in_transaction_timeout";
    case HoldEnd::kIdleSessionTimeout:
      return "idle_session_timeout";
    case HoldEnd::kTransactionTimeout:
      return "transaction_timeout";
    case HoldEnd::kTerminated:
      return "terminated";
    case HoldEnd::kConnectionLost:
      return "connection_lost";
    case HoldEnd::kServerRestart:
      return "server_restart";
    case HoldEnd::kUnknown:
      return "unknown";
    case HoldEnd::kUndetermined:
      return "undetermined";
  }
  return "unknown";
}

const char* EndEvidenceLabel(EndEvidence e) {
  switch (e) {
    case EndEvidence::kNone:
      return "";
    case EndEvidence::kLog:
      return "log";
    case EndEvidence::kCounters:
      return "counters";
    case EndEvidence::kTiming:
      return "timing";
    case EndEvidence::kRestart:
      return "restart";
    case EndEvidence::kLogAndCounters:
      return "log+counters";
  }
  return "";
}

}  // namespace pglock
