// The JSON of one target in /api/v1/locks (oncall.h): its state, its wait forest with the
// roots' verdicts, the lock table when it fills, the holders, the pooled session locks, the
// leases needing a look, its newest events and what the server's log told between polls. Every
// string from the database is JSON-escaped. Pure functions; thread-safe.
#pragma once

#include <string>

#include "exporter/http/oncall_select.h"

namespace pglock {

// Appends the JSON object of `t` to *o.
void TargetJson(const TargetPart& t, std::string* o);

}  // namespace pglock
