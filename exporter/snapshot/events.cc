#include "exporter/snapshot/events.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/timeouts.h"

namespace pglock {
namespace {

using SessionId = std::pair<int, double>;  // pid, backend_start: pids are reused

const char* const kCauses[] = {"idle_in_transaction_timeout",
                               "idle_session_timeout",
                               "terminated",
                               "disconnected",
                               "server_restart",
                               "unknown"};

struct Hold {
  SessionId session;
  bool exclusive;
};

std::map<AdvisoryKey, std::vector<Hold>> Holds(const PollData& data) {
  std::unordered_map<int, double> backend_start;
  for (const Session& s : data.sessions) backend_start[s.pid] = s.backend_start;
  std::map<AdvisoryKey, std::vector<Hold>> out;
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted) continue;
    const auto it = backend_start.find(l.pid);
    out[l.key].push_back({{l.pid, it == backend_start.end() ? 0 : it->second}, l.exclusive});
  }
  return out;
}

std::string CounterLock(const AdvisoryKey& key, const LockNames* names) {
  if (names != nullptr && names->count({key.classid, key.objid, key.objsubid}) != 0) {
    return LockLabel(key, names);
  }
  return "unnamed";
}

std::string Datname(const PollData& data, uint32_t datid) {
  for (const Session& s : data.sessions) {
    if (s.datid == datid && !s.datname.empty()) return s.datname;
  }
  if (data.database_stats) {
    for (const DatabaseStats& d : *data.database_stats) {
      if (d.datid == datid) return d.datname;
    }
  }
  return std::to_string(datid);
}

int64_t CounterDelta(int64_t prev, int64_t cur) { return cur >= prev ? cur - prev : cur; }

}  // namespace

std::string InferLossCause(const Session& last_seen, double last_poll_now, double cur_poll_now,
                           double idle_in_transaction_timeout, double idle_session_timeout,
                           SessionEndDeltas* deltas, bool deltas_known) {
  // Idle time the session would have reached by the current poll had it stayed idle.
  const double idle_by_now = last_seen.state_change
                                 ? (last_poll_now - *last_seen.state_change) +
                                       (cur_poll_now - last_poll_now) + kTimeoutSlackSeconds
                                 : 0;
  const bool iit_match = last_seen.IdleInTransaction() && idle_in_transaction_timeout > 0 &&
                         idle_by_now >= idle_in_transaction_timeout;
  const bool idle_match =
      last_seen.state == "idle" && idle_session_timeout > 0 && idle_by_now >= idle_session_timeout;
  if (!deltas_known) {
    if (iit_match) return "idle_in_transaction_timeout";
    if (idle_match) return "idle_session_timeout";
    return "unknown";
  }
  if (iit_match && deltas->fatal > 0) {
    --deltas->fatal;
    return "idle_in_transaction_timeout";
  }
  if (idle_match && deltas->fatal > 0) {
    --deltas->fatal;
    return "idle_session_timeout";
  }
  if (deltas->killed > 0) {
    --deltas->killed;
    return "terminated";
  }
  if (deltas->abandoned > 0) {
    --deltas->abandoned;
    return "disconnected";
  }
  if (deltas->fatal > 0) {
    --deltas->fatal;
    return "unknown";
  }
  // No abnormal end was counted: the client closed its connection.
  return "disconnected";
}

void EventTracker::Observe(std::shared_ptr<const PollData> cur, const LockNames* names,
                           Counters* counters) {
  SeedZeroCounters(*cur, names, counters);
  if (cur->inventory) {
    if (last_inventory_) CountLockEvents(*last_inventory_, *cur, names, counters);
  }
  CountSessionsEnded(*cur, counters);
  CountLeaseTransitions(*cur, counters);
  if (cur->inventory) {
    last_inventory_ = cur;
    inventory_stats_.clear();
    if (cur->database_stats) {
      for (const DatabaseStats& d : *cur->database_stats) inventory_stats_[d.datid] = d;
    }
  }
  last_ = std::move(cur);
}

void EventTracker::SeedZeroCounters(const PollData& cur, const LockNames* names,
                                    Counters* counters) {
  // Series that exist at 0 before the first event let increase()/rate() see that event. Bounded:
  // databases x (configured names + "unnamed") x causes, and the leases of small tables.
  std::set<std::string> datnames;
  for (const Session& s : cur.sessions) {
    if (!s.datname.empty()) datnames.insert(s.datname);
  }
  std::set<std::string> locks = {"unnamed"};
  if (names != nullptr) {
    for (const auto& [key, name] : *names) locks.insert(name);
  }
  for (const std::string& db : datnames) {
    for (const std::string& lock : locks) {
      for (const char* cause : kCauses) counters->losses[{db, lock, cause}] += 0;
      for (const char* reason : {"unlocked", "session_ended"}) {
        counters->releases[{db, lock, reason}] += 0;
      }
      counters->takeovers[{db, lock}] += 0;
    }
  }
  for (const LeaseTableData& t : cur.leases) {
    if (!t.ok || t.rows.size() > kMaxSeededLeases) continue;
    for (const LeaseRow& r : t.rows) {
      for (const char* kind : {"acquired", "released", "renewed", "expired_takeover", "overlap"}) {
        counters->lease_transitions[{t.table, r.name, kind}] += 0;
      }
    }
  }
}

void EventTracker::CountSessionsEnded(const PollData& cur, Counters* counters) {
  if (!cur.database_stats) return;
  for (const DatabaseStats& d : *cur.database_stats) {
    const auto it = last_stats_.find(d.datid);
    // First sight mirrors the server's counter; afterwards a decrease is a reset (crash restart
    // or pg_stat_reset): the new value counts from zero, as Prometheus treats counter resets.
    const DatabaseStats prev = it == last_stats_.end() ? DatabaseStats{} : it->second;
    counters->sessions_ended[{d.datname, "fatal"}] +=
        static_cast<double>(CounterDelta(prev.sessions_fatal, d.sessions_fatal));
    counters->sessions_ended[{d.datname, "killed"}] +=
        static_cast<double>(CounterDelta(prev.sessions_killed, d.sessions_killed));
    counters->sessions_ended[{d.datname, "abandoned"}] +=
        static_cast<double>(CounterDelta(prev.sessions_abandoned, d.sessions_abandoned));
    last_stats_[d.datid] = d;
  }
}

void EventTracker::CountLockEvents(const PollData& prev, const PollData& cur,
                                   const LockNames* names, Counters* counters) {
  const auto prev_holds = Holds(prev);
  const auto cur_holds = Holds(cur);

  if (prev.postmaster_start != cur.postmaster_start) {
    // The server restarted: every lock held before is gone with its session.
    for (const auto& [key, holds] : prev_holds) {
      const std::string db = Datname(prev, key.datid), lock = CounterLock(key, names);
      counters->releases[{db, lock, "session_ended"}] += static_cast<double>(holds.size());
      counters->losses[{db, lock, "server_restart"}] += static_cast<double>(holds.size());
    }
    lost_keys_.clear();
    return;
  }

  std::set<SessionId> alive;
  for (const Session& s : cur.sessions) alive.insert({s.pid, s.backend_start});
  // The most recent sight of each session: the last poll (even a cheap one) beats the inventory.
  std::map<SessionId, const Session*> last_seen;
  for (const Session& s : prev.sessions) last_seen[{s.pid, s.backend_start}] = &s;
  double last_seen_now = prev.now;
  if (last_ && last_.get() != &prev && last_->postmaster_start == cur.postmaster_start) {
    for (const Session& s : last_->sessions) last_seen[{s.pid, s.backend_start}] = &s;
    last_seen_now = last_->now;
  }

  // Deltas of the session end counters per database since the inventory poll.
  std::map<uint32_t, SessionEndDeltas> deltas;
  const bool deltas_known = cur.database_stats.has_value() && prev.database_stats.has_value();
  if (deltas_known) {
    for (const DatabaseStats& d : *cur.database_stats) {
      const auto it = inventory_stats_.find(d.datid);
      const DatabaseStats p = it == inventory_stats_.end() ? d : it->second;
      deltas[d.datid] = {CounterDelta(p.sessions_fatal, d.sessions_fatal),
                         CounterDelta(p.sessions_killed, d.sessions_killed),
                         CounterDelta(p.sessions_abandoned, d.sessions_abandoned)};
    }
  }

  // Sessions that ended while holding a lock, each with one cause for all its locks. Sessions
  // whose timing matches a timeout are attributed first, so they claim the 'fatal' deltas.
  std::map<SessionId, std::string> causes;
  std::vector<std::pair<SessionId, uint32_t>> ended;
  for (const auto& [key, holds] : prev_holds) {
    for (const Hold& h : holds) {
      if (alive.count(h.session) == 0 && causes.emplace(h.session, "").second) {
        ended.emplace_back(h.session, key.datid);
      }
    }
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [sid, datid] : ended) {
      if (!causes[sid].empty()) continue;
      const auto it = last_seen.find(sid);
      if (it == last_seen.end()) {
        causes[sid] = "unknown";
        continue;
      }
      const Session& s = *it->second;
      const double iit = EffectiveTimeout("idle_in_transaction_session_timeout", s.datid,
                                          s.usesysid, prev.settings, prev.overrides);
      const double idle = EffectiveTimeout("idle_session_timeout", s.datid, s.usesysid,
                                           prev.settings, prev.overrides);
      SessionEndDeltas scratch = deltas[s.datid];
      const std::string probe =
          InferLossCause(s, last_seen_now, cur.now, iit, idle, &scratch, deltas_known);
      const bool timeout_cause =
          probe == "idle_in_transaction_timeout" || probe == "idle_session_timeout";
      if (pass == 0 && !timeout_cause) continue;
      causes[sid] =
          InferLossCause(s, last_seen_now, cur.now, iit, idle, &deltas[s.datid], deltas_known);
    }
  }

  for (const auto& [key, holds] : prev_holds) {
    const std::string db = Datname(prev, key.datid), lock = CounterLock(key, names);
    const auto cur_it = cur_holds.find(key);
    for (const Hold& h : holds) {
      bool still_held = false;
      if (cur_it != cur_holds.end()) {
        for (const Hold& c : cur_it->second) still_held = still_held || c.session == h.session;
      }
      if (still_held) continue;
      if (alive.count(h.session) != 0) {
        counters->releases[{db, lock, "unlocked"}] += 1;
        continue;
      }
      counters->releases[{db, lock, "session_ended"}] += 1;
      counters->losses[{db, lock, causes[h.session]}] += 1;
      if (h.exclusive) lost_keys_[key] = {h.session.first, h.session.second, prev.now};
    }
  }

  // Takeovers: an exclusive key held by another session than at the last inventory, or taken by
  // another session after its holder's session ended while holding it.
  for (const auto& [key, holds] : cur_holds) {
    std::set<SessionId> now_holders, before_holders;
    for (const Hold& h : holds) {
      if (h.exclusive) now_holders.insert(h.session);
    }
    if (now_holders.empty()) continue;
    if (const auto p = prev_holds.find(key); p != prev_holds.end()) {
      for (const Hold& h : p->second) {
        if (h.exclusive) before_holders.insert(h.session);
      }
    }
    bool takeover = false;
    if (!before_holders.empty()) {
      takeover = std::none_of(now_holders.begin(), now_holders.end(),
                              [&](const SessionId& s) { return before_holders.count(s) != 0; });
    } else if (const auto lost = lost_keys_.find(key); lost != lost_keys_.end()) {
      takeover = now_holders.count({lost->second.pid, lost->second.backend_start}) == 0;
    }
    if (takeover) {
      counters->takeovers[{Datname(cur, key.datid), CounterLock(key, names)}] += 1;
    }
    lost_keys_.erase(key);  // held again: the next change is judged against this holder
  }
  while (lost_keys_.size() > kMaxLostKeys) {
    auto oldest = std::min_element(
        lost_keys_.begin(), lost_keys_.end(),
        [](const auto& a, const auto& b) { return a.second.lost_at < b.second.lost_at; });
    lost_keys_.erase(oldest);
  }
}

void EventTracker::CountLeaseTransitions(const PollData& cur, Counters* counters) {
  for (const LeaseTableData& t : cur.leases) {
    if (!t.ok) continue;  // keep the last good rows; compare against them next time
    std::map<std::string, LeaseRow> rows;
    for (const LeaseRow& r : t.rows) rows[r.name] = r;
    const bool complete = static_cast<int64_t>(t.rows.size()) >= t.total;
    const auto prev_it = last_leases_.find(t.table);
    if (prev_it != last_leases_.end()) {
      const auto& prev = prev_it->second;
      const bool both_complete = complete && last_leases_complete_[t.table];
      // Distinct names already counted for this table (for the cardinality cap).
      std::set<std::string> known;
      for (const auto& [k, v] : counters->lease_transitions) {
        if (std::get<0>(k) == t.table) known.insert(std::get<1>(k));
      }
      auto count = [&](const std::string& lease, const char* kind) {
        std::string label = lease;
        if (known.count(lease) == 0) {
          if (known.size() >= kMaxLeaseCounterNames) {
            label = "other";
          } else {
            known.insert(lease);
          }
        }
        counters->lease_transitions[{t.table, label, kind}] += 1;
      };
      for (const auto& [name, row] : rows) {
        const auto p = prev.find(name);
        if (p == prev.end()) {
          if (both_complete) count(name, "acquired");
          continue;
        }
        const LeaseRow& old = p->second;
        if (row.holder != old.holder) {
          // Judged by the database's own timestamps, never the exporter's clock.
          count(name, row.taken_at >= old.expires_at ? "expired_takeover" : "overlap");
        } else if (row.expires_at != old.expires_at || row.taken_at != old.taken_at) {
          count(name, "renewed");
        }
      }
      if (both_complete) {
        for (const auto& [name, row] : prev) {
          if (rows.count(name) == 0) count(name, "released");
        }
      }
    }
    last_leases_[t.table] = std::move(rows);
    last_leases_complete_[t.table] = complete;
  }
}

}  // namespace pglock
