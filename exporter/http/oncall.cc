#include "exporter/http/oncall.h"

#include <algorithm>
#include <map>
#include <set>

#include "exporter/events/event_log.h"
#include "exporter/http/page_text.h"
#include "exporter/http/timeline_page.h"
#include "exporter/snapshot/verdict.h"

namespace pglock {
namespace {

// How deep the forest is followed: a chain longer than this is cut (and a cycle is a deadlock,
// which PostgreSQL resolves within deadlock_timeout).
constexpr int kMaxForestDepth = 32;

struct LeaseItem {
  std::string table;
  const LeaseView* lease;
  const char* state;  // "expired", "expiring", "held too long"
};

// What one target shows after ?lock= narrowed it.
struct TargetPart {
  const TargetSnapshot* snap = nullptr;
  size_t index = 0;  // among the targets shown: names the page's anchors
  LocksFilter filter;
  std::vector<LockWaitEdge> waits;  // of every lock type
  std::vector<WaitNode> forest;
  std::vector<const HeldLock*> held;
  std::vector<const IdleHolder*> idle;
  std::vector<std::pair<std::string, const PooledLockRow*>> pooled;  // pooler, lock
  size_t pooled_total = 0;                                           // before kPagePooledLocks
  std::vector<LeaseItem> leases;
  size_t leases_total = 0;  // needing a look, before kPageLeases
  int64_t leases_fine = 0;  // held leases needing no look
  std::vector<const RowLockHolder*> row_locks;
  std::vector<const Event*> events;           // oldest first
  const LockTableView* lock_table = nullptr;  // when full or filling (ShowLockTable)
  int64_t waiters = 0;                        // advisory, exact, over the target's databases
  int64_t lock_waiters = 0;                   // every lock type, exact
  int64_t held_total = 0;
};

bool Match(const std::string& want, const std::string& have) {
  return want.empty() || want == have;
}

const char* LeaseState(const LeaseTableView& table, const LeaseView& l) {
  const double too_long = table.max_hold > 0 ? table.max_hold : kLeaseHeldTooLongSeconds;
  // A lease without an expiry (held_sql, row_lock) is held until its row says otherwise.
  if (!table.has_expiry || !l.expires_in)
    return l.held && l.age > too_long ? "held too long" : nullptr;
  if (!l.held || *l.expires_in <= 0) return "expired";
  if (*l.expires_in < kLeaseExpiringSeconds) return "expiring";
  if (l.age > too_long) return "held too long";
  return nullptr;
}

// The lock table of a target whose table is full (its polls fail with SQLSTATE 53200) or filling
// (kLockTableFillingRatio of its slots used), null otherwise.
const LockTableView* ShowLockTable(const TargetSnapshot& snap) {
  if (!snap.lock_table || !snap.lock_table->counted || !(snap.up || snap.lock_table_full))
    return nullptr;
  const LockTableView& v = *snap.lock_table;
  const bool filling = v.slots > 0 && static_cast<double>(v.entries) >=
                                          kLockTableFillingRatio * static_cast<double>(v.slots);
  return snap.lock_table_full || filling ? &v : nullptr;
}

TargetPart Select(const TargetSnapshot& snap, const LocksFilter& f) {
  TargetPart t;
  t.snap = &snap;
  t.lock_table = ShowLockTable(snap);
  if (snap.events) {
    for (const auto& e : *snap.events) {
      if (f.lock.empty() || e->lock == f.lock || e->lease == f.lock) t.events.push_back(e.get());
    }
  }
  if (!snap.view) return t;
  const TargetView& v = *snap.view;
  for (const auto& [db, agg] : v.databases) {
    t.waiters += agg.advisory_waiters;
    t.held_total += agg.advisory_locks_held;
  }
  for (const auto& [key, w] : v.lock_waits_by_type) t.lock_waiters += w.waiters;
  std::set<int> pids;  // sessions involved with the lock asked for
  for (const LockWaitEdge& w : v.lock_waits) {
    if (!f.lock.empty() && f.lock != w.lock && f.lock != w.relation) continue;
    t.waits.push_back(w);
    pids.insert(w.blocker.id.pid);
  }
  t.forest = BuildWaitForest(t.waits, v.blocking_roots);
  for (const HeldLock& h : v.held) {
    if (!Match(f.lock, h.lock)) continue;
    t.held.push_back(&h);
    pids.insert(h.holder.pid);
  }
  for (const RowLockHolder& r : v.row_locks) {
    if (!Match(f.lock, r.lease)) continue;
    t.row_locks.push_back(&r);
    pids.insert(r.holder.pid);
  }
  for (const IdleHolder& h : v.idle_holders) {
    if (f.lock.empty() || pids.count(h.holder.pid) != 0) t.idle.push_back(&h);
  }
  for (const PoolerView& p : v.poolers) {
    for (const PooledLockRow& l : p.locks) {
      if (Match(f.lock, l.lock)) t.pooled.push_back({p.name, &l});
    }
  }
  // Inherited first, then the longest held.
  t.pooled_total = t.pooled.size();
  std::stable_sort(t.pooled.begin(), t.pooled.end(), [](const auto& a, const auto& b) {
    if (a.second->inherited != b.second->inherited)
      return a.second->inherited > b.second->inherited;
    return a.second->seconds > b.second->seconds;
  });
  if (t.pooled.size() > kPagePooledLocks) t.pooled.resize(kPagePooledLocks);
  for (const LeaseTableView& table : v.leases) {
    for (const LeaseView& l : table.leases) {
      if (!Match(f.lock, l.lease)) continue;
      if (const char* state = LeaseState(table, l)) {
        t.leases.push_back({table.table, &l, state});
      } else {
        ++t.leases_fine;
      }
    }
  }
  // A job queue's thousands of expired rows must not make the page: the worst first.
  const auto rank = [](const LeaseItem& l) {
    return std::string_view(l.state) == "expired" ? 0 : l.state[0] == 'h' ? 1 : 2;
  };
  std::stable_sort(t.leases.begin(), t.leases.end(), [&](const LeaseItem& a, const LeaseItem& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a.lease->age > b.lease->age;
  });
  t.leases_total = t.leases.size();
  if (t.leases.size() > kPageLeases) t.leases.resize(kPageLeases);
  return t;
}

std::vector<TargetPart> SelectAll(const SnapshotList& snapshots, const LocksFilter& f) {
  std::vector<TargetPart> out;
  for (const auto& s : snapshots) {
    if (!s || !Match(f.target, s->target)) continue;
    out.push_back(Select(*s, f));
    out.back().index = out.size() - 1;
    out.back().filter = f;
  }
  return out;
}

// A party's node in the forest: its pid; for a prepared transaction (pid 0) its gid and database.
std::string NodeKey(const LockParticipant& p) {
  return p.id.pid != 0 ? std::to_string(p.id.pid) : "prepared:" + p.gid + ":" + p.datname;
}

using EdgesByBlocker = std::multimap<std::string, const LockWaitEdge*>;

// Hangs the waiters of `node` below it, and theirs below them; *shown collects every node placed.
void Grow(WaitNode* node, const EdgesByBlocker& by_blocker, std::set<std::string>* on_path,
          std::set<std::string>* shown, int depth) {
  if (depth >= kMaxForestDepth) return;
  const auto [begin, end] = by_blocker.equal_range(NodeKey(node->who));
  for (auto it = begin; it != end; ++it) {
    const LockWaitEdge& e = *it->second;
    const std::string key = NodeKey(e.waiter);
    if (on_path->count(key) != 0) continue;  // a cycle
    WaitNode child{e.waiter, e.locktype, e.mode, e.relation, e.lock, e.seconds, 0, {}};
    if (child.who.datname.empty()) child.who.datname = e.datname;
    shown->insert(key);
    on_path->insert(key);
    Grow(&child, by_blocker, on_path, shown, depth + 1);
    on_path->erase(key);
    node->waiters.push_back(std::move(child));
  }
}

// --- HTML ---

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

// The verdict on a root: the command to copy, what it frees and what it costs.
void VerdictHtml(const Verdict& v, std::string* o) {
  *o += "<div class=verdict><b>Do:</b> ";
  if (v.command.empty()) {
    *o += v.action == VerdictAction::kLeaveAlone ? "<b>leave it alone</b>"
          : v.action == VerdictAction::kWait     ? "<b>wait</b>"
                                                 : "investigate";
  } else {
    *o += "<code class=cmd>" + H(v.command) + "</code>";
  }
  if (!v.then.empty()) *o += " &mdash; then " + H(v.then);
  *o += "<br><b>Frees</b> " + std::to_string(v.frees) + " &middot; <b>Cost:</b> " + H(v.cost) +
        "</div>";
}

// The session with the most entries among the top ones, with its entries; null when none but
// prepared transactions (no session to end).
std::pair<const SessionLockTableEntries*, int64_t> TopFiller(const LockTableView& v) {
  std::map<int, int64_t> by_pid;
  for (const SessionLockTableEntries& e : v.sessions) by_pid[e.session.pid] += e.entries;
  const SessionLockTableEntries* top = nullptr;
  for (const SessionLockTableEntries& e : v.sessions) {
    if (e.session.pid == 0) continue;
    if (top == nullptr || by_pid[e.session.pid] > by_pid[top->session.pid]) top = &e;
  }
  return {top, top == nullptr ? 0 : by_pid[top->session.pid]};
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

std::string EventWho(const Identity& id, const std::string& holder) {
  if (id.pid != 0) {
    return "pid " + std::to_string(id.pid) + " " + id.application_name + " " + id.usename + "@" +
           Addr(id.client_addr) + (holder.empty() ? "" : " (" + holder + ")");
  }
  return holder;
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
        "</tr>\n";
    for (const IdleHolder* h : t.idle) {
      *o += "<tr><td" + std::string(h->remaining && *h->remaining < 60 ? " class=down" : "") + ">" +
            (h->remaining ? H(Secs(*h->remaining)) : "no timeout") + "</td><td>" +
            H(Secs(h->seconds)) + "</td><td>" + WhoHtml(h->holder) + "</td><td>" + H(h->datname) +
            "</td><td>" + H(h->holds) + "</td></tr>\n";
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
  *o += "<div class=verdict><b>Do:</b> <code class=cmd>" + H(verdict.command) + "</code>";
  if (!verdict.then.empty()) *o += " &mdash; then " + H(verdict.then);
  *o += "<br><b>Frees</b> " + std::to_string(entries) + " entries &middot; <b>Cost:</b> " +
        H(verdict.cost) + "</div>\n";
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

// A lock wait, lock timeout or deadlock that the server's log told (the poll-seen deadlock
// cycle of a target without a log is a blocking-episode row instead).
bool FromServerLog(const Event& e) {
  return e.evidence == EndEvidence::kLog &&
         (e.kind == EventKind::kLockWait || e.kind == EventKind::kLockTimeout ||
          e.kind == EventKind::kDeadlock);
}

// The newest events the server's log told, newest first, as many as the page shows.
std::vector<const Event*> LoggedEvents(const TargetPart& t) {
  std::vector<const Event*> out;
  for (auto it = t.events.rbegin(); it != t.events.rend() && out.size() < kPageLogged; ++it) {
    if (FromServerLog(**it)) out.push_back(*it);
  }
  return out;
}

// The newest blocking episodes and deadlock cycles a poll saw, newest first.
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

// The newest lock waits, lock timeouts and deadlocks the server's log told, newest first; or
// how to let the exporter read that log.
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

// The id of the event row of t.events[index] ("ev-<target's index>-<index>").
std::string EventAnchor(const TargetPart& t, size_t index) {
  return "ev-" + std::to_string(t.index) + "-" + std::to_string(index);
}

// A timeline marker's link: the row of the recorded event it came from, when the page shows it.
MarkerHref EventHref(const TargetPart& t) {
  std::map<std::tuple<std::string, double, int, int>, size_t> shown;
  const size_t first = t.events.size() > kPageEvents ? t.events.size() - kPageEvents : 0;
  for (size_t i = first; i < t.events.size(); ++i) {
    const Event& e = *t.events[i];
    shown.emplace(
        std::make_tuple(std::string(EventKindName(e.kind)), e.time, e.previous.pid, e.current.pid),
        i);
  }
  return [&t, shown = std::move(shown)](const TimelineMarker& m) -> std::string {
    auto it =
        shown.find(std::make_tuple(m.event_kind, m.event_time, m.previous_pid, m.current_pid));
    return it == shown.end() ? "" : "#" + EventAnchor(t, it->second);
  };
}

// The newest events, newest first.
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

// --- JSON ---

std::string IdentityJson(const Identity& id) {
  std::string o = "\"pid\":" + std::to_string(id.pid) +
                  ",\"application_name\":" + J(id.application_name) +
                  ",\"usename\":" + J(id.usename) + ",\"client_addr\":" + J(id.client_addr) +
                  ",\"state\":" + J(id.state);
  if (!id.query.empty()) o += ",\"query\":" + J(id.query);
  return o;
}

std::string VerdictJson(const Verdict& v) {
  std::string locks = "[";
  for (size_t i = 0; i < v.dropped_locks.size() && i < kPageDroppedLocks; ++i) {
    locks += (locks.size() > 1 ? "," : "") + J(v.dropped_locks[i]);
  }
  return "{\"action\":" + J(VerdictActionName(v.action)) + ",\"pid\":" + std::to_string(v.pid) +
         ",\"command\":" + J(v.command) + ",\"then\":" + J(v.then) +
         ",\"then_command\":" + J(v.then_command) + ",\"pooler\":" + J(v.pooler) +
         ",\"frees\":" + std::to_string(v.frees) + ",\"cost\":" + J(v.cost) +
         ",\"dropped_locks\":" + locks + "]" +
         ",\"dropped_locks_total\":" + std::to_string(v.dropped_locks.size()) +
         ",\"lock_timeout_seconds\":" + (v.lock_timeout > 0 ? Num(v.lock_timeout) : "null") +
         ",\"lock_timeout_source\":" + J(v.lock_timeout_source) + "}";
}

void NodeJson(const WaitNode& n, std::string* o) {
  const LockParticipant& p = n.who;
  *o += "{" + IdentityJson(p.id) + ",\"backend_type\":" + J(p.backend_type) +
        ",\"gid\":" + J(p.gid) + ",\"datname\":" + J(p.datname) +
        ",\"state_seconds\":" + (p.state_seconds ? Num(*p.state_seconds) : "null") +
        ",\"locktype\":" + J(n.locktype) + ",\"mode\":" + J(n.mode) +
        ",\"relation\":" + J(n.relation) + ",\"lock\":" + J(n.lock) +
        ",\"wait_seconds\":" + Num(n.seconds) +
        ",\"blocked_sessions\":" + std::to_string(n.blocked);
  if (n.verdict != nullptr) *o += ",\"verdict\":" + VerdictJson(*n.verdict);
  *o += ",\"waiters\":[";
  for (size_t i = 0; i < n.waiters.size(); ++i) {
    if (i > 0) *o += ",";
    NodeJson(n.waiters[i], o);
  }
  *o += "]}";
}

std::string HeldJson(const HeldLock& h) {
  return "{\"lock\":" + J(h.lock) + ",\"datname\":" + J(h.datname) + "," + IdentityJson(h.holder) +
         ",\"scope\":" + J(h.scope) + ",\"held_seconds\":" + Num(h.seconds) + "}";
}

std::string RowLockJson(const RowLockHolder& r) {
  return "{\"table\":" + J(r.table) + ",\"lease\":" + J(r.lease) + "," + IdentityJson(r.holder) +
         ",\"held_seconds\":" + Num(r.seconds) +
         ",\"transaction_seconds\":" + (r.xact_seconds ? Num(*r.xact_seconds) : "null") + "}";
}

std::string IdleJson(const IdleHolder& h) {
  return "{\"datname\":" + J(h.datname) + "," + IdentityJson(h.holder) +
         ",\"holds\":" + J(h.holds) + ",\"idle_seconds\":" + Num(h.seconds) +
         ",\"timeout_remaining_seconds\":" + (h.remaining ? Num(*h.remaining) : "null") + "}";
}

std::string PooledJson(const std::string& pooler, const PooledLockRow& l) {
  return "{\"pooler\":" + J(pooler) + ",\"database\":" + J(l.database) + ",\"user\":" + J(l.user) +
         ",\"lock\":" + J(l.lock) + ",\"pid\":" + std::to_string(l.pid) +
         ",\"first_client\":" + J(l.first_client) + ",\"current_client\":" + J(l.current_client) +
         ",\"held_seconds\":" + Num(l.seconds) + ",\"inherited\":" + std::to_string(l.inherited) +
         "}";
}

std::string LeaseJson(const LeaseItem& l) {
  return "{\"table\":" + J(l.table) + ",\"lease\":" + J(l.lease->lease) +
         ",\"state\":" + J(l.state) + ",\"holder\":" + J(l.lease->holder) +
         ",\"age_seconds\":" + Num(l.lease->age) +
         ",\"expires_in_seconds\":" + (l.lease->expires_in ? Num(*l.lease->expires_in) : "null") +
         "}";
}

std::string ServerLogJson(const ServerLogStatus& log) {
  return "{\"up\":" + std::string(log.up ? "true" : "false") + ",\"error\":" + J(log.error) +
         ",\"format\":" + J(log.format) +
         ",\"untranslated\":" + (log.untranslated ? "true" : "false") +
         ",\"dropped\":" + Count(log.dropped) + "}";
}

std::string LockTableJson(const TargetSnapshot& s, const LockTableView& v) {
  std::string o = "{\"full\":" + std::string(s.lock_table_full ? "true" : "false") +
                  ",\"entries\":" + std::to_string(v.entries) +
                  ",\"slots\":" + std::to_string(v.slots) + ",\"age_seconds\":" + Num(v.age) +
                  ",\"sessions\":";
  JsonArray(
      v.sessions,
      [&](const SessionLockTableEntries& e) {
        o += "{\"datname\":" + J(e.datname) + "," + IdentityJson(e.session) +
             ",\"locktype\":" + J(e.locktype) + ",\"entries\":" + std::to_string(e.entries) +
             ",\"pooler\":" + (e.pooled ? J(e.pooled->pooler) : "null") + "}";
      },
      &o);
  const auto [top, entries] = TopFiller(v);
  o += ",\"verdict\":" + (top == nullptr ? "null" : VerdictJson(LockTableVerdict(*top, entries)));
  return o + "}";
}

void TargetJson(const TargetPart& t, std::string* o) {
  const TargetSnapshot& s = *t.snap;
  *o += "{\"target\":" + J(s.target) + ",\"up\":" + (s.up ? "true" : "false") +
        ",\"state\":" + J(s.state) + ",\"last_error\":" + J(s.up ? "" : s.last_error) +
        ",\"server_version\":" + J(s.server_version) +
        ",\"lock_waiters\":" + std::to_string(t.lock_waiters) +
        ",\"advisory_waiters\":" + std::to_string(t.waiters) +
        ",\"advisory_locks_held\":" + std::to_string(t.held_total) +
        ",\"lock_table\":" + (t.lock_table != nullptr ? LockTableJson(s, *t.lock_table) : "null") +
        ",\"wait_forest\":";
  JsonArray(
      t.forest, [&](const WaitNode& n) { NodeJson(n, o); }, o);
  *o += ",\"held\":";
  JsonArray(
      t.held, [&](const HeldLock* h) { *o += HeldJson(*h); }, o);
  *o += ",\"row_locks\":";
  JsonArray(
      t.row_locks, [&](const RowLockHolder* r) { *o += RowLockJson(*r); }, o);
  *o += ",\"idle_in_transaction\":";
  JsonArray(
      t.idle, [&](const IdleHolder* h) { *o += IdleJson(*h); }, o);
  *o += ",\"pooled_locks\":";
  JsonArray(
      t.pooled,
      [&](const std::pair<std::string, const PooledLockRow*>& p) {
        *o += PooledJson(p.first, *p.second);
      },
      o);
  *o += ",\"pooled_locks_total\":" + std::to_string(t.pooled_total);
  *o += ",\"leases\":";
  JsonArray(
      t.leases, [&](const LeaseItem& l) { *o += LeaseJson(l); }, o);
  // The newest kPageEvents, oldest first (all of them: /api/v1/events).
  const std::vector<const Event*> recent(
      t.events.end() - static_cast<std::ptrdiff_t>(std::min(t.events.size(), kPageEvents)),
      t.events.end());
  *o += ",\"leases_total\":" + std::to_string(t.leases_total) +
        ",\"leases_held_normally\":" + std::to_string(t.leases_fine) + ",\"events\":";
  JsonArray(
      recent, [&](const Event* e) { *o += EventJson(*e); }, o);
  *o += ",\"events_total\":" + std::to_string(t.events.size());
  *o += ",\"server_log\":" + (s.server_log ? ServerLogJson(*s.server_log) : "null");
  *o += ",\"between_polls\":";
  JsonArray(
      LoggedEvents(t), [&](const Event* e) { *o += EventJson(*e); }, o);
  *o += "}";
}

const char* kStyle =
    "body{font-family:sans-serif;margin:0;padding:.5em;font-size:15px}"
    "h1{font-size:1.3em;margin:.2em 0}h2{font-size:1.15em;border-bottom:2px solid #888}"
    "h3{font-size:1em;margin:.8em 0 .3em}section{margin-bottom:1.5em}"
    "table{border-collapse:collapse;display:block;overflow-x:auto;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:.2em .4em;text-align:left;vertical-align:top}"
    "ul.forest,ul.forest ul{padding-left:1.2em}ul.forest li{margin:.2em 0}"
    ".up{color:#070}.down{color:#b00}.lock{font-family:monospace;background:#eef}"
    ".app{color:#036}.st{color:#555;font-style:italic}.note{color:#555}"
    ".root{color:#fff;background:#b00;padding:0 .3em}.mode{font-family:monospace}.bt{color:#606}"
    "pre.q{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;margin:.2em 0;"
    "padding:.2em;font-size:.9em}form input{max-width:10em}"
    ".verdict{border-left:4px solid #b00;background:#fff6e6;padding:.3em .5em;margin:.3em 0;"
    "overflow-wrap:anywhere}code.cmd{font-family:monospace;background:#222;color:#fff;"
    "padding:.15em .3em;line-height:1.7;white-space:pre-wrap;overflow-wrap:anywhere}"
    "td.detail{min-width:16em;overflow-wrap:anywhere}";

}  // namespace

std::vector<WaitNode> BuildWaitForest(const std::vector<LockWaitEdge>& edges,
                                      const std::vector<BlockingRoot>& roots) {
  EdgesByBlocker by_blocker;
  std::set<std::string> waiters;
  for (const LockWaitEdge& e : edges) {
    by_blocker.emplace(NodeKey(e.blocker), &e);
    waiters.insert(NodeKey(e.waiter));
  }
  std::map<std::string, const BlockingRoot*> known;
  for (const BlockingRoot& r : roots) known[NodeKey(r.root)] = &r;
  std::vector<WaitNode> forest;
  std::set<std::string> shown;
  const auto add_root = [&](const LockParticipant& who) {
    const std::string key = NodeKey(who);
    if (!shown.insert(key).second) return;
    WaitNode root{who, "", "", "", "", 0, 0, {}};
    if (const auto it = known.find(key); it != known.end()) {
      root.blocked = static_cast<int64_t>(it->second->blocked_pids.size());
      root.verdict = &it->second->verdict;
    }
    std::set<std::string> on_path = {key};
    Grow(&root, by_blocker, &on_path, &shown, 0);
    forest.push_back(std::move(root));
  };
  for (const LockWaitEdge& e : edges) {
    if (waiters.count(NodeKey(e.blocker)) == 0) add_root(e.blocker);
  }
  // What no root reaches waits in a cycle (a deadlock not broken yet): its first blocker met
  // stands for the root.
  for (const LockWaitEdge& e : edges) {
    if (shown.count(NodeKey(e.waiter)) == 0) add_root(e.blocker);
  }
  return forest;
}

std::string RenderLocksPage(const SnapshotList& snapshots, const LocksFilter& filter) {
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta http-equiv=\"refresh\" content=\"" +
      std::to_string(kPageRefreshSeconds) + "\"><title>Locks - pglock_exporter</title><style>" +
      kStyle + kTimelineStyle +
      "</style></head><body>\n<h1>Locks</h1>\n<p><a href=\"/\">pglock_exporter</a> &middot; "
      "<a href=\"/runbooks/README\">runbooks</a> &middot; JSON: <a href=\"/api/v1/locks\">locks"
      "</a>, <a href=\"/api/v1/events\">events</a> &middot; refreshes every " +
      std::to_string(kPageRefreshSeconds) +
      " s</p>\n<form method=get action=\"/locks\">target <input name=target value=\"" +
      H(filter.target) + "\"> lock or lease <input name=lock value=\"" + H(filter.lock) +
      "\"> <button>narrow</button></form>\n";
  const std::vector<TargetPart> parts = SelectAll(snapshots, filter);
  if (parts.empty()) o += "<p>No target matches.</p>\n";
  for (const TargetPart& t : parts) TargetHtml(t, &o);
  return o + "</body></html>\n";
}

std::string RenderLocksJson(const SnapshotList& snapshots, const LocksFilter& filter) {
  std::string o = "{\"targets\":";
  JsonArray(
      SelectAll(snapshots, filter), [&](const TargetPart& t) { TargetJson(t, &o); }, &o);
  return o + "}\n";
}

std::string RenderEventsJson(const SnapshotList& snapshots, const LocksFilter& filter) {
  std::string o = "{\"events\":[";
  bool first = true;
  for (const TargetPart& t : SelectAll(snapshots, filter)) {
    for (const Event* e : t.events) {
      if (!first) o += ",";
      first = false;
      o += EventJson(*e);
    }
  }
  return o + "]}\n";
}

}  // namespace pglock
