// The event sections of one target on /locks (oncall.h): the recent blocking episodes, the lock
// waits, lock timeouts and deadlocks the server's log told between polls, and the recent events,
// whose rows the timeline's markers link to. Every string from the database is HTML-escaped.
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "exporter/http/oncall_select.h"
#include "exporter/http/timeline_page.h"

namespace pglock {

// The newest blocking episodes and deadlock cycles a poll saw, newest first.
void EpisodesHtml(const TargetPart& t, std::string* o);

// The newest lock waits, lock timeouts and deadlocks the server's log told, newest first; or
// how to let the exporter read that log.
void LoggedHtml(const TargetPart& t, std::string* o);

// The newest events, newest first.
void EventsHtml(const TargetPart& t, std::string* o);

// A timeline marker's link: the row of the recorded event it came from, when the page shows it.
// The function borrows `t`, which must outlive it.
MarkerHref EventHref(const TargetPart& t);

}  // namespace pglock
