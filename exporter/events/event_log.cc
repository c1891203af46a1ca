#include "exporter/events/event_log.h"

#include <cstdio>

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

std::string EventJson(const Event& e) {
  std::string o = "{\"time\":" + Number(e.time);
  o += ",\"target\":" + Quoted(e.target);
  o += ",\"kind\":" + Quoted(e.kind);
  o += ",\"cause\":" + Quoted(e.cause);
  if (e.evidence != EndEvidence::kNone) {
    o += ",\"evidence\":" + Quoted(EndEvidenceLabel(e.evidence));
  }
  o += ",\"datname\":" + Quoted(e.datname);
  o += ",\"lock\":" + Quoted(e.lock);
  o += ",\"table\":" + Quoted(e.table);
  o += ",\"lease\":" + Quoted(e.lease);
  o += ",\"pooler\":" + Quoted(e.pooler);
  o += ",\"previous\":" + IdentityJson(e.previous, e.previous_holder);
  o += ",\"current\":" + IdentityJson(e.current, e.current_holder);
  if (e.kind == "blocking_episode") {
    o += ",\"outcome\":" + Quoted(e.outcome) + ",\"started\":" + Number(e.started) +
         ",\"duration_seconds\":" + Number(e.duration) +
         ",\"peak_blocked\":" + std::to_string(e.peak_blocked) +
         ",\"longest_wait_seconds\":" + Number(e.longest_wait);
  } else if (e.kind == "lock_wait") {
    o += ",\"outcome\":" + Quoted(e.outcome) + ",\"started\":" + Number(e.started) +
         ",\"duration_seconds\":" + Number(e.duration);
  } else if (e.kind == "lock_timeout" && e.duration > 0) {
    o += ",\"duration_seconds\":" + Number(e.duration);
  }
  if (!e.detail.empty()) o += ",\"detail\":" + Quoted(e.detail);
  return o + "}";
}

std::string EventText(const Event& e) {
  std::string o = "kind=" + TextValue(e.kind) + " target=" + TextValue(e.target);
  const auto field = [&o](const char* key, const std::string& v) {
    if (!v.empty()) o += std::string(" ") + key + "=" + TextValue(v);
  };
  field("cause", e.cause);
  field("evidence", EndEvidenceLabel(e.evidence));
  field("datname", e.datname);
  field("lock", e.lock);
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
  if (e.kind == "blocking_episode") {
    o += " outcome=" + TextValue(e.outcome) + " started=" + Number(e.started) +
         " duration_seconds=" + Number(e.duration) +
         " peak_blocked=" + std::to_string(e.peak_blocked) +
         " longest_wait_seconds=" + Number(e.longest_wait);
  } else if (e.kind == "lock_wait" || (e.kind == "lock_timeout" && e.duration > 0)) {
    field("outcome", e.outcome);
    o += " duration_seconds=" + Number(e.duration);
  }
  field("detail", e.detail);
  return o + " time=" + Number(e.time);
}

void EventLog::Append(std::vector<Event> events) {
  if (events.empty() || capacity_ == 0) return;
  MutexLock lock(&mu_);
  for (Event& e : events) {
    ring_.push_back(std::make_shared<const Event>(std::move(e)));
    if (ring_.size() > capacity_) ring_.pop_front();
  }
  contents_.reset();
}

std::shared_ptr<const EventList> EventLog::Contents() const {
  MutexLock lock(&mu_);
  if (!contents_) contents_ = std::make_shared<const EventList>(ring_.begin(), ring_.end());
  return contents_;
}

}  // namespace pglock
