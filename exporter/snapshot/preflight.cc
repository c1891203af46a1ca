#include "exporter/snapshot/preflight.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "exporter/snapshot/verdict.h"
#include "exporter/util/duration.h"

namespace pglock {
namespace {

// PostgreSQL's conflict table (the "Conflicting Lock Modes" table of its documentation, and
// LockConflicts in its lock.c): bit j (from the right) of kConflicts[i] is set when mode i
// conflicts with mode j, both indexes into kTableLockModes.
constexpr unsigned kConflicts[] = {
    0b10000000,  // AccessShare: AccessExclusive
    0b11000000,  // RowShare: Exclusive, AccessExclusive
    0b11110000,  // RowExclusive: Share and stronger
    0b11111000,  // ShareUpdateExclusive: itself and stronger
    0b11101100,  // Share: RowExclusive, ShareUpdateExclusive, ShareRowExclusive and stronger
    0b11111100,  // ShareRowExclusive: RowExclusive and stronger
    0b11111110,  // Exclusive: RowShare and stronger
    0b11111111,  // AccessExclusive: everything
};

int ModeIndex(const std::string& mode) {
  for (int i = 0; i < 8; ++i) {
    if (mode == kTableLockModes[i]) return i;
  }
  return -1;
}

std::string Seconds(double s) {
  return FormatDuration(Duration(static_cast<int64_t>(std::llround(std::max(0.0, s)) * 1000)));
}

// The verdict's facts for a party that is not a root of the view (it blocks nobody yet): what
// on-call would be told, were the DDL queued behind it.
Verdict VerdictAsRoot(const PreflightParty& p, const RelationLock& l, const PollData& data,
                      const Session* s, const TargetView& view) {
  RootFacts f;
  f.root = p.who;
  f.activity_query = l.activity_query;
  f.state_seconds = p.who.state_seconds.value_or(0);
  if (s != nullptr && s->xact_start) f.xact_seconds = std::max(0.0, data.now - *s->xact_start);
  f.pooled = PooledConnectionOf(p.who.id.pid, view.poolers);
  return DecideVerdict(f);
}

PreflightParty PartyOf(const RelationLock& l, const PollData& data, const PollIndex& index,
                       const TargetView& view) {
  PreflightParty p;
  p.mode = l.mode;
  p.granted = l.granted;
  if (l.waitstart) p.waited_seconds = std::max(0.0, data.now - *l.waitstart);
  const Session* s = l.pid != 0 ? index.Find(l.pid) : nullptr;
  if (l.pid == 0) {
    p.who.id.state = "prepared";
    p.who.gid = l.gid;
    p.who.backend_type = "prepared transaction";
  } else {
    p.who.id = IdentityOf(s, l.pid);
    if (s == nullptr) {
      // Not a client backend the poll saw: an autovacuum worker, another background process, or
      // a session that started since.
      p.who.backend_type = l.backend_type;
      p.who.id.state = l.state;
      if (l.state_change) p.who.state_seconds = std::max(0.0, data.now - *l.state_change);
      if (l.backend_type == "client backend" && l.state == "active") {
        p.statement_seconds = p.who.state_seconds;
      }
    }
  }
  if (s != nullptr) {
    p.who.datname = s->datname;
    if (s->state_change) p.who.state_seconds = std::max(0.0, data.now - *s->state_change);
    if (s->IdleInTransaction()) p.idle_in_transaction_seconds = p.who.state_seconds;
    if (s->state == "active" && s->query_start) {
      p.statement_seconds = std::max(0.0, data.now - *s->query_start);
    }
  }
  for (const PoolerData& pooler : data.poolers) {
    for (const PooledServer& server : pooler.servers) {
      if (server.remote_pid == l.pid && l.pid != 0) {
        p.pooled = PooledConnection{pooler.name, server.database, server.user, server.linked_client,
                                    server.linked_client};
      }
    }
  }
  // The root of its chain, and the on-call page's verdict for that root.
  p.root_pid = l.pid;
  for (const BlockingRoot& r : view.blocking_roots) {
    const bool is_root = r.root.id.pid == l.pid && l.pid != 0;
    if (is_root || std::binary_search(r.blocked_pids.begin(), r.blocked_pids.end(), l.pid)) {
      p.root_pid = r.root.id.pid;
      p.verdict = r.verdict;
      return p;
    }
  }
  p.verdict = VerdictAsRoot(p, l, data, s, view);
  return p;
}

std::string Who(const PreflightParty& p) {
  if (p.who.id.pid == 0) return "prepared transaction '" + p.who.gid + "'";
  std::string o = "pid " + std::to_string(p.who.id.pid);
  if (!p.who.id.application_name.empty()) o += " (" + p.who.id.application_name + ")";
  if (p.idle_in_transaction_seconds) {
    o += ", idle in transaction for " + Seconds(*p.idle_in_transaction_seconds);
  } else if (p.statement_seconds) {
    o += ", running a statement for " + Seconds(*p.statement_seconds);
  } else if (p.waited_seconds) {
    o += ", waiting for " + Seconds(*p.waited_seconds);
  } else if (!p.who.id.state.empty()) {
    o += ", " + p.who.id.state;
  }
  return o + (p.granted ? " holds " : " waits for ") + p.mode;
}

std::string Advice(const PreflightAnswer& a) {
  std::string o;
  if (a.verdict == "clear") {
    o = "nothing holds or waits for a lock on " + a.table + " that conflicts with " + a.mode +
        ": it would be granted at once, as of this poll.";
  } else {
    o = a.mode + " on " + a.table + " would wait for " + std::to_string(a.conflicts.size()) +
        (a.conflicts.size() == 1 ? " session: " : " sessions: ");
    for (size_t i = 0; i < a.conflicts.size() && i < 3; ++i) {
      const PreflightParty& p = a.conflicts[i];
      o += (i > 0 ? "; " : "") + Who(p);
      if (!p.verdict.command.empty() && p.root_pid == p.who.id.pid) {
        o += " (to end it: " + p.verdict.command + ")";
      }
    }
    if (a.conflicts.size() > 3) o += "; and " + std::to_string(a.conflicts.size() - 3) + " more";
    o += ".";
    if (a.verdict == "would_block") {
      o += a.waiting.empty()
               ? " The table is in use (its holders are running statements): while the DDL "
                 "waits, every new query of the table that conflicts with it queues behind it."
               : " Sessions already wait for locks on the table: the DDL would queue behind "
                 "them, and every new query of the table that conflicts with it behind the DDL.";
    }
  }
  if (a.role.empty()) {
    o += " Give ?role= (the migration's role) to see the lock_timeout it would run with.";
  } else if (a.lock_timeout.seconds <= 0) {
    o += " No lock_timeout for role " + a.role +
         ": a queued DDL would block the table's readers until its blockers end; set one in "
         "the migration (SET lock_timeout = '5s') and retry.";
  } else {
    o += " Role " + a.role + " runs with lock_timeout " + Seconds(a.lock_timeout.seconds) + " (" +
         a.lock_timeout.source + "): a queued DDL gives up after it rather than block longer.";
  }
  o += " This is advice taken at one instant: the migration still needs its own lock_timeout.";
  return o;
}

}  // namespace

bool IsTableLockMode(const std::string& mode) { return ModeIndex(mode) >= 0; }

bool LockModesConflict(const std::string& a, const std::string& b) {
  const int i = ModeIndex(a), j = ModeIndex(b);
  return i >= 0 && j >= 0 && ((kConflicts[i] >> j) & 1U) != 0;
}

PreflightAnswer JudgePreflight(const PreflightRequest& request, const PreflightFacts& facts,
                               const PollData& data, const PollIndex& index,
                               const TargetView& view) {
  PreflightAnswer a;
  a.table = facts.table_found ? facts.relation : request.table;
  a.database = facts.datname;
  a.mode = request.mode;
  a.role = request.role;
  if (!facts.table_found) {
    a.status = 400;
    a.error = "no table " + request.table + " in database " + facts.datname +
              (request.parsed.schema ? "" : " on the exporter's search_path (give schema.table)");
    return a;
  }
  if (!request.role.empty() && !facts.roleid) {
    a.status = 400;
    a.error = "no role " + request.role;
    return a;
  }
  bool conflicting_holder_active = false;
  for (const RelationLock& l : facts.locks) {
    if (!l.granted) a.waiting.push_back(PartyOf(l, data, index, view));
    // A new request waits for a granted lock that conflicts with it, and for a waiter ahead of it
    // whose requested mode conflicts with it (PostgreSQL queues it behind that waiter).
    if (!LockModesConflict(request.mode, l.mode)) continue;
    a.conflicts.push_back(PartyOf(l, data, index, view));
    // A running holder means traffic on the table, except an ordinary autovacuum worker: it
    // cancels itself when a conflicting request waits (one to prevent wraparound does not).
    const bool yields = l.backend_type == "autovacuum worker" &&
                        l.activity_query.find("(to prevent wraparound)") == std::string::npos;
    if (l.granted && a.conflicts.back().who.id.state == "active" && !yields) {
      conflicting_holder_active = true;
    }
  }
  auto longest_first = [](const PreflightParty& x, const PreflightParty& y) {
    const double xs = x.who.state_seconds.value_or(0), ys = y.who.state_seconds.value_or(0);
    return x.granted != y.granted ? x.granted : xs > ys;
  };
  std::stable_sort(a.conflicts.begin(), a.conflicts.end(), longest_first);
  if (a.conflicts.empty()) {
    a.verdict = "clear";
  } else if (!a.waiting.empty() || conflicting_holder_active) {
    a.verdict = "would_block";
  } else {
    a.verdict = "would_wait";
  }
  const uint32_t roleid = facts.roleid.value_or(0);
  a.lock_timeout = SettingFor("lock_timeout", facts.datid, roleid, data.settings, data.overrides);
  a.statement_timeout =
      SettingFor("statement_timeout", facts.datid, roleid, data.settings, data.overrides);
  a.advice = Advice(a);
  return a;
}

void PreflightTicket::Answer(PreflightAnswer answer) {
  {
    MutexLock lock(&mu_);
    answer_ = std::move(answer);
  }
  cv_.notify_all();
}

std::optional<PreflightAnswer> PreflightTicket::Wait(double seconds) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  MutexLock lock(&mu_);
  while (!answer_ && std::chrono::steady_clock::now() < until) cv_.wait_until(mu_, until);
  return answer_;
}

std::shared_ptr<PreflightTicket> PreflightDesk::Submit(PreflightRequest request) {
  MutexLock lock(&mu_);
  if (pending_.size() >= kCapacity) return nullptr;
  pending_.push_back(std::make_shared<PreflightTicket>(std::move(request)));
  return pending_.back();
}

std::vector<std::shared_ptr<PreflightTicket>> PreflightDesk::Take() {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<PreflightTicket>> out(pending_.begin(), pending_.end());
  pending_.clear();
  return out;
}

void PreflightDesk::SetAnswerWithin(double seconds) {
  MutexLock lock(&mu_);
  answer_within_ = seconds;
}

double PreflightDesk::answer_within() const {
  MutexLock lock(&mu_);
  return answer_within_;
}

}  // namespace pglock
