// The HTML of one target on /locks (oncall.h): its state, its wait forest with the roots'
// verdicts, the lock table when it fills, the holders, the pooled session locks and the leases
// needing a look, then its timeline (timeline_page.h) and its event sections
// (oncall_events_html.h). Every string from the database is HTML-escaped. Pure functions;
// thread-safe.
#pragma once

#include <string>

#include "exporter/http/oncall_select.h"
#include "exporter/snapshot/preflight.h"

namespace pglock {

// Appends the <section> of `t` to *o.
void TargetHtml(const TargetPart& t, std::string* o);

// The preflight answer for a table typed into the page's box (docs/preflight.md), as a section.
std::string PreflightHtml(const PreflightAnswer& a);

}  // namespace pglock
