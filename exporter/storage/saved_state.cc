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

void WriteStats(const DatabaseStats& d, Writer* w) {
  w->Open('[');
  w->Int(d.datid);
  w->Str(d.datname);
  w->Int(d.sessions_fatal);
  w->Int(d.sessions_killed);
  w->Int(d.sessions_abandoned);
  w->Int(d.deadlocks);
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
    for (const DatabaseStats& d : *p.database_stats) WriteStats(d, w);
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
  for (const SharedText* s : {&e.target, &e.datname, &e.lock, &e.table, &e.lease, &e.pooler,
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

DatabaseStats ReadStats(Reader& r, dom::element e) {
  DatabaseStats s;
  const auto t = r.Tuple(e, 6, "database_stats");
  if (!r.ok()) return s;
  s.datid = r.Oid(t[0], "stats datid");
  s.datname = r.Str(t[1], "stats datname");
  s.sessions_fatal = r.Int(t[2], "sessions_fatal", 0, INT64_MAX);
  s.sessions_killed = r.Int(t[3], "sessions_killed", 0, INT64_MAX);
  s.sessions_abandoned = r.Int(t[4], "sessions_abandoned", 0, INT64_MAX);
  s.deadlocks = r.Int(t[5], "deadlocks", 0, INT64_MAX);
  return s;
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
      DatabaseStats s = ReadStats(r, d);
      if (!r.ok()) break;
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
  // A counter the file does not name was added after it was written: it starts at 0, and the
  // rest of the state is kept.
  dom::element field;
  if (!r.ok() || o.at_key(key).get(field) == simdjson::NO_SUCH_FIELD) return;
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

EndEvidence ReadEvidence(Reader& r, const std::string& label, std::string_view what) {
  if (!r.ok() || label.empty()) return EndEvidence::kNone;
  for (EndEvidence x : kEndEvidences) {
    if (label == EndEvidenceLabel(x)) return x;
  }
  r.Fail(std::string(what) + " \"" + label + "\" is not known");
  return EndEvidence::kNone;
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
  ev.evidence = ReadEvidence(r, r.Str(r.Field(o, "evidence"), "event evidence"), "event evidence");
  const auto strings = r.Tuple(r.Field(o, "strings"), 9, "event strings");
  if (!r.ok()) return ev;
  SharedText* into[] = {&ev.target, &ev.datname,         &ev.lock,           &ev.table, &ev.lease,
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

// ---- episodes in progress, lease tables, timeline (sections absent from older files) ---------

constexpr TimelineRowKind kRowKinds[] = {TimelineRowKind::kLock, TimelineRowKind::kLease,
                                         TimelineRowKind::kRowLocks, TimelineRowKind::kRoot,
                                         TimelineRowKind::kDeadlocks};

void WriteEpisode(const SavedEpisode& s, Writer* w) {
  const Episode& e = s.episode;
  w->Open('{');
  w->Key("root_key");
  w->Open('[');
  w->Int(s.pid);
  w->Num(s.backend_start);
  w->Str(s.gid);
  w->Close(']');
  w->Key("ending");
  w->Bool(e.state == EpisodeState::kEnding);
  w->Key("root");
  WriteIdentity(e.root.id, w);
  w->Key("root_place");
  w->Open('[');
  w->Str(e.root.datname);
  w->Str(e.root.backend_type);
  w->Str(e.root.gid);
  w->OptNum(e.root.state_seconds);
  w->Close(']');
  w->Key("started");
  w->Num(e.started);
  w->Key("peak_blocked");
  w->Int(e.peak_blocked);
  w->Key("longest_wait");
  w->Num(e.longest_wait);
  w->Key("lock");
  w->Str(e.lock);
  w->Key("last_seen");
  if (e.last_seen) {
    WriteSession(*e.last_seen, w);
  } else {
    w->Null();
  }
  w->Key("last_seen_at");
  w->Num(e.last_seen_at);
  w->Key("party_since");
  w->OptNum(e.party_since);
  w->Key("counters_end");
  if (e.counters_end) {
    w->Str(HoldEndLabel(*e.counters_end));
  } else {
    w->Null();
  }
  w->Key("share");
  if (e.share) {
    const AbandonedShare& a = *e.share;
    w->Open('{');
    w->Key("datid");
    w->Int(a.datid);
    w->Key("datname");
    w->Str(a.datname);
    w->Key("from");
    w->Num(a.from);
    w->Key("to");
    w->Num(a.to);
    w->Key("counted");
    w->Bool(a.counted);
    w->Key("abandoned");
    w->Int(a.abandoned);
    w->Key("gone");
    w->Open('[');
    for (const SessionId& g : a.gone) {
      w->Open('[');
      w->Int(g.first);
      w->Num(g.second);
      w->Close(']');
    }
    w->Close(']');
    w->Close('}');
  } else {
    w->Null();
  }
  w->Close('}');
}

SavedEpisode ReadEpisode(Reader& r, dom::element x) {
  SavedEpisode s;
  Episode& e = s.episode;
  const dom::object o = r.Obj(x, "episode");
  const auto key = r.Tuple(r.Field(o, "root_key"), 3, "episode root_key");
  if (!r.ok()) return s;
  s.pid = r.Pid(key[0], "episode pid");
  s.backend_start = r.Num(key[1], "episode backend_start");
  s.gid = r.Str(key[2], "episode gid");
  e.state = r.Bool(r.Field(o, "ending"), "episode ending") ? EpisodeState::kEnding
                                                           : EpisodeState::kBlocking;
  e.root.id = ReadIdentity(r, r.Field(o, "root"));
  const auto place = r.Tuple(r.Field(o, "root_place"), 4, "episode root_place");
  if (!r.ok()) return s;
  e.root.datname = r.Str(place[0], "episode datname");
  e.root.backend_type = r.Str(place[1], "episode backend_type");
  e.root.gid = r.Str(place[2], "episode root gid");
  e.root.state_seconds = r.OptNum(place[3], "episode state_seconds");
  e.started = r.Num(r.Field(o, "started"), "episode started");
  e.peak_blocked = r.Int(r.Field(o, "peak_blocked"), "episode peak_blocked", 0, INT64_MAX);
  e.longest_wait = r.Num(r.Field(o, "longest_wait"), "episode longest_wait");
  e.lock = r.Str(r.Field(o, "lock"), "episode lock");
  const dom::element last = r.Field(o, "last_seen");
  if (r.ok() && !last.is_null()) e.last_seen = ReadSession(r, last);
  e.last_seen_at = r.Num(r.Field(o, "last_seen_at"), "episode last_seen_at");
  e.party_since = r.OptNum(r.Field(o, "party_since"), "episode party_since");
  const dom::element end = r.Field(o, "counters_end");
  if (r.ok() && !end.is_null()) {
    const std::string label = r.Str(end, "episode counters_end");
    for (HoldEnd h : kHoldEnds) {
      if (label == HoldEndLabel(h)) e.counters_end = h;
    }
    if (r.ok() && !e.counters_end) r.Fail("episode counters_end \"" + label + "\" is not known");
  }
  const dom::element share = r.Field(o, "share");
  if (r.ok() && !share.is_null()) {
    const dom::object so = r.Obj(share, "episode share");
    AbandonedShare a;
    a.datid = r.Oid(r.Field(so, "datid"), "share datid");
    a.datname = r.Str(r.Field(so, "datname"), "share datname");
    a.from = r.Num(r.Field(so, "from"), "share from");
    a.to = r.Num(r.Field(so, "to"), "share to");
    a.counted = r.Bool(r.Field(so, "counted"), "share counted");
    a.abandoned = r.Int(r.Field(so, "abandoned"), "share abandoned", INT64_MIN, INT64_MAX);
    for (dom::element g : r.Arr(r.Field(so, "gone"), "share gone")) {
      const auto t = r.Tuple(g, 2, "share gone");
      if (!r.ok()) break;
      a.gone.emplace_back(r.Pid(t[0], "share gone pid"), r.Num(t[1], "share gone start"));
    }
    e.share = std::move(a);
  }
  return s;
}

void WriteEpisodes(const EpisodeTrackerSaved& s, Writer* w) {
  w->Open('{');
  w->Key("postmaster_start");
  w->Num(s.postmaster_start);
  w->Key("last_stats");
  w->Open('[');
  for (const DatabaseStats& d : s.last_stats) WriteStats(d, w);
  w->Close(']');
  w->Key("cycles");
  w->Open('[');
  for (const std::vector<int>& c : s.cycles) {
    w->Open('[');
    for (int pid : c) w->Int(pid);
    w->Close(']');
  }
  w->Close(']');
  w->Key("open");
  w->Open('[');
  for (const SavedEpisode& e : s.episodes) WriteEpisode(e, w);
  w->Close(']');
  w->Close('}');
}

EpisodeTrackerSaved ReadEpisodes(Reader& r, dom::element e) {
  EpisodeTrackerSaved s;
  const dom::object o = r.Obj(e, "episodes");
  s.postmaster_start = r.Num(r.Field(o, "postmaster_start"), "episodes postmaster_start");
  for (dom::element x : r.Arr(r.Field(o, "last_stats"), "episodes last_stats")) {
    s.last_stats.push_back(ReadStats(r, x));
    if (!r.ok()) break;
  }
  for (dom::element x : r.Arr(r.Field(o, "cycles"), "episodes cycles")) {
    std::vector<int> cycle;
    for (dom::element pid : r.Arr(x, "episodes cycle")) cycle.push_back(r.Pid(pid, "cycle pid"));
    if (!r.ok()) break;
    s.cycles.push_back(std::move(cycle));
  }
  for (dom::element x : r.Arr(r.Field(o, "open"), "episodes open")) {
    s.episodes.push_back(ReadEpisode(r, x));
    if (!r.ok()) break;
  }
  return s;
}

void WriteLeaseTable(const std::string& table, const LeaseTransitions::LeaseTableState& st,
                     Writer* w) {
  w->Open('{');
  w->Key("table");
  w->Str(table);
  w->Key("complete");
  w->Bool(st.complete);
  w->Key("next_seq");
  w->Int(static_cast<int64_t>(st.next_seq));
  w->Key("queue");
  w->Bool(st.queue);
  w->Key("detecting");
  w->Bool(st.detecting);
  w->Key("new_names");
  w->Int(static_cast<int64_t>(st.new_names));
  w->Key("returned");
  w->Int(static_cast<int64_t>(st.returned));
  w->Key("gone");
  w->Open('[');
  for (const std::string& name : st.gone) w->Str(name);
  w->Close(']');
  w->Key("rows");
  w->Open('[');
  for (const auto& [name, seen] : st.leases) {
    const LeaseRow& row = seen.row;
    w->Open('[');
    w->Str(row.name);
    w->Str(row.holder);
    w->Num(row.taken_at);
    w->Num(row.expires_at);
    w->Bool(row.row_locked);
    w->Int(row.pid);
    w->Int(row.xid);
    w->Bool(seen.state == LeaseState::kGivenBack);
    w->Close(']');
  }
  w->Close(']');
  w->Key("marks");
  w->Open('[');
  for (const LeaseTransitions::LeaseWriteMark& m : st.marks) {
    w->Open('[');
    w->Int(static_cast<int64_t>(m.seq));
    w->Num(m.now);
    if (m.writes) {
      w->Open('[');
      w->Int(m.writes->updated);
      w->Int(m.writes->deleted);
      w->Close(']');
    } else {
      w->Null();
    }
    w->Open('[');
    w->Int(m.explained.updated);
    w->Int(m.explained.deleted);
    w->Close(']');
    w->Close(']');
  }
  w->Close(']');
  w->Key("pending");
  w->Open('[');
  for (const LeaseTransitions::PendingHolderChange& p : st.pending) {
    w->Open('[');
    w->Str(p.lease);
    w->Int(static_cast<int64_t>(p.base_seq));
    w->Int(static_cast<int64_t>(p.seen_seq));
    w->Str(p.previous_holder);
    w->Str(p.current_holder);
    w->Close(']');
  }
  w->Close(']');
  w->Close('}');
}

TableWrites ReadWrites(Reader& r, dom::element e, std::string_view what) {
  TableWrites t;
  const auto v = r.Tuple(e, 2, what);
  if (!r.ok()) return t;
  t.updated = r.Int(v[0], what, INT64_MIN, INT64_MAX);
  t.deleted = r.Int(v[1], what, INT64_MIN, INT64_MAX);
  return t;
}

void ReadLeaseTable(Reader& r, dom::element e, LeaseTransitions::Saved* out) {
  const dom::object o = r.Obj(e, "lease table");
  const std::string table = r.Str(r.Field(o, "table"), "lease table");
  LeaseTransitions::LeaseTableState st;
  st.complete = r.Bool(r.Field(o, "complete"), "lease complete");
  st.next_seq =
      static_cast<uint64_t>(r.Int(r.Field(o, "next_seq"), "lease next_seq", 0, INT64_MAX));
  st.queue = r.Bool(r.Field(o, "queue"), "lease queue");
  st.detecting = r.Bool(r.Field(o, "detecting"), "lease detecting");
  st.new_names =
      static_cast<uint64_t>(r.Int(r.Field(o, "new_names"), "lease new_names", 0, INT64_MAX));
  st.returned =
      static_cast<uint64_t>(r.Int(r.Field(o, "returned"), "lease returned", 0, INT64_MAX));
  for (dom::element x : r.Arr(r.Field(o, "gone"), "lease gone"))
    st.gone.insert(r.Str(x, "lease gone"));
  for (dom::element x : r.Arr(r.Field(o, "rows"), "lease rows")) {
    const auto t = r.Tuple(x, 8, "lease row");
    if (!r.ok()) break;
    LeaseTransitions::LeaseSeen seen;
    seen.row.name = r.Str(t[0], "lease name");
    seen.row.holder = r.Str(t[1], "lease holder");
    seen.row.taken_at = r.Num(t[2], "lease taken_at");
    seen.row.expires_at = r.Num(t[3], "lease expires_at");
    seen.row.row_locked = r.Bool(t[4], "lease row_locked");
    seen.row.pid = r.Pid(t[5], "lease pid");
    seen.row.xid = r.Oid(t[6], "lease xid");
    seen.state = r.Bool(t[7], "lease given_back") ? LeaseState::kGivenBack : LeaseState::kHeld;
    const std::string name = seen.row.name;
    st.leases[name] = std::move(seen);
  }
  // The marks in order of their reads, each before the next read's number: a pending change is
  // judged against two of them, which must be there.
  for (dom::element x : r.Arr(r.Field(o, "marks"), "lease marks")) {
    const auto t = r.Tuple(x, 4, "lease mark");
    if (!r.ok()) break;
    LeaseTransitions::LeaseWriteMark m;
    m.seq = static_cast<uint64_t>(r.Int(t[0], "lease mark seq", 0, INT64_MAX));
    m.now = r.Num(t[1], "lease mark now");
    if (r.ok() && !t[2].is_null()) m.writes = ReadWrites(r, t[2], "lease mark writes");
    m.explained = ReadWrites(r, t[3], "lease mark explained");
    if (r.ok() && (m.seq >= st.next_seq || (!st.marks.empty() && m.seq <= st.marks.back().seq))) {
      r.Fail("lease marks out of order");
    }
    st.marks.push_back(m);
  }
  for (dom::element x : r.Arr(r.Field(o, "pending"), "lease pending")) {
    const auto t = r.Tuple(x, 5, "lease pending");
    if (!r.ok()) break;
    LeaseTransitions::PendingHolderChange p;
    p.lease = r.Str(t[0], "pending lease");
    p.base_seq = static_cast<uint64_t>(r.Int(t[1], "pending base_seq", 0, INT64_MAX));
    p.seen_seq = static_cast<uint64_t>(r.Int(t[2], "pending seen_seq", 0, INT64_MAX));
    p.previous_holder = r.Str(t[3], "pending previous_holder");
    p.current_holder = r.Str(t[4], "pending current_holder");
    const auto has = [&](uint64_t seq) {
      return std::any_of(st.marks.begin(), st.marks.end(),
                         [&](const LeaseTransitions::LeaseWriteMark& m) { return m.seq == seq; });
    };
    if (r.ok() && (!has(p.base_seq) || !has(p.seen_seq))) r.Fail("lease pending: no such read");
    st.pending.push_back(std::move(p));
  }
  if (r.ok()) out->tables[table] = std::move(st);
}

void WriteLeases(const LeaseTransitions::Saved& s, Writer* w) {
  w->Open('{');
  w->Key("tables");
  w->Open('[');
  for (const auto& [table, st] : s.tables) WriteLeaseTable(table, st, w);
  w->Close(']');
  w->Key("detected");
  w->Open('[');
  for (const std::string& t : s.detected) w->Str(t);
  w->Close(']');
  w->Key("seeded");
  w->Open('[');
  for (const auto& [table, n] : s.seeded_names) {
    w->Open('[');
    w->Str(table);
    w->Int(static_cast<int64_t>(n));
    w->Close(']');
  }
  w->Close(']');
  w->Close('}');
}

LeaseTransitions::Saved ReadLeases(Reader& r, dom::element e) {
  LeaseTransitions::Saved s;
  const dom::object o = r.Obj(e, "leases");
  for (dom::element x : r.Arr(r.Field(o, "tables"), "lease tables")) {
    ReadLeaseTable(r, x, &s);
    if (!r.ok()) break;
  }
  for (dom::element x : r.Arr(r.Field(o, "detected"), "leases detected")) {
    s.detected.insert(r.Str(x, "leases detected"));
  }
  for (dom::element x : r.Arr(r.Field(o, "seeded"), "leases seeded")) {
    const auto t = r.Tuple(x, 2, "leases seeded");
    if (!r.ok()) break;
    s.seeded_names[r.Str(t[0], "seeded table")] =
        static_cast<size_t>(r.Int(t[1], "seeded names", 0, INT64_MAX));
  }
  return s;
}

// The timeline's rows once, in order of first use; intervals and markers name them by index.
class RowTable {
 public:
  int Index(const TimelineRow& row) {
    const auto [it, fresh] = index_.try_emplace(row, static_cast<int>(rows_.size()));
    if (fresh) rows_.push_back(&it->first);
    return it->second;
  }
  const std::vector<const TimelineRow*>& rows() const { return rows_; }

 private:
  std::map<TimelineRow, int> index_;
  std::vector<const TimelineRow*> rows_;
};

// An interval's fields after its row, as the state file and the timeline journal both write them.
void WriteIntervalFields(const TimelineInterval& i, Writer* w) {
  w->Bool(i.wait);
  w->Num(i.start);
  w->Num(i.end);
  w->Bool(i.expired);
  w->Int(i.pid);
  w->Str(i.who);
  w->Str(i.detail);
  w->Int(i.blocker_pid);
}
constexpr size_t kIntervalFields = 8;

void WriteInterval(const TimelineInterval& i, RowTable* rows, Writer* w) {
  w->Open('[');
  w->Int(rows->Index(*i.row));
  WriteIntervalFields(i, w);
  w->Close(']');
}

// A marker's fields after its row, as the state file and the markers journal both write them.
void WriteMarkerFields(const TimelineMarker& m, Writer* w) {
  w->Num(m.time);
  w->Str(MarkerKindName(m));
  w->Str(EventCauseName(m.cause));
  w->Str(EndEvidenceLabel(m.evidence));
  w->Str(EventOutcomeName(m.outcome));
  w->Num(m.duration);
  w->Int(m.count);
  w->Int(m.previous_pid);
  w->Str(m.previous);
  w->Int(m.current_pid);
  w->Str(m.current);
  w->Str(m.event_kind ? EventKindName(*m.event_kind) : "");
  w->Num(m.event_time);
}
constexpr size_t kMarkerFields = 13;

void WriteMarker(const TimelineMarker& m, RowTable* rows, Writer* w) {
  w->Open('[');
  w->Int(rows->Index(*m.row));
  WriteMarkerFields(m, w);
  w->Close(']');
}

// The timeline without its `skip_closed` oldest closed intervals and with at most `keep_markers`
// markers of each kind (the newest), the ones left out counted as dropped.
std::string EncodeTimeline(const TimelineSaved& t, size_t skip_closed, size_t keep_markers) {
  using Kind = decltype(MarkerKindKey(TimelineMarker{}));
  std::map<Kind, size_t> of_kind;
  for (const TimelineMarker& m : t.markers) {
    if (m.row) ++of_kind[MarkerKindKey(m)];
  }
  std::vector<const TimelineMarker*> markers;
  uint64_t markers_left_out = 0;
  std::map<Kind, size_t> seen;
  for (const TimelineMarker& m : t.markers) {
    if (!m.row) continue;
    // Left out when it and those of its kind after it are more than `keep_markers`.
    const Kind kind = MarkerKindKey(m);
    if (of_kind[kind] - seen[kind]++ > keep_markers) {
      ++markers_left_out;
    } else {
      markers.push_back(&m);
    }
  }
  // The rows first, then what refers to them: the table is built by a first pass.
  RowTable rows;
  Writer body;
  // About 100 bytes an interval or marker with names of ordinary length: grown once, not doubled.
  body.Reserve(128 * (t.open.size() + t.closed.size() + markers.size()));
  body.Key("open");
  body.Open('[');
  for (const TimelineSavedOpen& o : t.open) {
    if (!o.interval.row) continue;
    body.Open('[');
    body.Str(TimelineRowKindLabel(o.key_kind));
    body.Int(o.datid);
    body.Int(o.classid);
    body.Int(o.objid);
    body.Int(o.objsubid);
    body.Int(o.pid);
    body.Bool(o.wait);
    body.Str(o.text);
    body.Num(o.backend_start);
    WriteInterval(o.interval, &rows, &body);
    body.Close(']');
  }
  body.Close(']');
  body.Key("closed");
  body.Open('[');
  for (size_t i = std::min(skip_closed, t.closed.size()); i < t.closed.size(); ++i) {
    if (t.closed[i].row) WriteInterval(t.closed[i], &rows, &body);
  }
  body.Close(']');
  body.Key("markers");
  body.Open('[');
  for (const TimelineMarker* m : markers) WriteMarker(*m, &rows, &body);
  body.Close(']');

  Writer w;
  w.Open('{');
  w.Key("now");
  w.Num(t.now);
  w.Key("first_poll");
  w.Num(t.first_poll);
  w.Key("dropped_intervals");
  w.Int(static_cast<int64_t>(t.dropped_intervals + std::min(skip_closed, t.closed.size())));
  w.Key("dropped_markers");
  w.Int(static_cast<int64_t>(t.dropped_markers + markers_left_out));
  w.Key("gaps");
  w.Open('[');
  for (const TimelineGap& g : t.gaps) {
    w.Open('[');
    w.Num(g.from);
    w.Num(g.to);
    w.Close(']');
  }
  w.Close(']');
  w.Key("rows");
  w.Open('[');
  for (const TimelineRow* r : rows.rows()) {
    w.Open('[');
    w.Str(TimelineRowKindLabel(r->kind));
    w.Str(r->scope);
    w.Str(r->name);
    w.Close(']');
  }
  w.Close(']');
  const std::string head = w.Take();
  const std::string tail = body.Take();
  std::string out;
  out.reserve(head.size() + tail.size() + 2);
  out += head;
  out += ',';
  out += tail;
  out += '}';
  return out;
}

// The timeline within `budget` bytes (its oldest history left out first); "" when even its open
// intervals alone do not fit.
std::string EncodeTimelineWithin(const TimelineSaved& t, size_t budget) {
  size_t skip_closed = 0;
  size_t keep_markers = SIZE_MAX;
  for (;;) {
    std::string out = EncodeTimeline(t, skip_closed, keep_markers);
    if (out.size() <= budget) return out;
    if (skip_closed < t.closed.size()) {
      skip_closed += std::max<size_t>(1, (t.closed.size() - skip_closed + 1) / 2);
    } else if (keep_markers > 0) {
      keep_markers = keep_markers == SIZE_MAX ? kMarkersPerKind / 2 : keep_markers / 2;
    } else {
      return "";
    }
  }
}

TimelineRowKind ReadRowKind(Reader& r, dom::element e, std::string_view what) {
  const std::string label = r.Str(e, what);
  if (!r.ok()) return TimelineRowKind::kLock;
  for (TimelineRowKind k : kRowKinds) {
    if (label == TimelineRowKindLabel(k)) return k;
  }
  r.Fail(std::string(what) + " \"" + label + "\" is not known");
  return TimelineRowKind::kLock;
}

std::shared_ptr<const TimelineRow> RowAt(
    Reader& r, dom::element e, const std::vector<std::shared_ptr<const TimelineRow>>& rows) {
  const int64_t i = r.Int(e, "timeline row", 0, static_cast<int64_t>(rows.size()) - 1);
  return r.ok() ? rows[static_cast<size_t>(i)] : nullptr;
}

// The fields WriteIntervalFields wrote, from t[at] on.
void ReadIntervalFields(Reader& r, const std::vector<dom::element>& t, size_t at,
                        TimelineInterval* i) {
  i->wait = r.Bool(t[at], "interval wait");
  i->start = r.Num(t[at + 1], "interval start");
  i->end = r.Num(t[at + 2], "interval end");
  i->expired = r.Bool(t[at + 3], "interval expired");
  i->pid = r.Pid(t[at + 4], "interval pid");
  i->who = r.Str(t[at + 5], "interval who");
  i->detail = r.Str(t[at + 6], "interval detail");
  i->blocker_pid = r.Pid(t[at + 7], "interval blocker_pid");
}

// An interval or a marker of the state file: the index of its row in the table, then its fields.
template <typename Item>
Item ReadRowItem(Reader& r, dom::element e,
                 const std::vector<std::shared_ptr<const TimelineRow>>& rows, size_t fields,
                 const char* what,
                 void (*read_fields)(Reader&, const std::vector<dom::element>&, size_t, Item*)) {
  Item item;
  const auto t = r.Tuple(e, 1 + fields, what);
  if (!r.ok()) return item;
  item.row = RowAt(r, t[0], rows);
  read_fields(r, t, 1, &item);
  return item;
}

TimelineInterval ReadInterval(Reader& r, dom::element e,
                              const std::vector<std::shared_ptr<const TimelineRow>>& rows) {
  return ReadRowItem(r, e, rows, kIntervalFields, "timeline interval", &ReadIntervalFields);
}

// The fields WriteMarkerFields wrote, from t[at] on.
void ReadMarkerFields(Reader& r, const std::vector<dom::element>& t, size_t at, TimelineMarker* m) {
  m->time = r.Num(t[at], "marker time");
  const std::string kind = r.Str(t[at + 1], "marker kind");
  if (!r.ok()) return;
  const auto named = MarkerKindNamed(kind);
  if (!named) {
    r.Fail("marker kind \"" + kind + "\" is not known");
    return;
  }
  m->moment = named->first;
  m->cause = Named<EventCause>(r, r.Str(t[at + 2], "marker cause"), EventCauses(), &EventCauseName,
                               "marker cause");
  m->evidence = ReadEvidence(r, r.Str(t[at + 3], "marker evidence"), "marker evidence");
  m->outcome = Named<EventOutcome>(r, r.Str(t[at + 4], "marker outcome"), EventOutcomes(),
                                   &EventOutcomeName, "marker outcome");
  m->duration = r.Num(t[at + 5], "marker duration");
  m->count = r.Int(t[at + 6], "marker count", INT64_MIN, INT64_MAX);
  m->previous_pid = r.Pid(t[at + 7], "marker previous_pid");
  m->previous = r.Str(t[at + 8], "marker previous");
  m->current_pid = r.Pid(t[at + 9], "marker current_pid");
  m->current = r.Str(t[at + 10], "marker current");
  // An event's marker is of its event's kind; the others name theirs apart ("": none).
  const std::string event_kind = r.Str(t[at + 11], "marker event_kind");
  if (m->moment == MarkerMoment::kEvent || !r.ok() || event_kind.empty()) {
    m->event_kind = named->second;
  } else if (const auto k = EventKindNamed(event_kind)) {
    m->event_kind = k;
  } else {
    r.Fail("marker event_kind \"" + event_kind + "\" is not known");
  }
  m->event_time = r.Num(t[at + 12], "marker event_time");
}

TimelineMarker ReadMarker(Reader& r, dom::element e,
                          const std::vector<std::shared_ptr<const TimelineRow>>& rows) {
  return ReadRowItem(r, e, rows, kMarkerFields, "timeline marker", &ReadMarkerFields);
}

TimelineSaved ReadTimeline(Reader& r, dom::element e) {
  TimelineSaved t;
  const dom::object o = r.Obj(e, "timeline");
  t.now = r.Num(r.Field(o, "now"), "timeline now");
  t.first_poll = r.Num(r.Field(o, "first_poll"), "timeline first_poll");
  t.dropped_intervals = static_cast<uint64_t>(
      r.Int(r.Field(o, "dropped_intervals"), "timeline dropped_intervals", 0, INT64_MAX));
  t.dropped_markers = static_cast<uint64_t>(
      r.Int(r.Field(o, "dropped_markers"), "timeline dropped_markers", 0, INT64_MAX));
  for (dom::element x : r.Arr(r.Field(o, "gaps"), "timeline gaps")) {
    const auto g = r.Tuple(x, 2, "timeline gap");
    if (!r.ok()) break;
    t.gaps.push_back({r.Num(g[0], "gap from"), r.Num(g[1], "gap to")});
  }
  std::vector<std::shared_ptr<const TimelineRow>> rows;
  for (dom::element x : r.Arr(r.Field(o, "rows"), "timeline rows")) {
    const auto row = r.Tuple(x, 3, "timeline row");
    if (!r.ok()) break;
    TimelineRow tr;
    tr.kind = ReadRowKind(r, row[0], "timeline row kind");
    tr.scope = r.Str(row[1], "timeline row scope");
    tr.name = r.Str(row[2], "timeline row name");
    rows.push_back(std::make_shared<const TimelineRow>(std::move(tr)));
  }
  for (dom::element x : r.Arr(r.Field(o, "open"), "timeline open")) {
    const auto k = r.Tuple(x, 10, "timeline open");
    if (!r.ok()) break;
    TimelineSavedOpen so;
    so.key_kind = ReadRowKind(r, k[0], "open kind");
    so.datid = r.Oid(k[1], "open datid");
    so.classid = r.Oid(k[2], "open classid");
    so.objid = r.Oid(k[3], "open objid");
    so.objsubid = r.Pid(k[4], "open objsubid");
    so.pid = r.Pid(k[5], "open pid");
    so.wait = r.Bool(k[6], "open wait");
    so.text = r.Str(k[7], "open text");
    so.backend_start = r.Num(k[8], "open backend_start");
    so.interval = ReadInterval(r, k[9], rows);
    so.interval.open = true;
    t.open.push_back(std::move(so));
  }
  for (dom::element x : r.Arr(r.Field(o, "closed"), "timeline closed")) {
    t.closed.push_back(ReadInterval(r, x, rows));
    if (!r.ok()) break;
  }
  for (dom::element x : r.Arr(r.Field(o, "markers"), "timeline markers")) {
    t.markers.push_back(ReadMarker(r, x, rows));
    if (!r.ok()) break;
  }
  return t;
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
  // Kept for readers of files before the journal, which want the key: empty with a journal.
  w.Key("events");
  w.Open('[');
  for (const Event& e : state.events) WriteEvent(e, &w);
  w.Close(']');
  for (const auto& [key, journal] :
       {std::pair<const char*, const std::optional<SavedJournal>*>{"journal", &state.journal},
        {"timeline_journal", &state.timeline_journal},
        {"marker_journal", &state.marker_journal}}) {
    if (!*journal) continue;
    w.Key(key);
    w.Open('{');
    w.Key("generation");
    w.U64((*journal)->generation);
    w.Key("lines");
    w.U64((*journal)->lines);
    w.Close('}');
  }
  w.Key("pooled");
  w.Open('[');
  for (const PooledLock& l : state.pooled) WritePooled(l, &w);
  w.Close(']');
  if (state.episodes) {
    w.Key("episodes");
    WriteEpisodes(*state.episodes, &w);
  }
  if (state.leases) {
    w.Key("leases");
    WriteLeases(*state.leases, &w);
  }
  std::string out = w.Take();
  // Last, in what room the rest left (kMaxSavedTimelineBytes at most): a long history never
  // makes a file that the next start refuses whole.
  constexpr size_t kTail = 64;
  if (state.timeline && out.size() + kTail < kMaxSavedStateBytes) {
    const std::string timeline = EncodeTimelineWithin(
        *state.timeline,
        std::min(kMaxSavedTimelineBytes, kMaxSavedStateBytes - kTail - out.size()));
    if (!timeline.empty()) {
      out.reserve(out.size() + timeline.size() + 16);
      out += ",\"timeline\":";
      out += timeline;
    }
  }
  out += "}\n";
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
  // Absent from files written before the journals: their events, closed intervals and markers
  // are in the file.
  for (const auto& [key, into] :
       {std::pair<const char*, std::optional<SavedJournal>*>{"journal", &s.journal},
        {"timeline_journal", &s.timeline_journal},
        {"marker_journal", &s.marker_journal}}) {
    dom::element journal;
    if (!r.ok() || o.at_key(key).get(journal) != simdjson::SUCCESS) continue;
    const dom::object j = r.Obj(journal, key);
    SavedJournal sj;
    sj.generation = r.U64(r.Field(j, "generation"), "journal generation");
    sj.lines = r.U64(r.Field(j, "lines"), "journal lines");
    *into = sj;
  }
  // Absent from the files of the first release of the format: nothing pooled then.
  dom::element pooled;
  if (r.ok() && o.at_key("pooled").get(pooled) == simdjson::SUCCESS) {
    for (dom::element x : r.Arr(pooled, "pooled")) {
      s.pooled.push_back(ReadPooled(r, x));
      if (!r.ok()) break;
    }
  }
  // Absent from files written before the episodes, the lease tables and the timeline were kept.
  dom::element section;
  if (r.ok() && o.at_key("episodes").get(section) == simdjson::SUCCESS) {
    s.episodes = ReadEpisodes(r, section);
  }
  if (r.ok() && o.at_key("leases").get(section) == simdjson::SUCCESS) {
    s.leases = ReadLeases(r, section);
  }
  if (r.ok() && o.at_key("timeline").get(section) == simdjson::SUCCESS) {
    s.timeline = ReadTimeline(r, section);
  }
  if (!r.ok()) return Status::InvalidData(r.error());
  *out = std::move(s);
  return Status::Ok();
}

std::string EncodeEventLines(std::span<const std::shared_ptr<const Event>> events) {
  std::string out;
  out.reserve(512 * events.size());
  for (const auto& e : events) {
    Writer w;
    WriteEvent(*e, &w);
    out += w.Take();
    out += '\n';
  }
  return out;
}

namespace {

// Reads the first `lines` lines of `bytes` into *out (its items, lines, damaged, first_damage),
// each by `read`, which fails the Reader on what it cannot take.
template <typename Out, typename Read>
void DecodeLines(std::string_view bytes, uint64_t lines, Out* out, Read read) {
  dom::parser parser;
  while (out->lines < lines && !bytes.empty()) {
    const size_t end = bytes.find('\n');
    // A last line without its newline was cut short by a crash: not one of the state's lines.
    if (end == std::string_view::npos) break;
    const std::string_view line = bytes.substr(0, end);
    bytes.remove_prefix(end + 1);
    ++out->lines;
    dom::element root;
    std::string error;
    if (const auto err = parser.parse(line.data(), line.size()).get(root); err) {
      error = std::string("not JSON: ") + simdjson::error_message(err);
    } else {
      Reader r;
      if (read(r, root); r.ok()) continue;
      error = r.error();
    }
    if (out->damaged++ == 0) {
      out->first_damage = "line " + std::to_string(out->lines) + ": " + error;
    }
  }
}

}  // namespace

JournalRead DecodeEventLines(std::string_view bytes, uint64_t lines) {
  std::vector<Event> events;
  JournalRead out =
      DecodeEventLines(bytes, lines, [&](Event&& e) { events.push_back(std::move(e)); });
  out.events = std::move(events);
  return out;
}

JournalRead DecodeEventLines(std::string_view bytes, uint64_t lines,
                             const std::function<void(Event&& event)>& each) {
  JournalRead out;
  DecodeLines(bytes, lines, &out, [&](Reader& r, dom::element e) {
    Event ev = ReadEvent(r, e);
    if (r.ok()) each(std::move(ev));
  });
  return out;
}

namespace {

// A timeline journal's lines: each item as its row (kind, scope, name) and then its fields; an
// item without a row is not written. *written, where given, is the number of lines.
template <typename Item>
std::string EncodeRowLines(const std::vector<Item>& items, size_t* written,
                           void (*write_fields)(const Item&, Writer*)) {
  std::string out;
  out.reserve(200 * items.size());
  if (written) *written = 0;
  for (const Item& item : items) {
    if (!item.row) continue;
    if (written) ++*written;
    Writer w;
    w.Open('[');
    w.Str(TimelineRowKindLabel(item.row->kind));
    w.Str(item.row->scope);
    w.Str(item.row->name);
    write_fields(item, &w);
    w.Close(']');
    out += w.Take();
    out += '\n';
  }
  return out;
}

// Reads what EncodeRowLines wrote: `fields` fields after the row, read by `read_fields`.
template <typename Item, typename Out>
void DecodeRowLines(std::string_view bytes, uint64_t lines, size_t fields, const char* what,
                    void (*read_fields)(Reader&, const std::vector<dom::element>&, size_t, Item*),
                    Out* out, std::vector<Item>* items) {
  DecodeLines(bytes, lines, out, [&](Reader& r, dom::element e) {
    const auto t = r.Tuple(e, 3 + fields, what);
    if (!r.ok()) return;
    TimelineRow row;
    row.kind = ReadRowKind(r, t[0], "timeline row kind");
    row.scope = r.Str(t[1], "timeline row scope");
    row.name = r.Str(t[2], "timeline row name");
    Item item;
    item.row = std::make_shared<const TimelineRow>(std::move(row));
    read_fields(r, t, 3, &item);
    if (r.ok()) items->push_back(std::move(item));
  });
}

}  // namespace

std::string EncodeIntervalLines(const std::vector<TimelineInterval>& intervals, size_t* written) {
  return EncodeRowLines(intervals, written, &WriteIntervalFields);
}

IntervalJournalRead DecodeIntervalLines(std::string_view bytes, uint64_t lines) {
  IntervalJournalRead out;
  DecodeRowLines(bytes, lines, kIntervalFields, "timeline interval", &ReadIntervalFields, &out,
                 &out.intervals);
  return out;
}

std::string EncodeMarkerLines(const std::vector<TimelineMarker>& markers, size_t* written) {
  return EncodeRowLines(markers, written, &WriteMarkerFields);
}

MarkerJournalRead DecodeMarkerLines(std::string_view bytes, uint64_t lines) {
  MarkerJournalRead out;
  DecodeRowLines(bytes, lines, kMarkerFields, "timeline marker", &ReadMarkerFields, &out,
                 &out.markers);
  return out;
}

}  // namespace pglock
