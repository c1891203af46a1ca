// --check-targets: proves a validated config against the servers it names. Connects once to every
// target (with the exporter's own read-only session, exporter/pg/session.h), to every other
// database of its lock tables and to every pooler's admin console, and prints what the config
// resolves to there: each named lock's key as the server computes it and who holds it now; each
// lock table's columns and types, whether the role may SELECT it, its rows and how they are
// judged (held, expired, free); whether each pooler answers; whether the server's log
// ([targets.server_log]) can be read as the exporter reads it (its newest file of the format, one
// byte of it) and the server settings that make it useful. Each problem is one line naming the
// config file, line and key and what to do (for a server setting, the exact ALTER SYSTEM). A
// setting that only makes the log show less (log_lock_waits off) is ADVICE, said the same way but
// not counted. Never writes and takes no advisory lock; each statement runs under the poll's
// statement and lock timeouts. Not thread-safe (one call at a time; it opens its own connections).
#pragma once

#include <ostream>

#include "exporter/config/config.h"

namespace pglock {

// Checks every target of `config`, writing the report to `out`. Returns the process exit code:
// 0 when everything resolves (advice or not), 1 when anything does not (a server log configured
// but unreadable included).
int CheckTargets(const Config& config, std::ostream& out);

}  // namespace pglock
