#include "exporter/events/event_log.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>

#include "exporter/log.h"

namespace pglock {
namespace {

std::string Quoted(std::string_view s) { return "\"" + JsonEscape(s) + "\""; }

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// A party's texts are read in place: an event list of thousands is rendered without copying them.
std::string PartyJson(const EventParty& party, const std::string& holder) {
  std::string o = "{\"pid\":" + std::to_string(party.pid);
  o += ",\"application_name\":" + Quoted(party.application_name());
  o += ",\"usename\":" + Quoted(party.usename());
  o += ",\"client_addr\":" + Quoted(party.client_addr());
  o += ",\"holder\":" + Quoted(holder) + "}";
  return o;
}

// A text-log value: bare when it is a plain token, else quoted with JSON escapes.
std::string TextValue(std::string_view s) {
  bool plain = !s.empty();
  for (unsigned char c : s) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7F) plain = false;
  }
  return plain ? std::string(s) : Quoted(s);
}

}  // namespace

void CoalesceEvents(std::vector<Event>* events) {
  using Key = std::tuple<EventKind, double, std::string, std::string, EventCause, int, int, int,
                         std::string, std::string>;
  std::map<Key, size_t> first;  // -> index in `out`
  std::vector<Event> out;
  std::vector<size_t> named;  // per event of `out`: locks named in its `lock`
  // Per event of `out` whose names grew: its `lock` text, written back once at the end (a shared
  // text is made once, not once per name added).
  std::map<size_t, std::string> names;
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
      auto [text, added] = names.try_emplace(it->second);
      if (added) text->second = into.lock.str();
      text->second += ", " + e.lock.str();
      ++named[it->second];
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const bool more = out[i].count > static_cast<int64_t>(named[i]);
    const auto text = names.find(i);
    if (!more && text == names.end()) continue;
    std::string lock = text != names.end() ? std::move(text->second) : out[i].lock.str();
    if (more) {
      lock += " and " + std::to_string(out[i].count - static_cast<int64_t>(named[i])) + " more";
    }
    out[i].lock = lock;
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
  o += ",\"previous\":" + PartyJson(e.previous, e.previous_holder);
  o += ",\"current\":" + PartyJson(e.current, e.current_holder);
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
  const auto who = [&](const char* side, const EventParty& party, const std::string& holder) {
    const std::string p(side);
    if (party.pid != 0) {
      o += " " + p + "_pid=" + std::to_string(party.pid);
      o += " " + p + "_application_name=" + TextValue(party.application_name());
      o += " " + p + "_usename=" + TextValue(party.usename());
      o += " " + p + "_client_addr=" + TextValue(party.client_addr());
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

EventParty::EventParty(const Identity& id) : pid(id.pid) {
  const std::string_view texts[] = {id.application_name, id.client_addr, id.usename, id.state,
                                    id.query};
  size_t size = 0;
  for (std::string_view t : texts) size += t.size();
  if (size == 0) return;
  std::string joined;
  joined.reserve(size + sizeof(uint32_t) * std::size(texts));
  for (std::string_view t : texts) {
    const auto length = static_cast<uint32_t>(t.size());
    joined.append(reinterpret_cast<const char*>(&length), sizeof length);
    joined.append(t);
  }
  texts_ = SharedText(joined);
}

EventParty::operator Identity() const {
  return Identity{pid,
                  std::string(application_name()),
                  std::string(client_addr()),
                  std::string(usename()),
                  std::string(state()),
                  std::string(query())};
}

std::string_view EventParty::Text(int i) const {
  if (texts_.empty()) return {};
  std::string_view rest = texts_;
  for (;; --i) {
    uint32_t length = 0;
    std::memcpy(&length, rest.data(), sizeof length);
    rest.remove_prefix(sizeof length);
    if (i == 0) return rest.substr(0, length);
    rest.remove_prefix(length);
  }
}

void EventLog::Append(std::vector<Event> events) {
  if (events.empty() || capacity_ == 0) return;
  MutexLock lock(&mu_);
  for (Event& e : events) {
    Ring& ring = rings_[e.kind];
    // The ring's events hold positions [front, front + size) of its chunks, kSize to a chunk.
    const size_t next = ring.front + ring.size;
    if (next / EventChunk::kSize == ring.chunks.size()) {
      ring.chunks.push_back(std::make_shared<StoredChunk>());
    }
    StoredChunk& chunk = *ring.chunks.back();
    const size_t slot = next % EventChunk::kSize;
    chunk.events[slot] = std::move(e);
    chunk.slots[slot] = {next_seq_++, &chunk.events[slot]};
    ++ring.size;
    if (ring.size > capacity_) {
      --ring.size;
      if (++ring.front == EventChunk::kSize) {
        ring.chunks.pop_front();
        ring.front = 0;
      }
    }
  }
  contents_.reset();
}

size_t EventLog::Adopt(EventLog* from) {
  uint64_t next = 0;
  {
    MutexLock lock(&mu_);
    MutexLock other(&from->mu_);
    if (next_seq_ == 0 && capacity_ == from->capacity_) {
      size_t kept = 0;
      for (const auto& [kind, ring] : from->rings_) kept += ring.size;
      rings_.swap(from->rings_);
      std::swap(next_seq_, from->next_seq_);
      contents_.reset();
      from->contents_.reset();
      return kept;
    }
  }
  std::vector<Event> copies;
  for (const auto& e : from->Since(0, &next)) copies.push_back(*e);
  const size_t kept = copies.size();
  Append(std::move(copies));
  {
    MutexLock other(&from->mu_);
    from->rings_.clear();
    from->next_seq_ = 0;
    from->contents_.reset();
  }
  return kept;
}

std::shared_ptr<const EventList> EventLog::Contents() const {
  MutexLock lock(&mu_);
  if (contents_) return contents_;
  std::vector<std::vector<EventList::Span>> by_kind;
  by_kind.reserve(rings_.size());
  for (const auto& [kind, ring] : rings_) {
    std::vector<EventList::Span>& spans = by_kind.emplace_back();
    spans.reserve(ring.chunks.size());
    size_t left = ring.size;
    for (size_t i = 0; i < ring.chunks.size() && left > 0; ++i) {
      const size_t begin = i == 0 ? ring.front : 0;
      const size_t end = std::min(EventChunk::kSize, begin + left);
      spans.push_back({ring.chunks[i], static_cast<uint32_t>(begin), static_cast<uint32_t>(end)});
      left -= end - begin;
    }
  }
  contents_ = std::make_shared<const EventList>(std::move(by_kind));
  return contents_;
}

std::vector<std::shared_ptr<const Event>> EventLog::Since(uint64_t from, uint64_t* next) const {
  std::vector<std::pair<uint64_t, std::shared_ptr<const Event>>> found;
  {
    MutexLock lock(&mu_);
    *next = next_seq_;
    for (const auto& [kind, ring] : rings_) {
      // From the newest slot back to the first older than `from`, or the ring's front.
      size_t pos = ring.front + ring.size;
      while (pos > ring.front) {
        --pos;
        const std::shared_ptr<StoredChunk>& chunk = ring.chunks[pos / EventChunk::kSize];
        const auto& [seq, event] = chunk->slots[pos % EventChunk::kSize];
        if (seq < from) break;
        found.emplace_back(seq, std::shared_ptr<const Event>(chunk, event));
      }
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::shared_ptr<const Event>> out;
  out.reserve(found.size());
  for (auto& [seq, e] : found) out.push_back(std::move(e));
  return out;
}

}  // namespace pglock
