#include "exporter/snapshot/events.h"

#include <algorithm>
#include <set>
#include <span>
#include <unordered_map>

#include "exporter/snapshot/analyze.h"
#include "exporter/snapshot/poll_index.h"
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

// The granted advisory locks of a poll grouped by key, in flat sorted arrays: at 100k locks a
// std::map of vectors costs more than the rest of the poll.
class HoldIndex {
 public:
  explicit HoldIndex(const PollData& data) {
    std::unordered_map<int, double> backend_start;
    for (const Session& s : data.sessions) backend_start[s.pid] = s.backend_start;
    std::vector<std::pair<AdvisoryKey, Hold>> rows;
    rows.reserve(data.locks.size());
    for (const AdvisoryLock& l : data.locks) {
      if (!l.granted) continue;
      const auto it = backend_start.find(l.pid);
      rows.push_back({l.key, {{l.pid, it == backend_start.end() ? 0 : it->second}, l.exclusive}});
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    holds_.reserve(rows.size());
    for (const auto& [key, hold] : rows) {
      if (keys_.empty() || !(keys_.back() == key)) {
        keys_.push_back(key);
        starts_.push_back(holds_.size());
      }
      holds_.push_back(hold);
    }
    starts_.push_back(holds_.size());
  }

  size_t size() const { return keys_.size(); }
  const AdvisoryKey& key(size_t i) const { return keys_[i]; }
  std::span<const Hold> holds(size_t i) const {
    return {holds_.data() + starts_[i], starts_[i + 1] - starts_[i]};
  }
  // Holds of `key`; empty when nobody holds it.
  std::span<const Hold> Find(const AdvisoryKey& key) const {
    const auto it = std::lower_bound(keys_.begin(), keys_.end(), key);
    if (it == keys_.end() || !(*it == key)) return {};
    return holds(static_cast<size_t>(it - keys_.begin()));
  }

 private:
  std::vector<AdvisoryKey> keys_;  // sorted, unique
  std::vector<size_t> starts_;     // holds of keys_[i] are holds_[starts_[i] .. starts_[i+1])
  std::vector<Hold> holds_;
};

std::string CounterLock(const AdvisoryKey& key, const LockNames* names) {
  if (names != nullptr && names->count({key.classid, key.objid, key.objsubid}) != 0) {
    return LockLabel(key, names);
  }
  return "unnamed";
}

int64_t CounterDelta(int64_t prev, int64_t cur) { return cur >= prev ? cur - prev : cur; }

// PostgreSQL 14 reads pg_stat_database from the stats collector's file, which a backend accepts
// up to 500 ms old, while pg_stat_activity and pg_locks are current: a session that ended just
// before the poll is gone with its locks but its end is not counted yet, so a termination or a
// timeout would pass for a clean disconnect. True when that can be the case: the counters were
// written before `ended_by` and a session that held a lock in `prev` is gone in `cur`.
bool SessionCountersLag(const PollData& prev, const PollData& cur, double ended_by) {
  if (!cur.database_stats_snapshot || *cur.database_stats_snapshot >= ended_by ||
      !prev.database_stats || prev.postmaster_start != cur.postmaster_start) {
    return false;
  }
  std::set<SessionId> alive;
  for (const Session& s : cur.sessions) alive.insert({s.pid, s.backend_start});
  std::unordered_map<int, double> backend_start;
  for (const Session& s : prev.sessions) backend_start[s.pid] = s.backend_start;
  return std::any_of(prev.locks.begin(), prev.locks.end(), [&](const AdvisoryLock& l) {
    const auto it = backend_start.find(l.pid);
    return l.granted && it != backend_start.end() && alive.count({l.pid, it->second}) == 0;
  });
}

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

void EventTracker::Observe(std::shared_ptr<const PollData> cur,
                           std::shared_ptr<const PollData> last_inventory, const LockNames* names,
                           Counters* counters) {
  SeedZeroCounters(*cur, names, counters);
  if (cur->inventory && last_inventory != nullptr) {
    const bool waiting = waiting_baseline_ != nullptr;
    std::shared_ptr<const PollData> baseline = waiting ? waiting_baseline_ : last_inventory;
    if (counter_waits_ < kMaxCounterWaits &&
        SessionCountersLag(*baseline, *cur, waiting ? waiting_since_ : cur->now)) {
      if (!waiting) waiting_since_ = cur->now;
      waiting_baseline_ = std::move(baseline);
      ++counter_waits_;
    } else {
      CountLockEvents(*baseline, *cur, names, counters);
      waiting_baseline_.reset();
      counter_waits_ = 0;
    }
  }
  CountSessionsEnded(*cur, counters);
  CountLeaseTransitions(*cur, counters);
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
  const HoldIndex prev_holds(prev);
  const HoldIndex cur_holds(cur);
  const PollIndex prev_index(prev);
  const PollIndex cur_index(cur);

  if (prev.postmaster_start != cur.postmaster_start) {
    // The server restarted: every lock held before is gone with its session.
    for (size_t i = 0; i < prev_holds.size(); ++i) {
      const AdvisoryKey& key = prev_holds.key(i);
      const auto holds = prev_holds.holds(i);
      const std::string db = prev_index.Datname(key.datid), lock = CounterLock(key, names);
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

  // Deltas of the session end counters per database since the inventory poll (prev).
  std::map<uint32_t, SessionEndDeltas> deltas;
  const bool deltas_known = cur.database_stats.has_value() && prev.database_stats.has_value();
  if (deltas_known) {
    std::map<uint32_t, const DatabaseStats*> inventory_stats;
    for (const DatabaseStats& d : *prev.database_stats) inventory_stats[d.datid] = &d;
    for (const DatabaseStats& d : *cur.database_stats) {
      const auto it = inventory_stats.find(d.datid);
      const DatabaseStats p = it == inventory_stats.end() ? d : *it->second;
      deltas[d.datid] = {CounterDelta(p.sessions_fatal, d.sessions_fatal),
                         CounterDelta(p.sessions_killed, d.sessions_killed),
                         CounterDelta(p.sessions_abandoned, d.sessions_abandoned)};
    }
  }

  // Sessions that ended while holding a lock, each with one cause for all its locks. Sessions
  // whose timing matches a timeout are attributed first, so they claim the 'fatal' deltas.
  std::map<SessionId, std::string> causes;
  std::vector<std::pair<SessionId, uint32_t>> ended;
  for (size_t i = 0; i < prev_holds.size(); ++i) {
    for (const Hold& h : prev_holds.holds(i)) {
      if (alive.count(h.session) == 0 && causes.emplace(h.session, "").second) {
        ended.emplace_back(h.session, prev_holds.key(i).datid);
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

  for (size_t i = 0; i < prev_holds.size(); ++i) {
    const AdvisoryKey& key = prev_holds.key(i);
    const auto now_held = cur_holds.Find(key);
    for (const Hold& h : prev_holds.holds(i)) {
      const bool still_held = std::any_of(now_held.begin(), now_held.end(),
                                          [&](const Hold& c) { return c.session == h.session; });
      if (still_held) continue;
      // Labels only for the few locks that changed.
      const std::string db = prev_index.Datname(key.datid), lock = CounterLock(key, names);
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
  for (size_t i = 0; i < cur_holds.size(); ++i) {
    const AdvisoryKey& key = cur_holds.key(i);
    const auto now_held = cur_holds.holds(i);
    const auto before = prev_holds.Find(key);
    // Usually one holder on each side: compare in place, without allocating.
    bool held_now = false, held_before = false, same_holder = false;
    for (const Hold& b : before) held_before = held_before || b.exclusive;
    for (const Hold& h : now_held) {
      if (!h.exclusive) continue;
      held_now = true;
      for (const Hold& b : before)
        same_holder = same_holder || (b.exclusive && b.session == h.session);
    }
    if (!held_now) continue;
    bool takeover = false;
    if (held_before) {
      takeover = !same_holder;
    } else if (const auto lost = lost_keys_.find(key); lost != lost_keys_.end()) {
      const SessionId previous{lost->second.pid, lost->second.backend_start};
      takeover = std::none_of(now_held.begin(), now_held.end(),
                              [&](const Hold& h) { return h.exclusive && h.session == previous; });
    }
    if (takeover) {
      counters->takeovers[{cur_index.Datname(key.datid), CounterLock(key, names)}] += 1;
    }
    if (!lost_keys_.empty()) lost_keys_.erase(key);  // held again: judged against this holder
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
