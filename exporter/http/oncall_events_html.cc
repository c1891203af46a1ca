#include "exporter/http/oncall_events_html.h"

#include <map>
#include <string_view>
#include <tuple>

#include "exporter/events/event_log.h"
#include "exporter/http/page_text.h"

namespace pglock {
namespace {

// A party's texts read in place: the section lists up to thousands of events.
std::string EventWho(const EventParty& party, const std::string& holder) {
  if (party.pid == 0) return holder;
  std::string o = "pid " + std::to_string(party.pid);
  o.append(" ").append(party.application_name());
  o.append(" ").append(party.usename()).append("@").append(Addr(party.client_addr()));
  if (!holder.empty()) o.append(" (").append(holder).append(")");
  return o;
}

// What the target's log reader reports, where that limits what the section shows.
void LogReaderHtml(const ServerLogStatus& log, std::string* o) {
  if (!log.up) {
    *o += "<p class=down>The server's log cannot be read" +
          (log.error.empty() ? std::string() : ": " + H(log.error)) + ".</p>\n";
  }
  if (log.untranslated) {
    *o +=
        "<p class=down>The server's lc_messages is not English: its lock-wait lines cannot be "
        "read (lock timeouts and deadlocks still are, by SQLSTATE).</p>\n";
  }
  if (log.dropped > 0) {
    *o += "<p class=down>" + H(Count(log.dropped)) +
          " lock records dropped (more than 10,000 between two polls).</p>\n";
  }
}

// One lock wait, lock timeout or deadlock from the log: who waited (or gave up, or was
// cancelled), behind whom, for what, how long, and the log's detail.
std::string LoggedRowHtml(const Event& e) {
  std::string what;
  std::string waiter = EventWho(e.current, e.current_holder);
  std::string holder = EventWho(e.previous, e.previous_holder);
  std::string waited;
  if (e.kind == EventKind::kLockWait) {
    const std::string outcome = EventOutcomeName(e.outcome);
    what = "<td>lock_wait " +
           (e.outcome == EventOutcome::kAcquired ? H(outcome) : "<b>" + H(outcome) + "</b>") +
           "</td>";
    waited = Secs(e.duration);
  } else if (e.kind == EventKind::kLockTimeout) {
    // The cause when it says more than the kind: nowait_failed, lock_not_available.
    what =
        "<td class=down>lock_timeout" +
        (e.cause == EventCause::kLockTimeout ? "" : " <b>" + H(EventCauseName(e.cause)) + "</b>") +
        "</td>";
    if (e.duration > 0) waited = Secs(e.duration);
  } else {  // deadlock: `previous` is the process the server cancelled; the cycle is the detail
    what = "<td class=down>deadlock</td>";
    waiter = "cancelled: " + holder;
    holder.clear();
  }
  return "<tr><td>" + H(Utc(e.time)) + "</td>" + what + "<td><span class=lock>" + H(e.lock) +
         "</span> " + H(e.datname) + "</td><td>" + H(waiter) + "</td><td>" + H(holder) +
         "</td><td>" + H(waited) + "</td><td class=detail>" + H(e.detail) + "</td></tr>\n";
}

// The id of the event row of t.events[index] ("ev-<target's index>-<index>").
std::string EventAnchor(const TargetPart& t, size_t index) {
  return "ev-" + std::to_string(t.index) + "-" + std::to_string(index);
}

}  // namespace

void EpisodesHtml(const TargetPart& t, std::string* o) {
  *o += "<h3>Recent blocking episodes</h3>\n";
  std::string rows;
  size_t shown = 0;
  for (auto it = t.events.rbegin(); it != t.events.rend() && shown < kPageEpisodes; ++it) {
    const Event& e = **it;
    const bool deadlock = e.kind == EventKind::kDeadlock;
    if ((e.kind != EventKind::kBlockingEpisode && !deadlock) || FromServerLog(e)) continue;
    ++shown;
    const std::string how = deadlock ? "deadlock" : EventOutcomeName(e.outcome);
    rows += "<tr><td>" + H(Utc(deadlock ? e.time : e.started)) + "</td><td>" +
            (deadlock ? "" : H(Secs(e.duration))) + "</td><td>" +
            H(EventWho(e.previous, e.previous_holder)) + " (" + H(e.datname) + ")</td><td>" +
            (deadlock ? "" : std::to_string(e.peak_blocked)) + "</td><td>" +
            (deadlock ? "" : H(Secs(e.longest_wait))) + "</td><td>" + H(how) +
            (e.cause == EventCause::kNone ? "" : " <b>" + H(EventCauseName(e.cause)) + "</b>") +
            (e.detail.empty() ? "" : "<br>" + H(e.detail)) + "</td></tr>\n";
  }
  if (rows.empty()) {
    *o +=
        "<p>None seen since the exporter started (episodes shorter than a poll are not "
        "seen).</p>\n";
    return;
  }
  *o +=
      "<table><tr><th>started (database clock)</th><th>lasted</th><th>root</th><th>peak "
      "blocked</th><th>longest wait</th><th>ended</th></tr>\n" +
      rows + "</table>\n";
}

void LoggedHtml(const TargetPart& t, std::string* o) {
  *o += "<h3>Between polls (from the server's log)</h3>\n";
  if (!t.snap->server_log) {
    *o +=
        "<p class=note>Not read: this target has no <code>[targets.server_log]</code>. Lock "
        "waits, lock timeouts and deadlocks that begin and end between two polls are only in the "
        "server's log; the README's section \"The server's log\" says how to let the exporter "
        "read it (<a href=\"/runbooks/README#the-servers-log\">in short</a>).</p>\n";
    return;
  }
  LogReaderHtml(*t.snap->server_log, o);
  const std::vector<const Event*> logged = LoggedEvents(t);
  if (logged.empty()) {
    *o +=
        "<p>None since the exporter started (the server logs a wait once it outlasts "
        "deadlock_timeout, and only with log_lock_waits on).</p>\n";
    return;
  }
  *o +=
      "<table><tr><th>time (database clock)</th><th>what</th><th>lock</th><th>waiter (gave "
      "up, cancelled)</th><th>holder</th><th>waited</th><th>detail</th></tr>\n";
  for (const Event* e : logged) *o += LoggedRowHtml(*e);
  *o += "</table>\n";
}

MarkerHref EventHref(const TargetPart& t) {
  std::map<std::tuple<EventKind, double, int, int>, size_t> shown;
  const size_t first = t.events.size() > kPageEvents ? t.events.size() - kPageEvents : 0;
  for (size_t i = first; i < t.events.size(); ++i) {
    const Event& e = *t.events[i];
    shown.emplace(std::make_tuple(e.kind, e.time, e.previous.pid, e.current.pid), i);
  }
  return [&t, shown = std::move(shown)](const TimelineMarker& m) -> std::string {
    if (!m.event_kind) return "";
    auto it =
        shown.find(std::make_tuple(*m.event_kind, m.event_time, m.previous_pid, m.current_pid));
    return it == shown.end() ? "" : "#" + EventAnchor(t, it->second);
  };
}

void EventsHtml(const TargetPart& t, std::string* o) {
  *o += "<h3>Recent events</h3>\n";
  if (t.events.empty()) {
    *o += "<p>None since the exporter started.</p>\n";
    return;
  }
  *o +=
      "<table><tr><th>time (database clock)</th><th>event</th><th>lock / lease</th><th>before"
      "</th><th>after</th></tr>\n";
  size_t shown = 0;
  for (auto it = t.events.rbegin(); it != t.events.rend() && shown < kPageEvents; ++it, ++shown) {
    const Event& e = **it;
    const size_t index = static_cast<size_t>(t.events.rend() - it) - 1;
    // Red: what pages, and what returned an error to an application (a statement that gave up
    // on a lock, a transaction a deadlock rolled back).
    const EventKindInfo& kind = InfoOf(e.kind);
    const bool same_word = std::string_view(EventCauseName(e.cause)) == kind.name;
    *o +=
        "<tr id=\"" + EventAnchor(t, index) + "\"><td>" + H(Utc(e.time)) + "</td><td" +
        (kind.pages ? " class=down" : "") + ">" + H(kind.name) +
        (e.outcome == EventOutcome::kNone ? "" : " " + H(EventOutcomeName(e.outcome))) +
        (e.cause == EventCause::kNone || same_word ? ""
                                                   : " <b>" + H(EventCauseName(e.cause)) + "</b>") +
        (e.evidence == EndEvidence::kNone
             ? ""
             : std::string(" <small>(") + EndEvidenceLabel(e.evidence) + ")</small>") +
        "</td><td>" + "<span class=lock>" + H(e.lock.empty() ? e.lease : e.lock) + "</span> " +
        H(e.table.empty() ? e.datname : e.table) + "</td><td>" +
        H(EventWho(e.previous, e.previous_holder)) + "</td><td>" +
        H(EventWho(e.current, e.current_holder)) + "</td></tr>\n";
  }
  *o += "</table>\n";
}

}  // namespace pglock
