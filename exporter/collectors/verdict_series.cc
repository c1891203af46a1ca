#include "exporter/collectors/verdict_series.h"

#include "exporter/snapshot/verdict.h"

namespace pglock {
namespace {

const MetricDesc kSessionVerdict{
    "pglock_session_verdict_info",
    prometheus::MetricType::Gauge,
    "The verdict on a session that an alert names (seen_as: blocking_root, "
    "idle_in_transaction_holder, lock_table_session): action, the command, the next command "
    "when that is not enough, the pooler whose admin console takes a pooler command, and "
    "advice, the words /locks prints after Do:. Always 1; the alert rules print its advice.",
    {"target", "datname", "pid", "seen_as", "action", "command", "then_command", "pooler",
     "advice"}};

const char* SubjectName(VerdictSubject s) {
  switch (s) {
    case VerdictSubject::kBlockingRoot:
      return "blocking_root";
    case VerdictSubject::kIdleInTransactionHolder:
      return "idle_in_transaction_holder";
    case VerdictSubject::kLockTableSession:
      return "lock_table_session";
  }
  return "blocking_root";
}

}  // namespace

void AddVerdictSeries(const std::string& target, VerdictSubject subject, const std::string& datname,
                      int pid, const Verdict& verdict, Families* f) {
  if (pid == 0) return;
  f->Add(kSessionVerdict,
         {target, datname, std::to_string(pid), SubjectName(subject),
          VerdictActionName(verdict.action), verdict.command, verdict.then_command, verdict.pooler,
          VerdictAdvice(verdict)},
         1);
}

}  // namespace pglock
