// The JSON of one target in /api/v1/locks (oncall.h): its state, its wait forest with the
// roots' verdicts, the lock table when it fills, the holders, the pooled session locks, the
// leases needing a look, its newest events and what the server's log told between polls. Every
// string from the database is JSON-escaped. Pure functions; thread-safe.
#pragma once

#include <string>

#include "exporter/http/oncall_select.h"
#include "exporter/snapshot/preflight.h"

namespace pglock {

// Appends the JSON object of `t` to *o.
void TargetJson(const TargetPart& t, std::string* o);

// The body of /api/v1/preflight (docs/api.md): the verdict and its evidence, or {"error": ...};
// `now` (Unix time) gives the poll's age.
std::string PreflightJson(const PreflightAnswer& a, double now);

}  // namespace pglock
