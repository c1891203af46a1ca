// pglock_session_verdict_info: the verdict (exporter/snapshot/verdict.h) for each session that an
// alert with a command names: a root blocker (the wait and queue alerts), an idle-in-transaction
// lock holder, a session filling the shared lock table. Its `advice` label is VerdictAdvice(), the
// words /locks prints after "Do:"; the alert rules print that label and word no verdict of their
// own, so that an alert, /locks and /api/v1/locks never disagree (a pooled connection's leak is
// the pooler's RECONNECT everywhere, never pg_terminate_backend).
// Each collector that exposes such a session adds its verdict next to it, with the same pid.
#pragma once

#include <string>

#include "exporter/metrics/families.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// What the series' `seen_as` label says the session is: each has its own rule (an active root is
// cancelled, an active session filling the lock table is ended: a cancel frees no session lock).
enum class VerdictSubject { kBlockingRoot, kIdleInTransactionHolder, kLockTableSession };

// Adds the verdict series of session `pid` (in `datname`) as `subject`. A session without a pid
// (a prepared transaction) has none: its series would repeat.
void AddVerdictSeries(const std::string& target, VerdictSubject subject, const std::string& datname,
                      int pid, const Verdict& verdict, Families* f);

}  // namespace pglock
