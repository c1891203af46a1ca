#include "exporter/http/oncall_html.h"

#include <set>

#include "exporter/http/oncall_events_html.h"
#include "exporter/http/page_text.h"
#include "exporter/http/timeline_page.h"
#include "exporter/snapshot/verdict.h"

namespace pglock {
namespace {

std::string WhoHtml(const Identity& id) {
  std::string o = "<b>pid " + std::to_string(id.pid) + "</b> <span class=app>" +
                  H(AppName(id.application_name)) + "</span> " + H(id.usename) + "@" +
                  H(Addr(id.client_addr));
  if (!id.state.empty()) o += " <span class=st>" + H(id.state) + "</span>";
  if (!id.query.empty()) o += "<pre class=q>" + H(id.query) + "</pre>";
  return o;
}

// A party to a wait: a session, a background process with its backend_type, a prepared
// transaction with its gid.
std::string PartyHtml(const LockParticipant& p) {
  if (p.id.pid == 0) {
    return "<b>prepared transaction</b> <span class=lock>" +
           H(p.gid.empty() ? "(gid not known)" : p.gid) + "</span> owner " + H(p.id.usename) +
           " <span class=st>" + H(p.id.state) + "</span>";
  }
  std::string o = WhoHtml(p.id);
  if (!p.backend_type.empty() && p.backend_type != "client backend") {
    o += " <span class=bt>" + H(p.backend_type) + "</span>";
  }
  return o;
}

// What a waiter asks for: its mode, then the advisory lock, the relation or the lock type.
std::string WantedHtml(const WaitNode& n) {
  std::string o = "<span class=mode>" + H(n.mode) + "</span> on ";
  if (n.locktype == "advisory")
    return o + "advisory lock <span class=lock>" + H(n.lock) + "</span>";
  o += H(n.locktype);
  if (!n.relation.empty()) o += " <span class=lock>" + H(n.relation) + "</span>";
  return o;
}

// What to do: the verdict's words (VerdictAdvice, what the alerts print), escaped, with its
// command and its next step's command set as code to copy.
std::string AdviceHtml(const Verdict& v) {
  std::string o = H(VerdictAdvice(v));
  size_t from = 0;
  for (const std::string* cmd : {&v.command, &v.then_command}) {
    if (cmd->empty()) continue;
    const std::string code = H(*cmd);
    const size_t at = o.find(code, from);
    if (at == std::string::npos) continue;
    const std::string wrapped = "<code class=cmd>" + code + "</code>";
    o.replace(at, code.size(), wrapped);
    from = at + wrapped.size();
  }
  return o;
}

// The verdict on a root: what to do, what it frees and what it costs.
void VerdictHtml(const Verdict& v, std::string* o) {
  *o += "<div class=verdict><b>Do:</b> " + AdviceHtml(v) + "<br><b>Frees</b> " +
        std::to_string(v.frees) + " &middot; <b>Cost:</b> " + H(v.cost) + "</div>";
}

void NodeHtml(const WaitNode& n, std::string* o) {
  *o += "<li>";
  if (!n.locktype.empty()) {
    *o += "waits <b>" + H(Secs(n.seconds)) + "</b> for " + WantedHtml(n) + " (" + H(n.who.datname) +
          "): " + PartyHtml(n.who);
  } else {
    *o += "<span class=root>root</span> " + PartyHtml(n.who);
    if (n.who.state_seconds) *o += " for <b>" + H(Secs(*n.who.state_seconds)) + "</b>";
    if (!n.who.datname.empty()) *o += " (" + H(n.who.datname) + ")";
    if (n.blocked > 0) *o += ", blocking " + std::to_string(n.blocked);
    if (n.verdict != nullptr) VerdictHtml(*n.verdict, o);
  }
  if (!n.waiters.empty()) {
    *o += "<ul>";
    for (const WaitNode& w : n.waiters) NodeHtml(w, o);
    *o += "</ul>";
  }
  *o += "</li>\n";
}

// The advisory holders and the idle-in-transaction sessions that hold or block something.
void HoldersHtml(const TargetPart& t, std::string* o) {
  *o += "<h3>Advisory lock holders (" + std::to_string(t.held_total) + ")</h3>\n";
  if (!t.held.empty()) {
    *o += "<table><tr><th>lock</th><th>held</th><th>holder</th><th>db</th><th>scope</th></tr>\n";
    for (const HeldLock* h : t.held) {
      *o += "<tr><td class=lock>" + H(h->lock) + "</td><td>" + H(Secs(h->seconds)) + "</td><td>" +
            WhoHtml({h->holder.pid, h->holder.application_name, h->holder.client_addr,
                     h->holder.usename, h->holder.state, ""}) +
            "</td><td>" + H(h->datname) + "</td><td>" + H(h->scope) + "</td></tr>\n";
    }
    *o += "</table>\n";
  }
  *o += "<h3>Rows held by open transactions</h3>\n";
  if (t.row_locks.empty()) *o += "<p>None.</p>\n";
  if (!t.row_locks.empty()) {
    *o +=
        "<table><tr><th>row</th><th>held</th><th>transaction open</th><th>holder</th>"
        "<th>table</th></tr>\n";
    for (const RowLockHolder* r : t.row_locks) {
      *o += "<tr><td class=lock>" + H(r->lease) + "</td><td>" + H(Secs(r->seconds)) + "</td><td>" +
            (r->xact_seconds ? H(Secs(*r->xact_seconds)) : "") + "</td><td>" + WhoHtml(r->holder) +
            "</td><td>" + H(r->table) + "</td></tr>\n";
    }
    *o += "</table>\n";
  }
  *o += "<h3>Idle in transaction, holding or blocking</h3>\n";
  if (t.idle.empty()) *o += "<p>None.</p>\n";
  if (!t.idle.empty()) {
    *o +=
        "<table><tr><th>time left</th><th>idle</th><th>session</th><th>db</th><th>holds</th>"
        "<th>do, if it is abandoned</th></tr>\n";
    // The verdict its alerts print (pglock_session_verdict_info, seen_as
    // idle_in_transaction_holder): its end, or its pooler's RECONNECT.
    const std::vector<PoolerView> none;
    const std::vector<PoolerView>& poolers = t.snap->view ? t.snap->view->poolers : none;
    for (const IdleHolder* h : t.idle) {
      *o += "<tr><td" + std::string(h->remaining && *h->remaining < 60 ? " class=down" : "") + ">" +
            (h->remaining ? H(Secs(*h->remaining)) : "no timeout") + "</td><td>" +
            H(Secs(h->seconds)) + "</td><td>" + WhoHtml(h->holder) + "</td><td>" + H(h->datname) +
            "</td><td>" + H(h->holds) + "</td><td class=detail>" +
            AdviceHtml(IdleHolderVerdict(*h, poolers)) + "</td></tr>\n";
    }
    *o += "</table>\n";
  }
}

// A full or filling lock table: its figures, the sessions filling it and what frees it.
void LockTableHtml(const TargetSnapshot& s, const LockTableView& v, std::string* o) {
  const double used = v.slots > 0 ? 100.0 * static_cast<double>(v.entries) / v.slots : 0;
  *o +=
      "<h3 class=down>Shared lock table " +
      std::string(s.lock_table_full ? "FULL" : Count(used) + "% used") + "</h3>\n<p>" +
      std::to_string(v.entries) + " entries used of " +
      (v.slots > 0 ? std::to_string(v.slots) + " slots (" + Count(used) + "%)" : "? slots") +
      ", figures from " + H(Secs(v.age)) + " ago" +
      (s.lock_table_full ? "; sessions needing one more lock fail with out of shared memory" : "") +
      ".</p>\n";
  if (v.sessions.empty()) return;
  *o += "<table><tr><th>entries</th><th>lock type</th><th>session</th><th>db</th></tr>\n";
  for (const SessionLockTableEntries& e : v.sessions) {
    *o += "<tr><td>" + std::to_string(e.entries) + "</td><td>" + H(e.locktype) + "</td><td>" +
          WhoHtml(e.session) +
          (e.pooled ? " <span class=bt>pooler " + H(e.pooled->pooler) + "</span>" : "") +
          "</td><td>" + H(e.datname) + "</td></tr>\n";
  }
  *o += "</table>\n";
  const auto [top, entries] = TopFiller(v);
  if (top == nullptr) return;
  const Verdict verdict = LockTableVerdict(*top, entries);
  *o += "<div class=verdict><b>Do:</b> " + AdviceHtml(verdict) + "<br><b>Frees</b> " +
        std::to_string(entries) + " entries &middot; <b>Cost:</b> " + H(verdict.cost) + "</div>\n";
}

// Session locks on pooled connections and the leases that need a look.
void PooledAndLeasesHtml(const TargetPart& t, std::string* o) {
  if (!t.pooled.empty()) {
    *o +=
        "<h3>Session locks on pooled connections</h3>\n<table><tr><th>lock</th><th>pooler"
        "</th><th>pool</th><th>server pid</th><th>first client</th><th>current client</th>"
        "<th>held</th><th>inherited</th></tr>\n";
    for (const auto& [pooler, l] : t.pooled) {
      *o += "<tr><td class=lock>" + H(l->lock) + "</td><td>" + H(pooler) + "</td><td>" +
            H(l->database) + "/" + H(l->user) + "</td><td>" + std::to_string(l->pid) + "</td><td>" +
            H(l->first_client) + "</td><td>" + H(l->current_client) + "</td><td>" +
            H(Secs(l->seconds)) + "</td><td>" + std::to_string(l->inherited) + "</td></tr>\n";
    }
    *o += "</table>\n";
    if (t.pooled_total > t.pooled.size()) {
      *o += "<p>" + std::to_string(t.pooled_total - t.pooled.size()) +
            " more session locks on pooled connections (" + std::to_string(t.pooled_total) +
            " in all; inherited and longest held first).</p>\n";
    }
  }
  *o += "<h3>Leases needing a look</h3>\n";
  if (!t.leases.empty()) {
    *o +=
        "<table><tr><th>lease</th><th>state</th><th>expires in</th><th>age</th><th>holder"
        "</th><th>table</th></tr>\n";
    for (const LeaseItem& l : t.leases) {
      *o += "<tr><td class=lock>" + H(l.lease->lease) + "</td><td class=down>" + l.state +
            "</td><td>" + H(l.lease->expires_in ? Secs(*l.lease->expires_in) : "no expiry") +
            "</td><td>" + H(Secs(l.lease->age)) + "</td><td>" + H(l.lease->holder) + "</td><td>" +
            H(l.table) + "</td></tr>\n";
    }
    *o += "</table>\n";
    if (t.leases_total > t.leases.size()) {
      *o += "<p>" + std::to_string(t.leases_total - t.leases.size()) +
            " more leases need a look (" + std::to_string(t.leases_total) +
            " in all; expired, then held too long, then expiring; oldest first).</p>\n";
    }
  }
  *o += "<p>" + std::to_string(t.leases_fine) + " other leases held normally.</p>\n";
}

}  // namespace

void TargetHtml(const TargetPart& t, std::string* o) {
  const TargetSnapshot& s = *t.snap;
  *o += "<section><h2>" + H(s.target) + " <span class=\"" + (s.up ? "up" : "down") + "\">" +
        H(s.state) + "</span></h2>\n";
  if (!s.up && !s.last_error.empty()) *o += "<p class=down>" + H(s.last_error) + "</p>\n";
  if (t.lock_table != nullptr) LockTableHtml(s, *t.lock_table, o);
  if (s.view) {
    *o += "<h3>Lock waits (" + std::to_string(t.lock_waiters) + " waiting, " +
          std::to_string(t.waiters) + " of them on advisory locks)</h3>\n";
    if (t.forest.empty()) {
      *o += "<p>Nobody waits.</p>\n";
    } else {
      *o += "<ul class=forest>\n";
      for (const WaitNode& n : t.forest) NodeHtml(n, o);
      *o += "</ul>\n";
    }
    std::set<std::string> shown_waiters;
    for (const LockWaitEdge& e : t.waits) shown_waiters.insert(NodeKey(e.waiter));
    if (static_cast<int64_t>(shown_waiters.size()) < t.lock_waiters) {
      *o += "<p class=note>The longest waits are shown (poll.top_n).</p>\n";
    }
    HoldersHtml(t, o);
    PooledAndLeasesHtml(t, o);
  }
  TimelineHtml(s, t.filter, t.filter.since, EventHref(t), o);
  EpisodesHtml(t, o);
  LoggedHtml(t, o);
  EventsHtml(t, o);
  *o += "</section>\n";
}

std::string PreflightHtml(const PreflightAnswer& a) {
  std::string o = "<section><h2>Before a migration: <span class=mode>" + H(a.mode) +
                  "</span> on <span class=lock>" + H(a.table) + "</span> (" + H(a.target) +
                  ")</h2>\n<p><b>" + H(a.verdict) + "</b>: " + H(a.advice) + "</p>\n";
  if (!a.conflicts.empty()) {
    o += "<ul class=forest>";
    for (const PreflightParty& p : a.conflicts) {
      o += "<li>" + PartyHtml(p.who) + " " + (p.granted ? "holds" : "waits for") +
           " <span class=mode>" + H(p.mode) + "</span>";
      if (p.root_pid != p.who.id.pid) o += " (behind pid " + std::to_string(p.root_pid) + ")";
      if (p.root_pid == p.who.id.pid) VerdictHtml(p.verdict, &o);
      o += "</li>";
    }
    o += "</ul>\n";
  }
  return o + "<p class=note>JSON and pipelines: <a href=\"/api/v1/preflight?table=" +
         H(UrlEncode(a.table)) + "&amp;target=" + H(UrlEncode(a.target)) +
         "\">/api/v1/preflight</a>.</p></section>\n";
}

}  // namespace pglock
