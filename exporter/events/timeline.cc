#include "exporter/events/timeline.h"

#include <algorithm>
#include <functional>
#include <set>

#include "exporter/events/event_log.h"
#include "exporter/snapshot/poll_index.h"
#include "exporter/util/utf8.h"

namespace pglock {
namespace {

constexpr char kSep = '\x1f';

// The text kept of a name, holder or application: memory stays bounded whatever a lease table
// holds. Cut at a character boundary, with an ellipsis.
void AppendClipped(std::string* out, std::string_view text) {
  if (text.size() <= kTimelineTextBytes) {
    out->append(text);
    return;
  }
  out->append(text.substr(0, Utf8CutPoint(text, kTimelineTextBytes))).append("\u2026");
}

std::string Clip(std::string text) {
  if (text.size() <= kTimelineTextBytes) return text;
  std::string clipped;
  AppendClipped(&clipped, text);
  return clipped;
}

// A shared text within the bound is kept as it is: no copy, no second look-up in the table.
SharedText Clip(const SharedText& text) {
  return text.size() <= kTimelineTextBytes ? text : SharedText(Clip(text.str()));
}

std::string RootName(int pid, const std::string& gid) {
  if (pid != 0) return "pid " + std::to_string(pid);
  return gid.empty() ? "prepared transaction" : "prepared " + gid;
}

size_t StringBytes(const std::string& s) {
  // Heap only when the text is longer than the small-string buffer.
  return s.capacity() > 15 ? s.capacity() + 1 : 0;
}

// A shared text's characters are kept once for all its holders: a holder owns only the pointer.
size_t StringBytes(const SharedText&) { return 0; }

size_t IntervalBytes(const TimelineInterval& i) {
  return sizeof i + StringBytes(i.who) + StringBytes(i.detail);
}

size_t MarkerBytes(const TimelineMarker& m) {
  return sizeof m + StringBytes(m.previous) + StringBytes(m.current);
}

const char* MarkerMomentName(MarkerMoment moment) {
  switch (moment) {
    case MarkerMoment::kEvent:
      return "";
    case MarkerMoment::kEpisodeStart:
      return "blocking_episode_start";
    case MarkerMoment::kEpisodeEnd:
      return "blocking_episode_end";
    case MarkerMoment::kLeaseExpiry:
      return "lease_expiry";
  }
  return "";
}

}  // namespace

const char* MarkerKindName(const TimelineMarker& m) {
  if (m.moment != MarkerMoment::kEvent) return MarkerMomentName(m.moment);
  return m.event_kind ? EventKindName(*m.event_kind) : "";
}

std::optional<std::pair<MarkerMoment, std::optional<EventKind>>> MarkerKindNamed(
    std::string_view name) {
  for (const MarkerMoment moment :
       {MarkerMoment::kEpisodeStart, MarkerMoment::kEpisodeEnd, MarkerMoment::kLeaseExpiry}) {
    if (name == MarkerMomentName(moment)) {
      const std::optional<EventKind> event = moment == MarkerMoment::kLeaseExpiry
                                                 ? std::nullopt
                                                 : std::optional(EventKind::kBlockingEpisode);
      return std::make_pair(moment, event);
    }
  }
  if (const std::optional<EventKind> k = EventKindNamed(name)) {
    return std::make_pair(MarkerMoment::kEvent, k);
  }
  return std::nullopt;
}

bool TimelineAlarming(const TimelineMarker& m) {
  // An event that pages (the one table's word), or a lease left to expire under its holder.
  if (m.moment == MarkerMoment::kLeaseExpiry) return true;
  return m.moment == MarkerMoment::kEvent && m.event_kind && InfoOf(*m.event_kind).pages;
}

const char* TimelineRowKindLabel(TimelineRowKind k) {
  switch (k) {
    case TimelineRowKind::kLock:
      return "lock";
    case TimelineRowKind::kLease:
      return "lease";
    case TimelineRowKind::kRowLocks:
      return "row_locks";
    case TimelineRowKind::kRoot:
      return "root";
    case TimelineRowKind::kDeadlocks:
      return "deadlocks";
  }
  return "lock";
}

bool Timeline::OpenKey::operator==(const OpenKey& o) const {
  return kind == o.kind && datid == o.datid && classid == o.classid && objid == o.objid &&
         objsubid == o.objsubid && pid == o.pid && wait == o.wait && text == o.text;
}

size_t Timeline::OpenKeyHash::operator()(const OpenKey& k) const {
  size_t h = std::hash<std::string>()(k.text);
  for (uint64_t v : {uint64_t(k.kind), uint64_t(k.datid), uint64_t(k.classid), uint64_t(k.objid),
                     uint64_t(k.objsubid), uint64_t(uint32_t(k.pid)), uint64_t(k.wait)}) {
    h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  }
  return h;
}

std::shared_ptr<const TimelineRow> Timeline::Row(TimelineRowKind kind, std::string scope,
                                                 std::string name) {
  TimelineRow key{kind, Clip(std::move(scope)), Clip(std::move(name))};
  auto it = rows_.find(key);
  if (it != rows_.end()) {
    if (auto row = it->second.lock()) return row;
  }
  auto row = std::make_shared<const TimelineRow>(key);
  rows_[std::move(key)] = row;
  if (rows_.size() >= rows_sweep_at_) {
    std::erase_if(rows_, [](const auto& r) { return r.second.expired(); });
    rows_sweep_at_ = std::max<size_t>(1024, rows_.size() * 2);
  }
  return row;
}

Timeline::OpenKey& Timeline::Probe(TimelineRowKind kind, int pid, bool wait) {
  probe_.kind = kind;
  probe_.pid = pid;
  probe_.wait = wait;
  probe_.text.clear();
  return probe_;
}

const Timeline::OpenKey& Timeline::LeaseKey(const LeaseTableData& t, const LeaseRow& row,
                                            bool expired) {
  OpenKey& key = Probe(TimelineRowKind::kLease, row.pid, expired);
  key.text.append(t.table).append(1, kSep);
  AppendClipped(&key.text, row.name);
  key.text.append(1, kSep);
  AppendClipped(&key.text, row.holder);
  return key;
}

bool Timeline::IsHeldLock(const OpenKey& key) {
  return key.kind == TimelineRowKind::kLock && !key.wait;
}

uint64_t Timeline::SeenAt(const OpenKey& key, const Open& o) const {
  return IsHeldLock(key) ? std::max(o.seen, locks_seen_) : o.seen;
}

double Timeline::EndOf(const OpenKey& key, const Open& o) const {
  // Only an interval open at that poll was extended by it (whatever the server's clock did).
  const bool extended = IsHeldLock(key) && o.opened <= locks_seen_;
  return extended ? std::max(o.interval.end, locks_end_) : o.interval.end;
}

void Timeline::MarkSeen(const OpenKey& key, Open* o) {
  if (SeenAt(key, *o) != poll_) ++seen_now_;
  o->seen = poll_;
}

const PollIndex& Timeline::Index(const PollData& data) {
  if (index_ == nullptr) index_ = &IndexOf(data, &built_index_);
  return *index_;
}

TimelineInterval* Timeline::See(const OpenKey& key, double now, const PollData& data) {
  auto it = open_.find(key);
  if (it != open_.end()) {
    it->second.interval.end = std::max(it->second.interval.end, now);
    MarkSeen(it->first, &it->second);
    return nullptr;
  }
  // Held locks and lease rows can come by the thousand (a leak filling the lock table, a table of
  // expired leases): they stop at kOpenIntervals - kOpenReserved, so the waits and root blockers
  // of that very incident are still drawn.
  const bool bulk = !key.wait && key.kind != TimelineRowKind::kRoot;
  if (open_.size() >= kOpenIntervals || (bulk && open_.size() >= kOpenIntervals - kOpenReserved)) {
    ++untracked_;
    return nullptr;
  }
  if (IsHeldLock(key)) ++open_held_locks_;
  const int pid = key.pid;
  Open& o = open_[key];
  o.interval.open = true;
  o.interval.start = now;
  o.interval.end = now;
  o.seen = poll_;
  o.opened = poll_;
  if (pid > 0) {
    if (const Session* s = Index(data).Find(pid)) o.backend_start = s->backend_start;
  }
  ++seen_now_;
  ++changes_;
  return &o.interval;
}

bool Timeline::SameLocksAsLastPoll(const PollData& data) const {
  size_t i = 0;
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted) continue;
    if (i == last_locks_.size() || !(last_locks_[i].first == l.key) ||
        last_locks_[i].second != l.pid) {
      return false;
    }
    ++i;
  }
  return i == last_locks_.size();
}

void Timeline::ObserveLocks(const PollData& data, const LockNames* names) {
  // Most polls see the very locks of the poll before, in the same order. Every one of them then
  // either has its interval open (seen last poll, so not closed since) or had none: that one
  // gets one only if there is room now. Without room, the open held-lock intervals are exactly
  // the ones this poll sees: all of them are extended to its now() at once (SeenAt, EndOf), not
  // looked up, nor even visited, a lock at a time (15k lookups were a sixth of a poll's CPU,
  // visiting 4,000 intervals still a tenth).
  const bool room = open_.size() < kOpenIntervals - kOpenReserved;
  // Right after a restore no poll saw the locks of the intervals restored: looked up once.
  if (!restored_ && (last_locks_untracked_ == 0 || !room) && SameLocksAsLastPoll(data)) {
    locks_seen_ = poll_;
    locks_end_ = std::max(locks_end_, data.now);
    seen_now_ += open_held_locks_;
    untracked_ += last_locks_untracked_;
    return;
  }
  const uint64_t untracked_before = untracked_;
  last_locks_.clear();
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted) continue;
    last_locks_.emplace_back(l.key, l.pid);
    OpenKey key{TimelineRowKind::kLock, l.key.datid, l.key.classid, l.key.objid,
                l.key.objsubid,         l.pid,       false,         {}};
    TimelineInterval* i = See(key, data.now, data);
    if (i == nullptr) continue;
    const PollIndex& index = Index(data);  // built when a new holder needs its identity
    i->row = Row(TimelineRowKind::kLock, index.Datname(l.key.datid), LockLabel(l.key, names));
    i->pid = l.pid;
    i->who = Clip(IdentityOf(index.Find(l.pid), l.pid).application_name);
  }
  last_locks_untracked_ = untracked_ - untracked_before;
  // The list follows the load down: a fall from 100k locks to a few does not keep 2 MB.
  if (last_locks_.capacity() > 2 * last_locks_.size() + 1024) last_locks_.shrink_to_fit();
}

void Timeline::ObserveWaits(const PollData& data, const TargetView& view) {
  for (const WaitEdge& w : view.waits) {
    OpenKey& key = Probe(TimelineRowKind::kLock, w.waiter.pid, true);
    key.text.append(w.datname).append(1, kSep).append(w.lock).append(1, kSep);
    key.text.append(std::to_string(w.blocker.pid));
    TimelineInterval* i = See(key, data.now, data);
    if (i == nullptr) continue;
    i->row = Row(TimelineRowKind::kLock, w.datname, w.lock);
    i->wait = true;
    i->start = data.now - std::max(0.0, w.seconds);
    i->pid = w.waiter.pid;
    i->who = Clip(w.waiter.application_name);
    i->blocker_pid = w.blocker.pid;
  }
  for (const BlockingRoot& r : view.all_blocking_roots) {
    const LockParticipant& p = r.root;
    OpenKey& key = Probe(TimelineRowKind::kRoot, p.id.pid, false);
    key.text.append(p.datname).append(1, kSep).append(p.gid);
    if (TimelineInterval* i = See(key, data.now, data)) {
      i->row = Row(TimelineRowKind::kRoot, p.datname, RootName(p.id.pid, p.gid));
      i->pid = p.id.pid;
      i->who = Clip(p.id.application_name);
      i->detail = Clip(p.backend_type);
    }
    for (int blocked : r.blocked_pids) {
      OpenKey& blocked_key = Probe(TimelineRowKind::kRoot, blocked, true);
      blocked_key.text.append(p.datname).append(1, kSep).append(p.gid);
      blocked_key.text.append(1, kSep).append(std::to_string(p.id.pid));
      TimelineInterval* i = See(blocked_key, data.now, data);
      if (i == nullptr) continue;
      i->row = Row(TimelineRowKind::kRoot, p.datname, RootName(p.id.pid, p.gid));
      i->wait = true;
      i->pid = blocked;
      i->who = Clip(IdentityOf(Index(data).Find(blocked), blocked).application_name);
      i->blocker_pid = p.id.pid;
    }
  }
}

void Timeline::ObserveLeases(const PollData& data, const TargetView& view) {
  // A table this poll could not read says nothing of its leases: their intervals stay open as
  // they were (not extended), like every interval across a failed poll, for a while.
  std::set<std::string> unread;
  for (const LeaseTableData& t : data.leases) {
    const std::string table = Clip(t.table);  // as the rows' scope has it
    if (t.ok) {
      unread_since_.erase(table);
      continue;
    }
    const double since = unread_since_.try_emplace(table, data.now).first->second;
    if (data.now - since <= kUnreadLeaseTableSeconds) unread.insert(table);
  }
  if (!unread.empty()) {
    for (auto& [key, o] : open_) {
      if ((key.kind == TimelineRowKind::kLease || key.kind == TimelineRowKind::kRowLocks) &&
          unread.count(o.interval.row->scope) != 0) {
        MarkSeen(key, &o);
      }
    }
  }
  // From the rows as read, for the table's own timestamps (taken_at, expires_at) and clock.
  for (const LeaseTableData& t : data.leases) {
    if (!t.ok) continue;
    for (const LeaseRow& row : t.rows) {
      if (t.has_expiry && row.expires_at <= t.now) {
        if (!row.holder.empty()) ObserveExpired(data, t, row);
        continue;
      }
      TimelineInterval* i = See(LeaseKey(t, row, false), t.now, data);
      if (i == nullptr) continue;
      i->row = Row(TimelineRowKind::kLease, t.table, row.name);
      i->start = std::min(t.now, row.taken_at);
      i->pid = row.pid;
      i->who = Clip(row.holder);
    }
  }
  for (const RowLockHolder& r : view.row_locks) {
    OpenKey& key = Probe(TimelineRowKind::kRowLocks, r.holder.pid, false);
    key.text.append(r.table).append(1, kSep);
    AppendClipped(&key.text, r.lease);
    TimelineInterval* i = See(key, now_, data);
    if (i == nullptr) continue;
    i->row = Row(TimelineRowKind::kRowLocks, r.table, "");
    i->start = now_ - std::max(0.0, r.seconds);
    i->pid = r.holder.pid;
    i->who = Clip(r.holder.application_name);
    i->detail = Clip(r.lease);
  }
}

void Timeline::ObserveExpired(const PollData& data, const LeaseTableData& t, const LeaseRow& row) {
  // Keyed apart from the holder's own interval (`wait` set), drawn in the holds.
  TimelineInterval* i = See(LeaseKey(t, row, true), t.now, data);
  if (i == nullptr) return;
  i->row = Row(TimelineRowKind::kLease, t.table, row.name);
  i->expired = true;
  i->start = std::min(t.now, row.expires_at);
  i->pid = row.pid;
  i->who = Clip(row.holder);
  TimelineMarker m;
  m.row = i->row;
  m.time = i->start;
  m.moment = MarkerMoment::kLeaseExpiry;
  m.previous_pid = row.pid;
  m.previous = i->who;
  AddMarker(std::move(m));
}

std::unordered_map<Timeline::OpenKey, Timeline::Open, Timeline::OpenKeyHash>::iterator
Timeline::Close(std::unordered_map<OpenKey, Open, OpenKeyHash>::iterator it) {
  if (IsHeldLock(it->first)) --open_held_locks_;
  it->second.interval.end = EndOf(it->first, it->second);
  it->second.interval.open = false;
  closed_.push_back(std::move(it->second.interval));
  ++closed_total_;
  ++changes_;
  return open_.erase(it);
}

void Timeline::CloseUnseen() {
  // Every open interval seen by this poll (most polls at a steady load): none to visit.
  for (auto it = open_.begin(); seen_now_ < open_.size() && it != open_.end();) {
    if (SeenAt(it->first, it->second) == poll_) {
      ++it;
      continue;
    }
    it = Close(it);
  }
  while (closed_.size() > kClosedIntervals) {
    closed_.pop_front();
    ++dropped_intervals_;
  }
}

void Timeline::ResumeAfterRestore(const PollData& data) {
  if (now_ > 0 && data.now > now_) {
    gaps_.push_back({now_, data.now});
    if (gaps_.size() > kTimelineGaps) gaps_.pop_front();
    ++changes_;
  }
  // A holder the restored interval names is the same only as the same session: pids are reused.
  std::set<std::pair<int, double>> alive;
  for (const Session& s : data.sessions) alive.emplace(s.pid, s.backend_start);
  for (auto it = open_.begin(); it != open_.end();) {
    const Open& o = it->second;
    if (o.backend_start != 0 && alive.count({it->first.pid, o.backend_start}) == 0) {
      it = Close(it);
    } else {
      ++it;
    }
  }
}

void Timeline::Observe(const PollData& data, const TargetView& view, const LockNames* names) {
  MutexLock lock(&mu_);
  if (restored_) ResumeAfterRestore(data);  // before now_ moves: the gap starts there
  now_ = std::max(now_, data.now);
  if (poll_ == 0) first_poll_ = data.now;
  ++poll_;
  untracked_ = 0;
  seen_now_ = 0;
  ObserveLocks(data, names);
  ObserveWaits(data, view);
  ObserveLeases(data, view);
  CloseUnseen();
  restored_ = false;
  index_ = nullptr;  // it borrows `data`
  built_index_.reset();
}

void Timeline::AddMarker(TimelineMarker m) {
  ++changes_;
  m.seq = markers_total_++;
  auto& ring = markers_[MarkerKindKey(m)];
  ring.push_back(std::move(m));
  if (ring.size() > kMarkersPerKind) {
    ring.pop_front();
    ++dropped_markers_;
  }
}

void Timeline::AddMarkers(const std::vector<Event>& events) {
  MutexLock lock(&mu_);
  for (const Event& e : events) {
    if (e.kind == EventKind::kLockReleased) continue;
    TimelineMarker m;
    m.time = e.time;
    m.cause = e.cause;
    m.evidence = e.evidence;
    m.outcome = e.outcome;
    m.duration = e.duration;
    m.count = e.count;
    m.previous_pid = e.previous.pid;
    m.previous = Clip(e.previous_holder.empty() ? SharedText(e.previous.application_name())
                                                : e.previous_holder);
    m.current_pid = e.current.pid;
    m.current = Clip(e.current_holder.empty() ? SharedText(e.current.application_name())
                                              : e.current_holder);
    m.event_kind = e.kind;
    m.event_time = e.time;
    if (IsLeaseEvent(e.kind)) {
      m.row = Row(TimelineRowKind::kLease, e.table, e.lease);
    } else if (e.kind == EventKind::kDeadlock) {
      m.row = Row(TimelineRowKind::kDeadlocks, e.datname, "");
    } else if (e.kind == EventKind::kBlockingEpisode) {
      m.row = Row(TimelineRowKind::kRoot, e.datname, RootName(e.previous.pid, ""));
      TimelineMarker start = m;
      start.moment = MarkerMoment::kEpisodeStart;
      start.time = e.started;
      AddMarker(std::move(start));
      m.moment = MarkerMoment::kEpisodeEnd;
    } else {
      m.row = Row(TimelineRowKind::kLock, e.datname, e.lock.empty() ? "(unknown lock)" : e.lock);
    }
    AddMarker(std::move(m));
  }
}

TimelineWindow Timeline::Query(double seconds) const {
  TimelineWindow w;
  // Copied under the lock, sorted after it: the poller's Observe() waits for no page.
  std::map<const TimelineRow*, TimelineRowWindow> rows;
  {
    MutexLock lock(&mu_);
    w.now = now_;
    w.dropped_intervals = dropped_intervals_;
    w.untracked = untracked_;
    w.dropped_markers = dropped_markers_;
    // The history begins at the first poll (what started before it is drawn from there); once
    // intervals were dropped, at the oldest end still kept.
    double kept = first_poll_;
    if (dropped_intervals_ > 0 && !closed_.empty()) kept = std::max(kept, closed_.front().end);
    w.kept_since = kept;
    w.from = std::max(now_ - seconds, w.kept_since);
    for (const TimelineGap& g : gaps_) {
      if (g.to >= w.from) w.gaps.push_back(g);
    }
    auto row_of = [&](const std::shared_ptr<const TimelineRow>& r) -> TimelineRowWindow& {
      TimelineRowWindow& rw = rows[r.get()];
      rw.row = r;
      return rw;
    };
    auto add = [&](const TimelineInterval& i) {
      if (i.end < w.from) return;
      TimelineRowWindow& rw = row_of(i.row);
      (i.wait ? rw.waits : rw.holds).push_back(i);
      if (i.wait) rw.attention = std::max(rw.attention, 1);
      rw.last = std::max(rw.last, i.end);
    };
    for (const TimelineInterval& i : closed_) add(i);
    for (const auto& [key, o] : open_) {
      const double end = EndOf(key, o);
      if (end == o.interval.end) {
        add(o.interval);
      } else if (end >= w.from) {  // extended by polls that saw the same locks
        TimelineInterval extended = o.interval;
        extended.end = end;
        add(extended);
      }
    }
    for (const auto& [kind, ring] : markers_) {
      for (const TimelineMarker& m : ring) {
        if (m.time < w.from) continue;
        TimelineRowWindow& rw = row_of(m.row);
        rw.markers.push_back(m);
        if (TimelineAlarming(m)) rw.attention = 2;
        rw.last = std::max(rw.last, m.time);
      }
    }
  }
  w.rows.reserve(rows.size());
  for (auto& [ptr, rw] : rows) {
    auto by_start = [](const auto& a, const auto& b) { return a.start < b.start; };
    std::sort(rw.holds.begin(), rw.holds.end(), by_start);
    std::sort(rw.waits.begin(), rw.waits.end(), by_start);
    std::sort(rw.markers.begin(), rw.markers.end(),
              [](const auto& a, const auto& b) { return a.time < b.time; });
    w.rows.push_back(std::move(rw));
  }
  std::sort(w.rows.begin(), w.rows.end(), [](const auto& a, const auto& b) {
    if (a.attention != b.attention) return a.attention > b.attention;
    if (a.last != b.last) return a.last > b.last;
    if (a.markers.size() != b.markers.size()) return a.markers.size() > b.markers.size();
    return *a.row < *b.row;
  });
  return w;
}

TimelineInterval Timeline::Restored(const TimelineInterval& saved) {
  TimelineInterval i = saved;
  // Interned again (one shared row per kind, scope and name), the texts within their bound.
  i.row = Row(saved.row->kind, saved.row->scope, saved.row->name);
  i.who = Clip(i.who);
  i.detail = Clip(i.detail);
  return i;
}

TimelineSaved Timeline::Save(bool with_closed, bool with_markers) const {
  MutexLock lock(&mu_);
  TimelineSaved s;
  s.now = now_;
  s.first_poll = first_poll_;
  s.dropped_intervals = dropped_intervals_;
  s.dropped_markers = dropped_markers_;
  s.gaps.assign(gaps_.begin(), gaps_.end());
  s.open.reserve(open_.size());
  for (const auto& [key, o] : open_) {
    TimelineSavedOpen so;
    so.key_kind = key.kind;
    so.datid = key.datid;
    so.classid = key.classid;
    so.objid = key.objid;
    so.objsubid = key.objsubid;
    so.pid = key.pid;
    so.wait = key.wait;
    so.text = key.text;
    so.backend_start = o.backend_start;
    so.interval = o.interval;
    so.interval.end = EndOf(key, o);
    s.open.push_back(std::move(so));
  }
  // In a stable order (the map's is not): a state unchanged is written the same.
  std::sort(s.open.begin(), s.open.end(), [](const auto& a, const auto& b) {
    return std::tie(a.interval.start, a.key_kind, a.datid, a.classid, a.objid, a.objsubid, a.pid,
                    a.wait, a.text) < std::tie(b.interval.start, b.key_kind, b.datid, b.classid,
                                               b.objid, b.objsubid, b.pid, b.wait, b.text);
  });
  if (with_closed) s.closed.assign(closed_.begin(), closed_.end());
  if (with_markers) {
    for (const auto& [kind, ring] : markers_)
      s.markers.insert(s.markers.end(), ring.begin(), ring.end());
  }
  return s;
}

void Timeline::Restore(const TimelineSaved& saved) {
  MutexLock lock(&mu_);
  open_.clear();
  closed_.clear();
  markers_.clear();
  markers_total_ = 0;
  gaps_.clear();
  last_locks_.clear();
  last_locks_untracked_ = 0;
  locks_seen_ = 0;
  locks_end_ = 0;
  open_held_locks_ = 0;
  unread_since_.clear();
  untracked_ = 0;
  now_ = saved.now;
  first_poll_ = saved.first_poll;
  poll_ = saved.now > 0 ? 1 : 0;
  dropped_intervals_ = saved.dropped_intervals;
  dropped_markers_ = saved.dropped_markers;
  for (const TimelineGap& g : saved.gaps) gaps_.push_back(g);
  while (gaps_.size() > kTimelineGaps) gaps_.pop_front();
  for (const TimelineSavedOpen& so : saved.open) {
    if (!so.interval.row) continue;
    if (open_.size() >= kOpenIntervals) {
      ++dropped_intervals_;
      continue;
    }
    OpenKey key{so.key_kind, so.datid, so.classid, so.objid, so.objsubid, so.pid, so.wait, so.text};
    const bool held_lock = IsHeldLock(key);
    auto [it, fresh] = open_.try_emplace(std::move(key));
    if (!fresh) continue;
    if (held_lock) ++open_held_locks_;
    Open& o = it->second;
    o.interval = Restored(so.interval);
    o.interval.open = true;
    o.seen = poll_;
    o.opened = poll_;
    o.backend_start = so.backend_start;
  }
  closed_total_ = 0;
  for (const TimelineInterval& i : saved.closed) {
    if (!i.row) continue;
    closed_.push_back(Restored(i));
    closed_.back().open = false;
    ++closed_total_;
  }
  while (closed_.size() > kClosedIntervals) {
    closed_.pop_front();
    ++dropped_intervals_;
  }
  for (const TimelineMarker& m : saved.markers) {
    if (!m.row) continue;
    auto& ring = markers_[MarkerKindKey(m)];
    ring.push_back(m);
    TimelineMarker& back = ring.back();
    back.seq = markers_total_++;
    back.row = Row(m.row->kind, m.row->scope, m.row->name);
    back.previous = Clip(back.previous);
    back.current = Clip(back.current);
    if (ring.size() > kMarkersPerKind) {
      ring.pop_front();
      ++dropped_markers_;
    }
  }
  restored_ = poll_ > 0;
  ++changes_;
}

uint64_t Timeline::changes() const {
  MutexLock lock(&mu_);
  return changes_;
}

size_t Timeline::ApproxBytes() const {
  MutexLock lock(&mu_);
  size_t bytes = sizeof *this;
  // An unordered_map node: the value, the next pointer and the cached hash; plus its bucket.
  for (const auto& [key, o] : open_) {
    bytes += sizeof(key) + sizeof(o) + 2 * sizeof(void*) + sizeof(void*) + StringBytes(key.text) +
             StringBytes(o.interval.who) + StringBytes(o.interval.detail);
  }
  bytes += last_locks_.capacity() * sizeof(last_locks_[0]);
  for (const TimelineInterval& i : closed_) bytes += IntervalBytes(i);
  for (const auto& [kind, ring] : markers_) {
    for (const TimelineMarker& m : ring) bytes += MarkerBytes(m);
  }
  // A map node (three pointers and a colour) and the shared row (with its control block).
  for (const auto& [row, weak] : rows_) {
    bytes += 4 * sizeof(void*) + sizeof row + sizeof weak + StringBytes(row.scope) +
             StringBytes(row.name);
    if (!weak.expired()) {
      bytes +=
          sizeof(TimelineRow) + 2 * sizeof(long) + StringBytes(row.scope) + StringBytes(row.name);
    }
  }
  return bytes;
}

size_t Timeline::intervals() const {
  MutexLock lock(&mu_);
  return open_.size() + closed_.size();
}

size_t Timeline::markers() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [kind, ring] : markers_) n += ring.size();
  return n;
}

std::vector<TimelineInterval> Timeline::ClosedSince(uint64_t from, uint64_t* next,
                                                    size_t max) const {
  MutexLock lock(&mu_);
  const uint64_t first = closed_total_ - closed_.size();  // the number of closed_.front()
  const size_t begin =
      from <= first ? 0 : static_cast<size_t>(std::min<uint64_t>(from - first, closed_.size()));
  const size_t end = closed_.size() - begin > max ? begin + max : closed_.size();
  *next = first + end;
  return std::vector<TimelineInterval>(closed_.begin() + static_cast<std::ptrdiff_t>(begin),
                                       closed_.begin() + static_cast<std::ptrdiff_t>(end));
}

std::vector<TimelineMarker> Timeline::MarkersSince(uint64_t from, uint64_t* next,
                                                   size_t max) const {
  MutexLock lock(&mu_);
  std::vector<const TimelineMarker*> since;
  for (const auto& [kind, ring] : markers_) {
    // A ring is in the order taken: its markers from `from` on are its last ones.
    auto it = std::partition_point(ring.begin(), ring.end(),
                                   [&](const TimelineMarker& m) { return m.seq < from; });
    for (; it != ring.end(); ++it) since.push_back(&*it);
  }
  std::sort(since.begin(), since.end(),
            [](const TimelineMarker* a, const TimelineMarker* b) { return a->seq < b->seq; });
  *next = markers_total_;
  if (since.size() > max) {
    since.resize(max);
    *next = max > 0 ? since.back()->seq + 1 : from;
  }
  std::vector<TimelineMarker> out;
  out.reserve(since.size());
  for (const TimelineMarker* m : since) out.push_back(*m);
  return out;
}

size_t Timeline::closed_count() const {
  MutexLock lock(&mu_);
  return closed_.size();
}

}  // namespace pglock
