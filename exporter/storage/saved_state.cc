#include "exporter/storage/saved_state.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

#include "exporter/events/event_names.h"
#include "exporter/log.h"

namespace pglock {
namespace {

constexpr std::string_view kFormatName = "pglock_exporter target state";

// ---- writing ---------------------------------------------------------------------------------

// A JSON text built in one string: values separated by commas where needed.
class Writer {
 public:
  std::string Take() { return std::move(o_); }
  void Reserve(size_t n) { o_.reserve(n); }
  void Open(char c) {
    Sep();
    o_ += c;
    fresh_ = true;
  }
  void Close(char c) {
    o_ += c;
    fresh_ = false;
  }
  void Key(std::string_view k) {
    Sep();
    o_ += '"';
    o_ += k;
    o_ += "\":";
    fresh_ = true;
  }
  void Str(const std::string& s) {
    Sep();
    o_ += '"';
    // Most strings need no escape: copied as they are (JsonEscape allocates).
    const bool plain = std::all_of(
        s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; });
    if (plain) {
      o_ += s;
    } else {
      o_ += JsonEscape(s);
    }
    o_ += '"';
  }
  // The shortest text that reads back to the same double; past 2^63 in scientific notation, or
  // the shortest form may be digits alone, which a JSON reader takes for an integer too large for
  // it (found by tests/fuzz/state_fuzz: 1.7963977777777777e20 came out as 21 digits).
  void Num(double v) {
    Sep();
    if (!std::isfinite(v)) v = 0;
    char buf[40];
    const auto r = std::fabs(v) < 9.2e18
                       ? std::to_chars(buf, buf + sizeof buf, v)
                       : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    o_.append(buf, r.ptr);
  }
  void Int(int64_t v) {
    Sep();
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    o_.append(buf, r.ptr);
  }
  void U64(uint64_t v) { Str(std::to_string(v)); }  // as text: JSON numbers stop at 2^53
  void Bool(bool v) {
    Sep();
    o_ += v ? "true" : "false";
  }
  void Null() {
    Sep();
    o_ += "null";
  }
  void OptNum(const std::optional<double>& v) { v ? Num(*v) : Null(); }

 private:
  void Sep() {
    if (!fresh_) o_ += ',';
    fresh_ = false;
  }
  std::string o_;
  bool fresh_ = true;
};

// The four numbers of an advisory key, as four elements of the enclosing array.
void WriteKey(const AdvisoryKey& k, Writer* w) {
  w->Int(k.datid);
  w->Int(k.classid);
  w->Int(k.objid);
  w->Int(k.objsubid);
}

void WriteSession(const Session& s, Writer* w) {
  w->Open('[');
  w->Int(s.pid);
  w->Int(s.datid);
  w->Str(s.datname);
  w->Int(s.usesysid);
  w->Str(s.usename);
  w->Str(s.application_name);
  w->Str(s.client_addr);
  w->Str(s.state);
  w->Num(s.backend_start);
  w->OptNum(s.xact_start);
  w->OptNum(s.state_change);
  w->OptNum(s.query_start);
  w->Close(']');
}

void WriteLock(const AdvisoryLock& l, Writer* w) {
  w->Open('[');
  WriteKey(l.key, w);
  w->Int(l.pid);
  w->Bool(l.exclusive);
  w->Bool(l.granted);
  w->Bool(l.outside_transaction);
  w->Close(']');
}

void WritePoll(const PollData& p, Writer* w) {
  w->Open('{');
  w->Key("now");
  w->Num(p.now);
  w->Key("postmaster_start");
  w->Num(p.postmaster_start);
  w->Key("server_version_num");
  w->Int(p.server_version_num);
  w->Key("in_recovery");
  w->Bool(p.in_recovery);
  w->Key("full_visibility");
  w->Bool(p.full_visibility);
  w->Key("database_stats_snapshot");
  w->OptNum(p.database_stats_snapshot);
  w->Key("sessions");
  w->Open('[');
  for (const Session& s : p.sessions) WriteSession(s, w);
  w->Close(']');
  w->Key("locks");
  w->Open('[');
  for (const AdvisoryLock& l : p.locks) WriteLock(l, w);
  w->Close(']');
  w->Key("database_stats");
  if (p.database_stats) {
    w->Open('[');
    for (const DatabaseStats& d : *p.database_stats) {
      w->Open('[');
      w->Int(d.datid);
      w->Str(d.datname);
      w->Int(d.sessions_fatal);
      w->Int(d.sessions_killed);
      w->Int(d.sessions_abandoned);
      w->Int(d.deadlocks);
      w->Close(']');
    }
    w->Close(']');
  } else {
    w->Null();
  }
  w->Key("settings");
  w->Open('[');
  for (const ServerSetting& s : p.settings) {
    w->Open('[');
    w->Str(s.name);
    w->Num(s.seconds);
    w->Str(s.source);
    w->Close(']');
  }
  w->Close(']');
  w->Key("overrides");
  w->Open('[');
  for (const SettingOverride& o : p.overrides) {
    w->Open('[');
    w->Str(o.name);
    w->Int(o.datid);
    w->Int(o.roleid);
    w->Str(o.database);
    w->Str(o.role);
    w->Num(o.seconds);
    w->Close(']');
  }
  w->Close(']');
  w->Close('}');
}

// A counter map as [[label..., value], ...].
template <typename K>
void WriteCounterMap(const std::map<K, double>& m, Writer* w) {
  w->Open('[');
  for (const auto& [k, v] : m) {
    w->Open('[');
    if constexpr (std::is_same_v<K, std::string>) {
      w->Str(k);
    } else {
      std::apply([&](const auto&... part) { (w->Str(part), ...); }, k);
    }
    w->Num(v);
    w->Close(']');
  }
  w->Close(']');
}

void WriteHistogram(const CountHistogram& h, Writer* w) {
  w->Open('{');
  w->Key("bounds");
  w->Open('[');
  for (double b : h.bounds) w->Num(b);
  w->Close(']');
  w->Key("counts");
  w->Open('[');
  for (double c : h.counts) w->Num(c);
  w->Close(']');
  w->Key("sum");
  w->Num(h.sum);
  w->Key("count");
  w->Num(h.count);
  w->Close('}');
}

void WriteCounters(const Counters& c, Writer* w) {
  w->Open('{');
  ForEachCounter(
      c,
      [&](const char* name, const auto& m) {
        w->Key(name);
        WriteCounterMap(m, w);
      },
      [](const std::string&, const CountHistogram&) {});
  w->Key("histograms");
  w->Open('[');
  ForEachCounter(
      c, [](const char*, const auto&) {},
      [&](const std::string& name, const CountHistogram& h) {
        w->Open('[');
        w->Str(name);
        WriteHistogram(h, w);
        w->Close(']');
      });
  w->Close(']');
  w->Close('}');
}

void WriteIdentity(const Identity& id, Writer* w) {
  w->Open('[');
  w->Int(id.pid);
  w->Str(id.application_name);
  w->Str(id.client_addr);
  w->Str(id.usename);
  w->Str(id.state);
  w->Str(id.query);
  w->Close(']');
}

void WriteEvent(const Event& e, Writer* w) {
  w->Open('{');
  w->Key("time");
  w->Num(e.time);
  w->Key("kind");
  w->Str(EventKindName(e.kind));
  w->Key("cause");
  w->Str(EventCauseName(e.cause));
  w->Key("evidence");
  w->Str(e.evidence == EndEvidence::kNone ? "" : EndEvidenceLabel(e.evidence));
  w->Key("outcome");
  w->Str(EventOutcomeName(e.outcome));
  w->Key("strings");
  w->Open('[');
  for (const std::string* s : {&e.target, &e.datname, &e.lock, &e.table, &e.lease, &e.pooler,
                               &e.previous_holder, &e.current_holder, &e.detail}) {
    w->Str(*s);
  }
  w->Close(']');
  w->Key("previous");
  WriteIdentity(e.previous, w);
  w->Key("current");
  WriteIdentity(e.current, w);
  w->Key("numbers");
  w->Open('[');
  for (double v : {e.started, e.duration, e.longest_wait, e.gap_from, e.gap_to}) w->Num(v);
  w->Int(e.peak_blocked);
  w->Int(e.count);
  w->Close(']');
  w->Close('}');
}

// ---- reading ---------------------------------------------------------------------------------

namespace dom = simdjson::dom;

// Reads typed values out of DOM elements; the first failure is kept and every later read is a
// no-op, so a decoder reads straight through and checks once.
class Reader {
 public:
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  void Fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }

  dom::element Field(dom::object o, std::string_view key) {
    dom::element e;
    if (ok() && o.at_key(key).get(e) != simdjson::SUCCESS)
      Fail("missing \"" + std::string(key) + "\"");
    return e;
  }
  dom::object Obj(dom::element e, std::string_view what) {
    dom::object o;
    if (ok() && e.get_object().get(o) != simdjson::SUCCESS)
      Fail(std::string(what) + ": not an object");
    return o;
  }
  // The elements of an array (none once something failed: a default element is never read).
  std::vector<dom::element> Arr(dom::element e, std::string_view what) {
    std::vector<dom::element> out;
    dom::array a;
    if (!ok()) return out;
    if (e.get_array().get(a) != simdjson::SUCCESS) {
      Fail(std::string(what) + ": not an array");
      return out;
    }
    for (dom::element x : a) out.push_back(x);
    return out;
  }
  // The elements of an array of exactly n elements.
  std::vector<dom::element> Tuple(dom::element e, size_t n, std::string_view what) {
    std::vector<dom::element> out = Arr(e, what);
    if (!ok()) return out;
    if (out.size() != n) {
      Fail(std::string(what) + ": " + std::to_string(out.size()) + " elements, not " +
           std::to_string(n));
      out.clear();
    }
    return out;
  }
  double Num(dom::element e, std::string_view what) {
    double v = 0;
    if (!ok()) return 0;
    int64_t i = 0;
    uint64_t u = 0;
    if (e.get_double().get(v) == simdjson::SUCCESS) return v;
    if (e.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
    if (e.get_uint64().get(u) == simdjson::SUCCESS) return static_cast<double>(u);
    Fail(std::string(what) + ": not a number");
    return 0;
  }
  std::optional<double> OptNum(dom::element e, std::string_view what) {
    if (ok() && e.is_null()) return std::nullopt;
    return Num(e, what);
  }
  int64_t Int(dom::element e, std::string_view what, int64_t lo, int64_t hi) {
    int64_t v = 0;
    if (!ok()) return 0;
    if (e.get_int64().get(v) != simdjson::SUCCESS || v < lo || v > hi) {
      Fail(std::string(what) + ": not an integer in range");
      return 0;
    }
    return v;
  }
  uint32_t Oid(dom::element e, std::string_view what) {
    return static_cast<uint32_t>(Int(e, what, 0, UINT32_MAX));
  }
  int Pid(dom::element e, std::string_view what) {
    return static_cast<int>(Int(e, what, INT32_MIN, INT32_MAX));
  }
  bool Bool(dom::element e, std::string_view what) {
    bool v = false;
    if (ok() && e.get_bool().get(v) != simdjson::SUCCESS)
      Fail(std::string(what) + ": not a boolean");
    return v;
  }
  std::string Str(dom::element e, std::string_view what) {
    std::string_view v;
    if (ok() && e.get_string().get(v) != simdjson::SUCCESS)
      Fail(std::string(what) + ": not a string");
    return std::string(v);
  }
  uint64_t U64(dom::element e, std::string_view what) {
    const std::string s = Str(e, what);
    if (!ok()) return 0;
    uint64_t v = 0;
    if (s.empty() || s.size() > 20) Fail(std::string(what) + ": not a number");
    for (char c : s) {
      if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) {
        Fail(std::string(what) + ": not a number");
        return 0;
      }
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v;
  }

 private:
  std::string error_;
};

// An advisory key from t[first] .. t[first + 3]; `what` names the tuple in errors.
AdvisoryKey ReadKey(Reader& r, const std::vector<dom::element>& t, size_t first,
                    const std::string& what) {
  AdvisoryKey k;
  k.datid = r.Oid(t[first], what + " datid");
  k.classid = r.Oid(t[first + 1], what + " classid");
  k.objid = r.Oid(t[first + 2], what + " objid");
  k.objsubid = static_cast<int>(r.Int(t[first + 3], what + " objsubid", 1, 2));
  return k;
}

Session ReadSession(Reader& r, dom::element e) {
  const auto t = r.Tuple(e, 12, "session");
  Session s;
  if (!r.ok()) return s;
  s.pid = r.Pid(t[0], "session pid");
  s.datid = r.Oid(t[1], "session datid");
  s.datname = r.Str(t[2], "session datname");
  s.usesysid = r.Oid(t[3], "session usesysid");
  s.usename = r.Str(t[4], "session usename");
  s.application_name = r.Str(t[5], "session application_name");
  s.client_addr = r.Str(t[6], "session client_addr");
  s.state = r.Str(t[7], "session state");
  s.backend_start = r.Num(t[8], "session backend_start");
  s.xact_start = r.OptNum(t[9], "session xact_start");
  s.state_change = r.OptNum(t[10], "session state_change");
  s.query_start = r.OptNum(t[11], "session query_start");
  return s;
}

AdvisoryLock ReadLock(Reader& r, dom::element e) {
  const auto t = r.Tuple(e, 8, "lock");
  AdvisoryLock l;
  if (!r.ok()) return l;
  l.key = ReadKey(r, t, 0, "lock");
  l.pid = r.Pid(t[4], "lock pid");
  l.exclusive = r.Bool(t[5], "lock exclusive");
  l.granted = r.Bool(t[6], "lock granted");
  l.outside_transaction = r.Bool(t[7], "lock outside_transaction");
  return l;
}

std::shared_ptr<PollData> ReadPoll(Reader& r, dom::element e) {
  auto p = std::make_shared<PollData>();
  const dom::object o = r.Obj(e, "inventory");
  p->now = r.Num(r.Field(o, "now"), "now");
  p->postmaster_start = r.Num(r.Field(o, "postmaster_start"), "postmaster_start");
  p->server_version_num =
      static_cast<int>(r.Int(r.Field(o, "server_version_num"), "server_version_num", 0, INT32_MAX));
  p->in_recovery = r.Bool(r.Field(o, "in_recovery"), "in_recovery");
  p->full_visibility = r.Bool(r.Field(o, "full_visibility"), "full_visibility");
  p->database_stats_snapshot =
      r.OptNum(r.Field(o, "database_stats_snapshot"), "database_stats_snapshot");
  p->inventory = true;
  if (!r.ok()) return p;
  for (dom::element s : r.Arr(r.Field(o, "sessions"), "sessions")) {
    p->sessions.push_back(ReadSession(r, s));
  }
  for (dom::element l : r.Arr(r.Field(o, "locks"), "locks")) p->locks.push_back(ReadLock(r, l));
  const dom::element stats = r.Field(o, "database_stats");
  if (r.ok() && !stats.is_null()) {
    p->database_stats.emplace();
    for (dom::element d : r.Arr(stats, "database_stats")) {
      const auto t = r.Tuple(d, 6, "database_stats");
      if (!r.ok()) break;
      DatabaseStats s;
      s.datid = r.Oid(t[0], "stats datid");
      s.datname = r.Str(t[1], "stats datname");
      s.sessions_fatal = r.Int(t[2], "sessions_fatal", 0, INT64_MAX);
      s.sessions_killed = r.Int(t[3], "sessions_killed", 0, INT64_MAX);
      s.sessions_abandoned = r.Int(t[4], "sessions_abandoned", 0, INT64_MAX);
      s.deadlocks = r.Int(t[5], "deadlocks", 0, INT64_MAX);
      p->database_stats->push_back(std::move(s));
    }
  }
  for (dom::element x : r.Arr(r.Field(o, "settings"), "settings")) {
    const auto t = r.Tuple(x, 3, "setting");
    if (!r.ok()) break;
    p->settings.push_back({r.Str(t[0], "setting name"), r.Num(t[1], "setting seconds"),
                           r.Str(t[2], "setting source")});
  }
  for (dom::element x : r.Arr(r.Field(o, "overrides"), "overrides")) {
    const auto t = r.Tuple(x, 6, "override");
    if (!r.ok()) break;
    SettingOverride so;
    so.name = r.Str(t[0], "override name");
    so.datid = r.Oid(t[1], "override datid");
    so.roleid = r.Oid(t[2], "override roleid");
    so.database = r.Str(t[3], "override database");
    so.role = r.Str(t[4], "override role");
    so.seconds = r.Num(t[5], "override seconds");
    p->overrides.push_back(std::move(so));
  }
  return p;
}

template <typename K>
void ReadCounterMap(Reader& r, dom::object o, std::string_view key, std::map<K, double>* m) {
  constexpr size_t kLabels = [] {
    if constexpr (std::is_same_v<K, std::string>) {
      return size_t{1};
    } else {
      return std::tuple_size_v<K>;
    }
  }();
  for (dom::element x : r.Arr(r.Field(o, key), key)) {
    const auto t = r.Tuple(x, kLabels + 1, key);
    if (!r.ok()) return;
    K k;
    if constexpr (std::is_same_v<K, std::string>) {
      k = r.Str(t[0], key);
    } else {
      size_t i = 0;
      std::apply([&](auto&... part) { ((part = r.Str(t[i++], key)), ...); }, k);
    }
    const double v = r.Num(t[kLabels], key);
    if (r.ok() && !(v >= 0)) r.Fail(std::string(key) + ": a negative count");
    (*m)[std::move(k)] = v;
  }
}

CountHistogram ReadHistogram(Reader& r, dom::element e, std::string_view what) {
  CountHistogram h;
  const dom::object o = r.Obj(e, what);
  for (dom::element b : r.Arr(r.Field(o, "bounds"), what)) h.bounds.push_back(r.Num(b, what));
  for (dom::element c : r.Arr(r.Field(o, "counts"), what)) h.counts.push_back(r.Num(c, what));
  h.sum = r.Num(r.Field(o, "sum"), what);
  h.count = r.Num(r.Field(o, "count"), what);
  if (r.ok() && h.counts.size() != h.bounds.size() && !h.counts.empty()) {
    r.Fail(std::string(what) + ": counts and bounds differ in length");
  }
  return h;
}

void ReadCounters(Reader& r, dom::element e, Counters* c) {
  const dom::object o = r.Obj(e, "counters");
  ForEachCounter(
      *c, [&](const char* name, auto& m) { ReadCounterMap(r, o, name, &m); },
      [](const std::string&, CountHistogram&) {});
  for (dom::element x : r.Arr(r.Field(o, "histograms"), "histograms")) {
    const auto t = r.Tuple(x, 2, "histogram");
    if (!r.ok()) break;
    const std::string name = r.Str(t[0], "histogram name");
    CountHistogram h = ReadHistogram(r, t[1], "histogram");
    if (name == "episode_seconds") {
      c->episode_seconds = std::move(h);
    } else if (name == "episode_peak_blocked") {
      c->episode_peak_blocked = std::move(h);
    } else if (name.starts_with(kLoggedWaitHistogram)) {
      c->logged_wait_seconds[name.substr(kLoggedWaitHistogram.size())] = std::move(h);
    } else if (r.ok()) {
      r.Fail("histogram \"" + name + "\" is not known");
    }
  }
}

Identity ReadIdentity(Reader& r, dom::element e) {
  const auto t = r.Tuple(e, 6, "event identity");
  Identity id;
  if (!r.ok()) return id;
  id.pid = r.Pid(t[0], "identity pid");
  id.application_name = r.Str(t[1], "identity application_name");
  id.client_addr = r.Str(t[2], "identity client_addr");
  id.usename = r.Str(t[3], "identity usename");
  id.state = r.Str(t[4], "identity state");
  id.query = r.Str(t[5], "identity query");
  return id;
}

template <typename E>
E Named(Reader& r, const std::string& name, std::span<const E> all, const char* (*name_of)(E),
        std::string_view what) {
  if (name.empty()) return E::kNone;
  for (E v : all) {
    if (name == name_of(v)) return v;
  }
  r.Fail(std::string(what) + " \"" + name + "\" is not known");
  return E::kNone;
}

Event ReadEvent(Reader& r, dom::element e) {
  Event ev;
  const dom::object o = r.Obj(e, "event");
  ev.time = r.Num(r.Field(o, "time"), "event time");
  const std::string kind = r.Str(r.Field(o, "kind"), "event kind");
  if (!r.ok()) return ev;
  if (const auto k = EventKindNamed(kind)) {
    ev.kind = *k;
  } else {
    r.Fail("event kind \"" + kind + "\" is not known");
  }
  ev.cause = Named<EventCause>(r, r.Str(r.Field(o, "cause"), "event cause"), EventCauses(),
                               &EventCauseName, "event cause");
  ev.outcome = Named<EventOutcome>(r, r.Str(r.Field(o, "outcome"), "event outcome"),
                                   EventOutcomes(), &EventOutcomeName, "event outcome");
  const std::string evidence = r.Str(r.Field(o, "evidence"), "event evidence");
  if (r.ok() && !evidence.empty()) {
    bool found = false;
    for (EndEvidence x : kEndEvidences) {
      if (evidence == EndEvidenceLabel(x)) {
        ev.evidence = x;
        found = true;
      }
    }
    if (!found) r.Fail("event evidence \"" + evidence + "\" is not known");
  }
  const auto strings = r.Tuple(r.Field(o, "strings"), 9, "event strings");
  if (!r.ok()) return ev;
  std::string* into[] = {&ev.target, &ev.datname,         &ev.lock,           &ev.table, &ev.lease,
                         &ev.pooler, &ev.previous_holder, &ev.current_holder, &ev.detail};
  for (size_t i = 0; i < strings.size(); ++i) *into[i] = r.Str(strings[i], "event string");
  ev.previous = ReadIdentity(r, r.Field(o, "previous"));
  ev.current = ReadIdentity(r, r.Field(o, "current"));
  const auto numbers = r.Tuple(r.Field(o, "numbers"), 7, "event numbers");
  if (!r.ok()) return ev;
  double* nums[] = {&ev.started, &ev.duration, &ev.longest_wait, &ev.gap_from, &ev.gap_to};
  for (size_t i = 0; i < 5; ++i) *nums[i] = r.Num(numbers[i], "event number");
  ev.peak_blocked = r.Int(numbers[5], "event peak_blocked", 0, INT64_MAX);
  ev.count = r.Int(numbers[6], "event count", 1, INT64_MAX);
  return ev;
}

void WritePooled(const PooledLock& l, Writer* w) {
  w->Open('[');
  w->Str(l.pooler);
  w->Str(l.database);
  w->Str(l.user);
  w->Int(l.pid);
  w->Num(l.backend_start);
  WriteKey(l.key, w);
  w->Bool(l.state == PooledLockState::kSessionLock);
  w->Str(l.first_client);
  w->Str(l.current_client);
  w->Str(l.last_application_name);
  w->Str(l.last_linked_client);
  w->Num(l.first_seen);
  w->Int(l.inherited);
  w->Close(']');
}

PooledLock ReadPooled(Reader& r, dom::element e) {
  const auto t = r.Tuple(e, 16, "pooled");
  PooledLock l;
  if (!r.ok()) return l;
  l.pooler = r.Str(t[0], "pooled pooler");
  l.database = r.Str(t[1], "pooled database");
  l.user = r.Str(t[2], "pooled user");
  l.pid = r.Pid(t[3], "pooled pid");
  l.backend_start = r.Num(t[4], "pooled backend_start");
  l.key = ReadKey(r, t, 5, "pooled");
  l.state =
      r.Bool(t[9], "pooled proven") ? PooledLockState::kSessionLock : PooledLockState::kCandidate;
  l.first_client = r.Str(t[10], "pooled first_client");
  l.current_client = r.Str(t[11], "pooled current_client");
  l.last_application_name = r.Str(t[12], "pooled last_application_name");
  l.last_linked_client = r.Str(t[13], "pooled last_linked_client");
  l.first_seen = r.Num(t[14], "pooled first_seen");
  l.inherited = r.Int(t[15], "pooled inherited", 0, INT64_MAX);
  return l;
}

}  // namespace

std::string EncodeSavedTarget(const SavedTarget& state) {
  Writer w;
  w.Reserve(state.inventory
                ? 256 * (state.inventory->locks.size() + state.inventory->sessions.size())
                : 4096);
  w.Open('{');
  w.Key("format");
  w.Str(std::string(kFormatName));
  w.Key("version");
  w.Int(kSavedStateVersion);
  w.Key("target");
  w.Str(state.target);
  w.Key("server");
  w.Str(state.server);
  w.Key("saved_at");
  w.Num(state.saved_at);
  w.Key("log");
  if (state.log) {
    w.Open('{');
    w.Key("file");
    w.Str(state.log->at.file);
    w.Key("identity");
    w.U64(state.log->at.identity);
    w.Key("offset");
    w.U64(state.log->at.offset);
    w.Key("modified");
    w.Num(state.log->at.modified);
    w.Key("records_taken_until");
    w.Num(state.log->records_taken_until);
    w.Close('}');
  } else {
    w.Null();
  }
  w.Key("inventory");
  if (state.inventory) {
    WritePoll(*state.inventory, &w);
  } else {
    w.Null();
  }
  w.Key("first_seen");
  w.Open('[');
  for (const HoldHistory::Entry& h : state.first_seen) {
    w.Open('[');
    w.Int(h.pid);
    w.Num(h.backend_start);
    WriteKey(h.key, &w);
    w.Num(h.first_seen);
    w.Close(']');
  }
  w.Close(']');
  w.Key("counters");
  WriteCounters(state.counters, &w);
  w.Key("events");
  w.Open('[');
  for (const Event& e : state.events) WriteEvent(e, &w);
  w.Close(']');
  w.Key("pooled");
  w.Open('[');
  for (const PooledLock& l : state.pooled) WritePooled(l, &w);
  w.Close(']');
  w.Close('}');
  std::string out = w.Take();
  out += '\n';
  return out;
}

Status DecodeSavedTarget(std::string_view bytes, SavedTarget* out) {
  *out = SavedTarget{};
  if (bytes.size() > kMaxSavedStateBytes) {
    return Status::InvalidData(std::to_string(bytes.size()) + " bytes, more than the " +
                               std::to_string(kMaxSavedStateBytes) + " a state file may hold");
  }
  dom::parser parser;
  dom::element root;
  if (const auto err = parser.parse(bytes.data(), bytes.size()).get(root); err) {
    return Status::InvalidData(std::string("not JSON: ") + simdjson::error_message(err));
  }
  Reader r;
  const dom::object o = r.Obj(root, "the file");
  if (r.ok() && r.Str(r.Field(o, "format"), "format") != kFormatName) {
    r.Fail("not a pglock_exporter state file");
  }
  const int64_t version = r.Int(r.Field(o, "version"), "version", 0, INT32_MAX);
  if (r.ok() && version != kSavedStateVersion) {
    return Status::InvalidData("format version " + std::to_string(version) +
                               ", this exporter reads " + std::to_string(kSavedStateVersion));
  }
  SavedTarget s;
  s.target = r.Str(r.Field(o, "target"), "target");
  s.server = r.Str(r.Field(o, "server"), "server");
  s.saved_at = r.Num(r.Field(o, "saved_at"), "saved_at");
  const dom::element log = r.Field(o, "log");
  if (r.ok() && !log.is_null()) {
    const dom::object l = r.Obj(log, "log");
    SavedLogPosition p;
    p.at.file = r.Str(r.Field(l, "file"), "log file");
    p.at.identity = r.U64(r.Field(l, "identity"), "log identity");
    p.at.offset = r.U64(r.Field(l, "offset"), "log offset");
    p.at.modified = r.Num(r.Field(l, "modified"), "log modified");
    p.records_taken_until = r.Num(r.Field(l, "records_taken_until"), "log records_taken_until");
    s.log = std::move(p);
  }
  const dom::element inventory = r.Field(o, "inventory");
  if (r.ok() && !inventory.is_null()) s.inventory = ReadPoll(r, inventory);
  for (dom::element x : r.Arr(r.Field(o, "first_seen"), "first_seen")) {
    const auto t = r.Tuple(x, 7, "first_seen");
    if (!r.ok()) break;
    HoldHistory::Entry h;
    h.pid = r.Pid(t[0], "first_seen pid");
    h.backend_start = r.Num(t[1], "first_seen backend_start");
    h.key = ReadKey(r, t, 2, "first_seen");
    h.first_seen = r.Num(t[6], "first_seen");
    s.first_seen.push_back(h);
  }
  ReadCounters(r, r.Field(o, "counters"), &s.counters);
  for (dom::element x : r.Arr(r.Field(o, "events"), "events")) {
    s.events.push_back(ReadEvent(r, x));
    if (!r.ok()) break;
  }
  // Absent from the files of the first release of the format: nothing pooled then.
  dom::element pooled;
  if (r.ok() && o.at_key("pooled").get(pooled) == simdjson::SUCCESS) {
    for (dom::element x : r.Arr(pooled, "pooled")) {
      s.pooled.push_back(ReadPooled(r, x));
      if (!r.ok()) break;
    }
  }
  if (!r.ok()) return Status::InvalidData(r.error());
  *out = std::move(s);
  return Status::Ok();
}

}  // namespace pglock
