#include "exporter/events/event_log.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "exporter/log.h"

namespace pglock {
namespace {

std::string Quoted(const std::string& s) { return "\"" + JsonEscape(s) + "\""; }

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string IdentityJson(const Identity& id, const std::string& holder) {
  std::string o = "{\"pid\":" + std::to_string(id.pid);
  o += ",\"application_name\":" + Quoted(id.application_name);
  o += ",\"usename\":" + Quoted(id.usename);
  o += ",\"client_addr\":" + Quoted(id.client_addr);
  o += ",\"holder\":" + Quoted(holder) + "}";
  return o;
}

// A text-log value: bare when it is a plain token, else quoted with JSON escapes.
std::string TextValue(const std::string& s) {
  bool plain = !s.empty();
  for (unsigned char c : s) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7F) plain = false;
  }
  return plain ? s : Quoted(s);
}

}  // namespace

void CoalesceEvents(std::vector<Event>* events) {
  using Key = std::tuple<EventKind, double, std::string, std::string, EventCause, int, int, int,
                         std::string, std::string>;
  std::map<Key, size_t> first;  // -> index in `out`
  std::vector<Event> out;
  std::vector<size_t> named;  // per event of `out`: locks named in its `lock`
  for (Event& e : *events) {
    if (!InfoOf(e.kind).coalesced) {
      out.push_back(std::move(e));
      named.push_back(1);
      continue;
    }
    const Key key{e.kind,          e.time,        e.datname,
                  e.pooler,        e.cause,       static_cast<int>(e.evidence),
                  e.previous.pid,  e.current.pid, e.previous_holder,
                  e.current_holder};
    const auto [it, fresh] = first.try_emplace(key, out.size());
    if (fresh) {
      out.push_back(std::move(e));
      named.push_back(1);
      continue;
    }
    Event& into = out[it->second];
    into.count += e.count;
    if (named[it->second] < kCoalescedNames) {
      into.lock += ", " + e.lock;
      ++named[it->second];
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].count > static_cast<int64_t>(named[i])) {
      out[i].lock +=
          " and " + std::to_string(out[i].count - static_cast<int64_t>(named[i])) + " more";
    }
  }
  *events = std::move(out);
}

std::string EventJson(const Event& e) {
  std::string o = "{\"time\":" + Number(e.time);
  o += ",\"target\":" + Quoted(e.target);
  o += ",\"kind\":" + Quoted(EventKindName(e.kind));
  o += ",\"cause\":" + Quoted(EventCauseName(e.cause));
  if (e.evidence != EndEvidence::kNone) {
    o += ",\"evidence\":" + Quoted(EndEvidenceLabel(e.evidence));
  }
  o += ",\"datname\":" + Quoted(e.datname);
  o += ",\"lock\":" + Quoted(e.lock);
  if (e.count != 1) o += ",\"count\":" + std::to_string(e.count);
  o += ",\"table\":" + Quoted(e.table);
  o += ",\"lease\":" + Quoted(e.lease);
  o += ",\"pooler\":" + Quoted(e.pooler);
  o += ",\"previous\":" + IdentityJson(e.previous, e.previous_holder);
  o += ",\"current\":" + IdentityJson(e.current, e.current_holder);
  if (e.kind == EventKind::kBlockingEpisode) {
    o += ",\"outcome\":" + Quoted(EventOutcomeName(e.outcome)) +
         ",\"started\":" + Number(e.started) + ",\"duration_seconds\":" + Number(e.duration) +
         ",\"peak_blocked\":" + std::to_string(e.peak_blocked) +
         ",\"longest_wait_seconds\":" + Number(e.longest_wait);
  } else if (e.kind == EventKind::kLockWait) {
    o += ",\"outcome\":" + Quoted(EventOutcomeName(e.outcome)) +
         ",\"started\":" + Number(e.started) + ",\"duration_seconds\":" + Number(e.duration);
  } else if (e.kind == EventKind::kLockTimeout && e.duration > 0) {
    o += ",\"duration_seconds\":" + Number(e.duration);
  }
  if (!e.detail.empty()) o += ",\"detail\":" + Quoted(e.detail);
  if (e.gap_to > 0) {
    o += ",\"exporter_gap\":{\"from\":" + Number(e.gap_from) + ",\"to\":" + Number(e.gap_to) + "}";
  }
  return o + "}";
}

std::string EventText(const Event& e) {
  std::string o = "kind=" + TextValue(EventKindName(e.kind)) + " target=" + TextValue(e.target);
  const auto field = [&o](const char* key, const std::string& v) {
    if (!v.empty()) o += std::string(" ") + key + "=" + TextValue(v);
  };
  field("cause", EventCauseName(e.cause));
  field("evidence", EndEvidenceLabel(e.evidence));
  field("datname", e.datname);
  field("lock", e.lock);
  if (e.count != 1) o += " count=" + std::to_string(e.count);
  field("table", e.table);
  field("lease", e.lease);
  field("pooler", e.pooler);
  const auto who = [&](const char* side, const Identity& id, const std::string& holder) {
    const std::string p(side);
    if (id.pid != 0) {
      o += " " + p + "_pid=" + std::to_string(id.pid);
      o += " " + p + "_application_name=" + TextValue(id.application_name);
      o += " " + p + "_usename=" + TextValue(id.usename);
      o += " " + p + "_client_addr=" + TextValue(id.client_addr);
    }
    field((p + "_holder").c_str(), holder);
  };
  who("previous", e.previous, e.previous_holder);
  who("current", e.current, e.current_holder);
  if (e.kind == EventKind::kBlockingEpisode) {
    o += " outcome=" + TextValue(EventOutcomeName(e.outcome)) + " started=" + Number(e.started) +
         " duration_seconds=" + Number(e.duration) +
         " peak_blocked=" + std::to_string(e.peak_blocked) +
         " longest_wait_seconds=" + Number(e.longest_wait);
  } else if (e.kind == EventKind::kLockWait ||
             (e.kind == EventKind::kLockTimeout && e.duration > 0)) {
    field("outcome", EventOutcomeName(e.outcome));
    o += " duration_seconds=" + Number(e.duration);
  }
  field("detail", e.detail);
  if (e.gap_to > 0)
    o += " exporter_gap_from=" + Number(e.gap_from) + " exporter_gap_to=" + Number(e.gap_to);
  return o + " time=" + Number(e.time);
}

void EventLog::Append(std::vector<Event> events) {
  if (events.empty() || capacity_ == 0) return;
  MutexLock lock(&mu_);
  for (Event& e : events) {
    auto& ring = rings_[e.kind];
    ring.emplace_back(next_seq_++, std::make_shared<const Event>(std::move(e)));
    if (ring.size() > capacity_) ring.pop_front();
  }
  contents_.reset();
}

std::shared_ptr<const EventList> EventLog::Contents() const {
  MutexLock lock(&mu_);
  if (contents_) return contents_;
  std::vector<std::pair<uint64_t, std::shared_ptr<const Event>>> all;
  for (const auto& [kind, ring] : rings_) all.insert(all.end(), ring.begin(), ring.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  auto list = std::make_shared<EventList>();
  list->reserve(all.size());
  for (auto& [seq, e] : all) list->push_back(std::move(e));
  contents_ = std::move(list);
  return contents_;
}

}  // namespace pglock
