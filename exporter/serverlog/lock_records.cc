#include "exporter/serverlog/lock_records.h"

#include <array>
#include <limits>
#include <utility>

namespace pglock {
namespace {

constexpr std::string_view kModeNames[] = {
    "AccessShareLock", "RowShareLock",          "RowExclusiveLock", "ShareUpdateExclusiveLock",
    "ShareLock",       "ShareRowExclusiveLock", "ExclusiveLock",    "AccessExclusiveLock",
};

// A lock mode as GetLockmodeName() writes it: letters only (bounded, so junk is not copied).
bool IsModeName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) return false;
  }
  return true;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Reads an unsigned decimal of at most `max_digits` digits no greater than `max` at the front of
// *s and consumes it.
bool ConsumeUnsigned(std::string_view* s, uint64_t max, size_t max_digits, uint64_t* value) {
  size_t n = 0;
  uint64_t v = 0;
  while (n < s->size() && IsDigit((*s)[n])) {
    if (++n > max_digits) return false;
    v = v * 10 + static_cast<uint64_t>((*s)[n - 1] - '0');
  }
  if (n == 0 || v > max) return false;
  s->remove_prefix(n);
  *value = v;
  return true;
}

// A "%d" of a pid or a procnumber.
bool ConsumeInt(std::string_view* s, int* value) {
  const bool negative = !s->empty() && s->front() == '-';
  if (negative) s->remove_prefix(1);
  uint64_t v = 0;
  if (!ConsumeUnsigned(s, static_cast<uint64_t>(std::numeric_limits<int>::max()), 10, &v)) {
    return false;
  }
  *value = negative ? -static_cast<int>(v) : static_cast<int>(v);
  return true;
}

bool ConsumeLiteral(std::string_view* s, std::string_view literal) {
  if (!StartsWith(*s, literal)) return false;
  s->remove_prefix(literal.size());
  return true;
}

// Matches all of `text` to a printf `format` whose only conversions are %u and %d, storing the
// numbers in the order they appear (at most 4).
bool MatchFormat(std::string_view text, std::string_view format, std::array<uint32_t, 4>* values) {
  size_t n = 0;
  while (!format.empty()) {
    if (StartsWith(format, "%u") || StartsWith(format, "%d")) {
      if (n == values->size()) return false;
      if (format[1] == 'u') {
        uint64_t v = 0;
        if (!ConsumeUnsigned(&text, std::numeric_limits<uint32_t>::max(), 10, &v)) return false;
        (*values)[n++] = static_cast<uint32_t>(v);
      } else {
        int v = 0;
        if (!ConsumeInt(&text, &v)) return false;
        (*values)[n++] = static_cast<uint32_t>(v);
      }
      format.remove_prefix(2);
      continue;
    }
    if (text.empty() || text.front() != format.front()) return false;
    text.remove_prefix(1);
    format.remove_prefix(1);
  }
  return text.empty();
}

// DescribeLockTag()'s forms. `fields[i]` is the LOCKTAG field (0-based) the i-th number fills.
struct TagForm {
  std::string_view locktype;
  std::string_view format;
  std::array<int, 4> fields;
  bool has_database;
  bool has_relation;
};

constexpr TagForm kTagForms[] = {
    {"relation", "relation %u of database %u", {1, 0}, true, true},
    {"extend", "extension of relation %u of database %u", {1, 0}, true, true},
    {"frozenid", "pg_database.datfrozenxid of database %u", {0}, true, false},
    {"page", "page %u of relation %u of database %u", {2, 1, 0}, true, true},
    {"tuple", "tuple (%u,%u) of relation %u of database %u", {2, 3, 1, 0}, true, true},
    {"transactionid", "transaction %u", {0}, false, false},
    {"virtualxid", "virtual transaction %d/%u", {0, 1}, false, false},
    {"spectoken", "speculative token %u of transaction %u", {1, 0}, false, false},
    {"object", "object %u of class %u of database %u", {2, 1, 0}, true, false},
    {"userlock", "user lock [%u,%u,%u]", {0, 1, 2}, false, false},
    {"advisory", "advisory lock [%u,%u,%u,%u]", {0, 1, 2, 3}, true, false},
    {"applytransaction",
     "remote transaction %u of subscription %u of database %u",
     {2, 1, 0},
     true,
     false},
};

// Counts the conversions of a TagForm's format.
size_t Conversions(std::string_view format) {
  size_t n = 0;
  for (size_t i = 0; i + 1 < format.size(); ++i) {
    if (format[i] == '%') ++n;
  }
  return n;
}

// "%d, %d, ..." (possibly empty) into *pids, at most kMaxPids; false when malformed.
bool ParsePidList(std::string_view text, std::vector<int>* pids, bool* truncated) {
  pids->clear();
  if (text.empty()) return true;
  while (true) {
    int pid = 0;
    if (!ConsumeInt(&text, &pid)) return false;
    if (pids->size() < kMaxPids) {
      pids->push_back(pid);
    } else {
      *truncated = true;
    }
    if (text.empty()) return true;
    if (!ConsumeLiteral(&text, ", ")) return false;
  }
}

// The DETAIL of a wait line: "Process(es) holding the lock: %s. Wait queue: %s." (18's
// log_lock_failures writes ", Wait queue: ").
void ParseHoldersDetail(std::string_view detail, LockRecord* out) {
  if (!ConsumeLiteral(&detail, "Process holding the lock: ") &&
      !ConsumeLiteral(&detail, "Processes holding the lock: ")) {
    return;
  }
  if (!EndsWith(detail, ".")) return;
  detail.remove_suffix(1);
  const size_t queue_at = detail.find(" Wait queue: ");
  if (queue_at == std::string_view::npos || queue_at == 0) return;
  const char separator = detail[queue_at - 1];
  if (separator != '.' && separator != ',') return;
  std::vector<int> holders, queue;
  bool truncated = false;
  if (!ParsePidList(detail.substr(0, queue_at - 1), &holders, &truncated) ||
      !ParsePidList(detail.substr(queue_at + 13), &queue, &truncated)) {
    return;
  }
  out->holders = std::move(holders);
  out->queue = std::move(queue);
  out->truncated = out->truncated || truncated;
}

// "%ld.%03d ms" as seconds.
bool ParseMilliseconds(std::string_view text, double* seconds) {
  uint64_t ms = 0, fraction = 0;
  if (!ConsumeUnsigned(&text, std::numeric_limits<int64_t>::max(), 18, &ms) ||
      !ConsumeLiteral(&text, ".") || text.size() != 6 || text.substr(3) != " ms" ||
      !ConsumeUnsigned(&text, 999, 3, &fraction) || text != " ms") {
    return false;
  }
  *seconds = (static_cast<double>(ms) + static_cast<double>(fraction) / 1000) / 1000;
  return true;
}

struct WaitForm {
  LockRecordKind kind;
  std::string_view before_mode;  // after "process %d"
  std::string_view before_time;  // after the lock; empty: the message ends with the lock
};

constexpr WaitForm kWaitForms[] = {
    {LockRecordKind::kStillWaiting, " still waiting for ", " after "},
    {LockRecordKind::kAcquired, " acquired ", " after "},
    {LockRecordKind::kAvoidedDeadlock, " avoided deadlock for ",
     " by rearranging queue order after "},
    {LockRecordKind::kDetectedDeadlock, " detected deadlock while waiting for ", " after "},
    {LockRecordKind::kFailedToAcquire, " failed to acquire ", " after "},
    {LockRecordKind::kLockFailure, " could not obtain ", ""},
};

// "process %d <form> %s on %s[ <before_time>%ld.%03d ms]" into out's pid, mode, lock and time.
bool ParseWaitMessage(std::string_view message, LockRecord* out) {
  int pid = 0;
  if (!ConsumeLiteral(&message, "process ") || !ConsumeInt(&message, &pid)) return false;
  for (const WaitForm& form : kWaitForms) {
    std::string_view rest = message;
    if (!ConsumeLiteral(&rest, form.before_mode)) continue;
    const size_t mode_end = rest.find(' ');
    if (mode_end == std::string_view::npos || !IsModeName(rest.substr(0, mode_end))) return false;
    const std::string_view mode = rest.substr(0, mode_end);
    rest.remove_prefix(mode_end);
    if (!ConsumeLiteral(&rest, " on ")) return false;
    std::string_view tag = rest;
    double waited = 0;
    if (!form.before_time.empty()) {
      const size_t time_at = rest.rfind(form.before_time);
      if (time_at == std::string_view::npos ||
          !ParseMilliseconds(rest.substr(time_at + form.before_time.size()), &waited)) {
        return false;
      }
      tag = rest.substr(0, time_at);
    }
    out->kind = form.kind;
    out->pid = pid;
    out->mode = std::string(mode);
    out->lock = ParseLockTag(tag);
    out->waited_seconds = waited;
    return true;
  }
  return false;
}

// The name between the first '"' after `prefix` and the '"' that precedes `suffix` at the end.
std::string QuotedName(std::string_view text, std::string_view prefix, std::string_view suffix) {
  if (!StartsWith(text, prefix) || !EndsWith(text, suffix) ||
      text.size() < prefix.size() + suffix.size()) {
    return "";
  }
  return std::string(text.substr(prefix.size(), text.size() - prefix.size() - suffix.size()));
}

// The relation of XactLockTableWait()'s CONTEXT line, "while <operation> (%u,%u) in relation
// \"%s\"": the first line that reads so.
std::string ContextRelation(std::string_view context) {
  constexpr std::string_view kIn = " in relation \"";
  while (!context.empty()) {
    const size_t end = context.find('\n');
    const std::string_view line = context.substr(0, end);
    const size_t in = line.find(kIn);
    if (StartsWith(line, "while ") && in != std::string_view::npos && EndsWith(line, "\"") &&
        line.size() > in + kIn.size()) {
      return std::string(line.substr(in + kIn.size(), line.size() - in - kIn.size() - 1));
    }
    if (end == std::string_view::npos) break;
    context.remove_prefix(end + 1);
  }
  return "";
}

void ClassifyLockNotAvailable(const LogRecord& r, LockRecord* out) {
  const std::string_view m = r.message;
  if (m == "canceling statement due to lock timeout") {
    out->kind = LockRecordKind::kLockTimeout;
    out->relation_name = ContextRelation(r.context);
    return;
  }
  struct NowaitForm {
    std::string_view prefix, suffix;
  };
  constexpr NowaitForm kNowaitForms[] = {
      {"could not obtain lock on row in relation \"", "\""},
      {"could not obtain lock on relation \"", "\""},
      {"aborting because lock on relation \"", "\" is not available"},
  };
  for (const NowaitForm& form : kNowaitForms) {
    if (StartsWith(m, form.prefix) && EndsWith(m, form.suffix) &&
        m.size() >= form.prefix.size() + form.suffix.size()) {
      out->kind = LockRecordKind::kNowaitFailed;
      out->relation_name = QuotedName(m, form.prefix, form.suffix);
      return;
    }
  }
  out->kind = LockRecordKind::kLockNotAvailable;
}

// "Process %d waits for %s on %s; blocked by process %d."
bool ParseWaitsForLine(std::string_view line, DeadlockProcess* p) {
  constexpr std::string_view kBlocked = "; blocked by process ";
  if (!ConsumeLiteral(&line, "Process ") || !ConsumeInt(&line, &p->pid) ||
      !ConsumeLiteral(&line, " waits for ")) {
    return false;
  }
  const size_t mode_end = line.find(' ');
  if (mode_end == std::string_view::npos || !IsModeName(line.substr(0, mode_end))) return false;
  const std::string_view mode = line.substr(0, mode_end);
  line.remove_prefix(mode_end);
  if (!ConsumeLiteral(&line, " on ")) return false;
  const size_t blocked_at = line.rfind(kBlocked);
  if (blocked_at == std::string_view::npos) return false;
  std::string_view tail = line.substr(blocked_at + kBlocked.size());
  if (!ConsumeInt(&tail, &p->blocked_by) || tail != ".") return false;
  p->mode = std::string(mode);
  p->lock = ParseLockTag(line.substr(0, blocked_at));
  return true;
}

// "Process %d: %s" for each process of `cycle` in turn, each query ending where the next
// process's line begins. `next_pid` is the pid after the last of `cycle` (0: the last's query
// runs to the end).
void ParseQueries(std::string_view text, int next_pid, std::vector<DeadlockProcess>* cycle) {
  for (size_t i = 0; i < cycle->size(); ++i) {
    const std::string header = "Process " + std::to_string((*cycle)[i].pid) + ": ";
    if (!ConsumeLiteral(&text, header)) return;
    const int next = i + 1 < cycle->size() ? (*cycle)[i + 1].pid : next_pid;
    size_t end = std::string_view::npos;
    if (next != 0) end = text.find("\nProcess " + std::to_string(next) + ": ");
    (*cycle)[i].query = std::string(text.substr(0, end));
    if (end == std::string_view::npos) return;
    text.remove_prefix(end + 1);
  }
}

// DeadLockReport()'s errdetail_log: the waits-for lines, then the queries.
void ParseDeadlockDetail(std::string_view detail, LockRecord* out) {
  std::vector<DeadlockProcess> cycle;
  int first_dropped = 0;  // the pid of the first process beyond kMaxCycle
  while (!detail.empty()) {
    const size_t end = detail.find('\n');
    DeadlockProcess p;
    if (!ParseWaitsForLine(detail.substr(0, end), &p)) break;
    if (cycle.size() < kMaxCycle) {
      cycle.push_back(std::move(p));
    } else {
      if (first_dropped == 0) first_dropped = p.pid;
      out->truncated = true;
    }
    detail.remove_prefix(end == std::string_view::npos ? detail.size() : end + 1);
  }
  ParseQueries(detail, first_dropped, &cycle);
  for (const DeadlockProcess& p : cycle) {
    if (p.pid == out->pid) {
      out->mode = p.mode;
      out->lock = p.lock;
      break;
    }
  }
  out->cycle = std::move(cycle);
}

LockRecord FromRecord(const LogRecord& r) {
  LockRecord out;
  out.time = r.log_time;
  out.pid = r.pid != 0 ? r.pid : r.session_pid;
  out.session_start = r.session_start;
  out.backend_type = r.backend_type;
  out.dbname = r.dbname;
  out.user = r.user;
  out.application_name = r.application_name;
  out.statement = r.statement;
  out.sqlstate = r.state_code;
  out.message = r.message;
  return out;
}

bool IsLogLine(const LogRecord& r) {
  return r.error_severity == "LOG" && (r.state_code.empty() || r.state_code == "00000");
}

// A decimal `number` in `text` with no digit right before or after it.
bool ContainsNumber(std::string_view text, std::string_view number) {
  for (size_t at = text.find(number); at != std::string_view::npos;
       at = text.find(number, at + 1)) {
    const size_t end = at + number.size();
    if ((at == 0 || !IsDigit(text[at - 1])) && (end == text.size() || !IsDigit(text[end]))) {
      return true;
    }
  }
  return false;
}

// "%ld.%03d" or "%ld,%03d": digits, a '.' or ',', exactly three digits.
bool ContainsMilliseconds(std::string_view text) {
  for (size_t i = 1; i + 3 < text.size(); ++i) {
    if ((text[i] == '.' || text[i] == ',') && IsDigit(text[i - 1]) && IsDigit(text[i + 1]) &&
        IsDigit(text[i + 2]) && IsDigit(text[i + 3]) &&
        (i + 4 == text.size() || !IsDigit(text[i + 4]))) {
      return true;
    }
  }
  return false;
}

}  // namespace

const char* LockRecordKindName(LockRecordKind kind) {
  switch (kind) {
    case LockRecordKind::kStillWaiting:
      return "still_waiting";
    case LockRecordKind::kAcquired:
      return "acquired";
    case LockRecordKind::kAvoidedDeadlock:
      return "avoided_deadlock";
    case LockRecordKind::kDetectedDeadlock:
      return "detected_deadlock";
    case LockRecordKind::kFailedToAcquire:
      return "failed_to_acquire";
    case LockRecordKind::kLockFailure:
      return "lock_failure";
    case LockRecordKind::kLockTimeout:
      return "lock_timeout";
    case LockRecordKind::kNowaitFailed:
      return "nowait_failed";
    case LockRecordKind::kLockNotAvailable:
      return "lock_not_available";
    case LockRecordKind::kDeadlock:
      return "deadlock";
  }
  return "unknown";
}

LoggedLockTag ParseLockTag(std::string_view text) {
  LoggedLockTag tag;
  tag.text = std::string(text);
  for (const TagForm& form : kTagForms) {
    std::array<uint32_t, 4> values{};
    if (!MatchFormat(text, form.format, &values)) continue;
    const size_t n = Conversions(form.format);
    for (size_t i = 0; i < n; ++i) tag.field[form.fields[i]] = values[i];
    tag.locktype = std::string(form.locktype);
    if (form.has_database) tag.database = tag.field[0];
    if (form.has_relation) tag.relation = tag.field[1];
    break;
  }
  return tag;
}

std::optional<LockRecord> ClassifyLockRecord(const LogRecord& r) {
  if (IsLogLine(r)) {
    LockRecord out = FromRecord(r);
    if (!ParseWaitMessage(r.message, &out)) return std::nullopt;
    ParseHoldersDetail(r.detail, &out);
    return out;
  }
  if (r.error_severity != "ERROR") return std::nullopt;
  if (r.state_code == "55P03") {
    LockRecord out = FromRecord(r);
    ClassifyLockNotAvailable(r, &out);
    return out;
  }
  if (r.state_code == "40P01") {
    LockRecord out = FromRecord(r);
    out.kind = LockRecordKind::kDeadlock;
    ParseDeadlockDetail(r.detail, &out);
    return out;
  }
  return std::nullopt;
}

bool LooksLikeTranslatedLockWait(const LogRecord& r) {
  if (!IsLogLine(r)) return false;
  const int pid = r.pid != 0 ? r.pid : r.session_pid;
  if (pid <= 0 || !ContainsNumber(r.message, std::to_string(pid))) return false;
  bool mode = false;
  for (std::string_view name : kModeNames) {
    mode = mode || r.message.find(name) != std::string::npos;
  }
  if (!mode || !ContainsMilliseconds(r.message)) return false;
  LockRecord english;  // Swedish begins with "process %d" too: only a full English parse is English
  return !ParseWaitMessage(r.message, &english);
}

}  // namespace pglock
