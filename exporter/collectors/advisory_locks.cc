#include "exporter/collectors/advisory_locks.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "exporter/pg/columns.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

using prometheus::MetricType;

const MetricDesc kHeld{"pglock_advisory_locks_held",
                       MetricType::Gauge,
                       "Granted advisory locks.",
                       {"target", "datname"}};
const MetricDesc kWaiters{"pglock_advisory_lock_waiters",
                          MetricType::Gauge,
                          "Sessions waiting for an advisory lock.",
                          {"target", "datname"}};
const MetricDesc kWaitMax{"pglock_advisory_lock_wait_seconds_max",
                          MetricType::Gauge,
                          "Longest current advisory lock wait, 0 if none.",
                          {"target", "datname"}};
const MetricDesc kWaitSeconds{
    "pglock_advisory_lock_wait_seconds",
    MetricType::Gauge,
    "How long a session has waited for an advisory lock, one series per waiter->blocker edge "
    "(top_n by wait; from pg_locks.waitstart on 14+).",
    {"target", "datname", "lock", "waiter_pid", "waiter_application_name", "blocker_pid",
     "blocker_application_name", "blocker_client_addr", "blocker_usename", "blocker_state"}};
const MetricDesc kHeldSeconds{
    "pglock_advisory_lock_held_seconds",
    MetricType::Gauge,
    "Observed age of a held advisory lock (top_n by age): since first seen, or since xact_start "
    "when later. scope=session when the holder stayed idle outside any transaction across the "
    "whole read of pg_locks (only a session lock can be held then), else unknown.",
    {"target", "datname", "lock", "pid", "application_name", "client_addr", "usename", "state",
     "scope"}};
const MetricDesc kReleases{
    "pglock_advisory_lock_releases_total",
    MetricType::Counter,
    "Advisory locks let go on purpose between two polls: unlocked (the holder is still "
    "connected: unlock or transaction end) or session_closed (the client closed its session "
    "cleanly while holding it).",
    {"target", "datname", "lock", "reason"}};
const MetricDesc kLosses{
    "pglock_advisory_lock_losses_total",
    MetricType::Counter,
    "Advisory locks lost: their session ended against the holder's will while holding them "
    "(timeout, terminated, connection lost, server restart, or an abnormal end of unknown "
    "cause). The application may still believe it holds the lock.",
    {"target", "datname", "lock", "cause"}};
const MetricDesc kHandovers{
    "pglock_advisory_lock_handovers_total",
    MetricType::Counter,
    "An advisory key held by another session than at the last poll after its holder released "
    "it: locks doing their job (informational).",
    {"target", "datname", "lock"}};
const MetricDesc kTakeovers{
    "pglock_advisory_lock_takeovers_total",
    MetricType::Counter,
    "An advisory key taken by another session after its holder lost it (within "
    "events.takeover_window; one per loss): two runs may overlap.",
    {"target", "datname", "lock"}};

// Prepared once per connection: the inventory reads every advisory lock, the tiered polls only the
// pending requests, behind a gate.
constexpr char kInventoryStatement[] = "advisory_locks_inventory";
constexpr char kWaitersStatement[] = "advisory_locks_waiters";
// The inventory with every granted transactionid lock too, for the row-lock tables.
constexpr char kInventoryXidsStatement[] = "advisory_locks_inventory_xids";
// Both with the quiet holders of the last inventory as parameters (PollPlan::quiet_baseline).
constexpr char kInventoryQuietStatement[] = "advisory_locks_inventory_quiet";
constexpr char kInventoryXidsQuietStatement[] = "advisory_locks_inventory_xids_quiet";
// A session is passed as quiet when it held at least this many advisory locks at the last
// inventory: below, its look-up (one pg_stat_get_activity(pid)) and the join cost about what
// skipping the per-row work of its locks saves (two holders of 150 locks each: the same backend
// CPU either way; docs/performance.md).
constexpr size_t kQuietMinLocks = 128;
// After the inventory: pg_stat_activity afresh, to tell which holders stayed idle across it.
constexpr char kIdleAfterStatement[] = "advisory_locks_idle_after";

struct HeldCandidate {
  double seconds;
  const AdvisoryLock* lock;
  const Session* session;
};

// The first sighting of a hold in the last inventory's history. The rows mostly come in the same
// order poll after poll (a session's keys in pg_locks' order; the sessions' groups may move): a
// cursor walks the history alongside them, and only a row that is not next there (taken since,
// after rows released since, or in a group that moved) is looked up, in a map built at the first
// such row.
class HistoryCursor {
 public:
  explicit HistoryCursor(const std::vector<HoldHistory::Entry>& entries) : entries_(entries) {}

  // The entry with the Id of `e`, or null.
  const HoldHistory::Entry* Find(const HoldHistory::Entry& e) {
    if (next_ < entries_.size() && entries_[next_].Id() == e.Id()) return &entries_[next_++];
    if (by_id_.empty()) {
      by_id_.reserve(entries_.size());
      for (size_t i = 0; i < entries_.size(); ++i) by_id_.try_emplace(KeyOf(entries_[i]), i);
    }
    const auto it = by_id_.find(KeyOf(e));
    if (it == by_id_.end()) return nullptr;
    next_ = it->second + 1;  // the rows after it follow it again
    return &entries_[it->second];
  }

 private:
  using Key = std::tuple<int, double, uint32_t, uint32_t, uint32_t, int>;
  struct Hash {
    size_t operator()(const Key& k) const {
      size_t h = std::hash<double>()(std::get<1>(k));
      for (uint64_t v :
           {uint64_t(uint32_t(std::get<0>(k))), uint64_t(std::get<2>(k)), uint64_t(std::get<3>(k)),
            uint64_t(std::get<4>(k)), uint64_t(uint32_t(std::get<5>(k)))}) {
        h = (h ^ v) * 0x100000001b3ULL;
      }
      return h;
    }
  };
  static Key KeyOf(const HoldHistory::Entry& e) {
    return {e.pid, e.backend_start, e.key.datid, e.key.classid, e.key.objid, e.key.objsubid};
  }

  const std::vector<HoldHistory::Entry>& entries_;
  size_t next_ = 0;
  std::unordered_map<Key, size_t, Hash> by_id_;  // first entry of each Id
};

// Exact per-database counts and the age of every held lock, with no strings built, since there
// can be 100k of them; labels are made for the top_n only. Refreshes the hold history on an
// inventory poll.
// The ctx.top_n oldest held locks (in no order) and how many are held: a bounded heap, not a
// candidate for each of 100k locks.
struct OldestHeld {
  std::vector<HeldCandidate> oldest;
  size_t held = 0;
};

OldestHeld AgeHeldLocks(const PollData& data, const ViewContext& ctx,
                        std::unordered_map<uint32_t, DatabaseAggregate>* by_datid) {
  OldestHeld out;
  // A min-heap on age: its top is the youngest of those kept, the first to give way.
  const auto older = [](const HeldCandidate& a, const HeldCandidate& b) {
    return a.seconds > b.seconds;
  };
  std::vector<HoldHistory::Entry> next_history;
  next_history.reserve(data.locks.size());
  HistoryCursor history(ctx.history->first_seen);
  // A session's locks, and a database's, come in runs: look each up once per run.
  const Session* s = nullptr;
  std::optional<int> s_pid;
  DatabaseAggregate* agg = nullptr;
  uint32_t agg_datid = 0;
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted) continue;
    if (agg == nullptr || agg_datid != l.key.datid) {
      agg = &(*by_datid)[l.key.datid];
      agg_datid = l.key.datid;
    }
    ++agg->advisory_locks_held;
    if (s_pid != l.pid) {
      s = ctx.index->Find(l.pid);
      s_pid = l.pid;
    }
    HoldHistory::Entry entry{l.pid, s != nullptr ? s->backend_start : 0, l.key, data.now};
    if (const HoldHistory::Entry* seen = history.Find(entry); seen != nullptr) {
      entry.first_seen = seen->first_seen;
    } else if (s != nullptr && s->NotRunning() && s->state_change) {
      // Not running a statement: the lock was taken no later than the last state change.
      entry.first_seen = std::min(*s->state_change, data.now);
    }
    double since = entry.first_seen;
    if (s != nullptr && s->xact_start) since = std::max(since, *s->xact_start);
    const HeldCandidate h{std::max(0.0, data.now - since), &l, s};
    ++out.held;
    if (out.oldest.size() < ctx.top_n) {
      out.oldest.push_back(h);
      std::push_heap(out.oldest.begin(), out.oldest.end(), older);
    } else if (!out.oldest.empty() && h.seconds > out.oldest.front().seconds) {
      std::pop_heap(out.oldest.begin(), out.oldest.end(), older);
      out.oldest.back() = h;
      std::push_heap(out.oldest.begin(), out.oldest.end(), older);
    }
    next_history.push_back(entry);
  }
  if (data.inventory) ctx.history->first_seen = std::move(next_history);
  return out;
}

// Waits, with edges to the holders of the keys waited for.
void BuildWaits(const PollData& data, const ViewContext& ctx,
                std::unordered_map<uint32_t, DatabaseAggregate>* by_datid, TargetView* view) {
  std::vector<const AdvisoryLock*> waiting;
  std::map<AdvisoryKey, std::set<int>> granted;  // only keys somebody waits for
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted) {
      waiting.push_back(&l);
      granted[l.key];
    }
  }
  if (waiting.empty()) return;
  // Most granted locks are not waited for: their objid rules them out before the map does.
  std::unordered_set<uint32_t> waited_objids;
  for (const AdvisoryLock* w : waiting) waited_objids.insert(w->key.objid);
  for (const AdvisoryLock& l : data.locks) {
    if (!l.granted || waited_objids.count(l.key.objid) == 0) continue;
    if (const auto it = granted.find(l.key); it != granted.end()) it->second.insert(l.pid);
  }
  for (const AdvisoryLock* w : waiting) {
    const AdvisoryLock& l = *w;
    const Session* s = ctx.index->Find(l.pid);
    DatabaseAggregate& agg = (*by_datid)[l.key.datid];
    double waited = 0;
    if (l.waitstart) {
      waited = data.now - *l.waitstart;
    } else if (data.server_version_num < 140000 && s != nullptr && s->query_start) {
      waited = data.now - *s->query_start;
    }
    waited = std::max(waited, 0.0);
    ++agg.advisory_waiters;
    agg.advisory_wait_max = std::max(agg.advisory_wait_max, waited);
    if (s == nullptr) continue;
    // pg_blocking_pids() also names sessions queued ahead for the same lock. On-call needs the
    // holders (the pids to act on), so edges go to the sessions that hold this key; only when
    // none of the blockers holds it (a queue of waiters) are they all kept.
    std::vector<int> edges;
    const std::set<int>& holders = granted[l.key];
    for (int pid : s->blocked_by) {
      if (holders.count(pid) != 0) edges.push_back(pid);
    }
    if (edges.empty()) edges = s->blocked_by;
    const std::string datname = ctx.index->Datname(l.key.datid);
    const std::string lock = LockLabel(l.key, ctx.options->names);
    for (int blocker_pid : edges) {
      view->waits.push_back({datname, lock, IdentityOf(s, l.pid),
                             IdentityOf(ctx.index->Find(blocker_pid), blocker_pid), waited});
    }
  }
}

}  // namespace

std::vector<PreparedStatement> AdvisoryLocksCollector::Prepared(int server_version_num) const {
  // pg_locks.waitstart is 14+; without it BuildWaits falls back to the waiter's query_start.
  const char* waitstart =
      server_version_num >= 140000 ? "date_part('epoch', l.waitstart)" : "NULL::float8";
  const auto variant = [&](const char* inventory, const char* xids, bool quiet) {
    return FillTemplate(queries::kAdvisoryLocks,
                        {{"waitstart", waitstart},
                         {"inventory", inventory},
                         {"xids", xids},
                         {"unquiet", quiet ? "(q.pid IS NULL OR NOT l.granted)" : "true"},
                         {"quiet_join", quiet ? queries::kAdvisoryLocksQuiet : ""}});
  };
  return {{kInventoryStatement, variant("true", "false", false)},
          {kInventoryXidsStatement, variant("true", "true", false)},
          {kInventoryQuietStatement, variant("true", "false", true)},
          {kInventoryXidsQuietStatement, variant("true", "true", true)},
          {kWaitersStatement, variant("false", "false", false)},
          {kIdleAfterStatement, queries::kIdleAfterLockRead}};
}

namespace {

// A session whose advisory locks the last inventory read while it stayed idle outside any
// transaction, with the state_change of that idle spell.
struct QuietCandidate {
  int pid = 0;
  double state_change = 0;
};

// The granted locks that the last inventory read while their session stayed idle outside any
// transaction (AdvisoryLock::outside_transaction), by session, in their order there: where its
// runs of rows are, how many, and the sum of their keys.
struct QuietHolder {
  std::vector<std::pair<size_t, size_t>> runs;  // [begin, end) in the baseline's locks
  int64_t count = 0;
  __int128 sum = 0;
};

std::unordered_map<int, QuietHolder> QuietHolders(const PollData& baseline) {
  std::unordered_map<int, QuietHolder> out;
  QuietHolder* h = nullptr;
  int h_pid = 0;
  const std::vector<AdvisoryLock>& locks = baseline.locks;
  for (size_t i = 0; i < locks.size(); ++i) {
    const AdvisoryLock& l = locks[i];
    if (!l.granted || !l.outside_transaction) continue;
    if (h == nullptr || h_pid != l.pid) {
      h = &out[l.pid];
      h_pid = l.pid;
    }
    if (h->runs.empty() || h->runs.back().second != i) h->runs.push_back({i, i});
    ++h->runs.back().second;
    ++h->count;
    h->sum += static_cast<int64_t>((uint64_t{l.key.classid} << 32) | l.key.objid);
  }
  return out;
}

// The sessions of `baseline` that may be quiet now: idle across its read of pg_locks and holding
// at least kQuietMinLocks locks, in pid order.
std::vector<QuietCandidate> QuietCandidates(const PollData& baseline) {
  const std::unordered_map<int, QuietHolder> held = QuietHolders(baseline);
  std::vector<QuietCandidate> out;
  for (const Session& s : baseline.sessions) {
    const auto it = held.find(s.pid);
    if (it != held.end() && it->second.count >= static_cast<int64_t>(kQuietMinLocks) &&
        s.state == "idle" && s.state_change) {
      out.push_back({s.pid, *s.state_change});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const QuietCandidate& a, const QuietCandidate& b) { return a.pid < b.pid; });
  return out;
}

// The candidates as the quiet statement's two parameters: an int4[] and a float8[] literal, each
// state_change written so that it reads back to the same double.
std::string QuietArgs(const std::vector<QuietCandidate>& candidates) {
  std::string pids = "'{", changes = "'{";
  for (const QuietCandidate& c : candidates) {
    if (pids.size() > 2) {
      pids += ',';
      changes += ',';
    }
    pids += std::to_string(c.pid);
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, c.state_change);
    changes.append(buf, ec == std::errc() ? end : buf);
  }
  return pids + "}'," + changes + "}'";
}

}  // namespace

void AdvisoryLocksCollector::Plan(const PollPlan& plan, StatementBatch* batch) const {
  const std::vector<QuietCandidate> quiet = plan.inventory && plan.quiet_baseline != nullptr
                                                ? QuietCandidates(*plan.quiet_baseline)
                                                : std::vector<QuietCandidate>{};
  if (!quiet.empty()) {
    batch->AddExecute(name(),
                      plan.row_locks ? kInventoryXidsQuietStatement : kInventoryQuietStatement,
                      StatementBatch::Phase::kMain, QuietArgs(quiet));
  } else {
    batch->AddExecute(name(), !plan.inventory  ? kWaitersStatement
                              : plan.row_locks ? kInventoryXidsStatement
                                               : kInventoryStatement);
  }
  if (!plan.inventory) return;
  batch->AddExecute(kIdleAfterStatement, kIdleAfterStatement, StatementBatch::Phase::kAfterMain);
}

namespace {

// Column indexes of the pg_locks statement, looked up once per poll: there can be 100k locks.
struct LockColumns {
  int pid, database, objsubid, exclusive, granted, waitstart, entries, keys, digest;
  int locktype, mode, relation, transactionid, locktag;  // pending requests only
};

// What a row of the pg_locks statement is. locktype is NULL on the granted rows read for
// themselves: advisory ones, and transactionid ones (with their xid, read for the row-lock
// tables). Other granted rows are only counted. `keys` is read on advisory rows only: the rows of
// other lock types with an objid (object, spectoken, ...) have keys too
// (queries/advisory_locks.sql). A quiet holder's one row has `granted` NULL: its count and the sum
// of its keys, its locks those of the last inventory.
enum class RowKind { kCounted, kTransaction, kAdvisory, kRequest, kQuiet };

RowKind KindOf(const PgResult& r, int i, const LockColumns& c) {
  if (r.IsNull(i, c.granted)) return RowKind::kQuiet;
  if (r.IsNull(i, c.locktype)) {
    return r.IsNull(i, c.transactionid) ? RowKind::kAdvisory : RowKind::kTransaction;
  }
  if (r.Bool(i, c.granted)) return RowKind::kCounted;
  return r.Text(i, c.locktype) == "advisory" ? RowKind::kAdvisory : RowKind::kRequest;
}

// The pending request of another lock type than advisory, for the lock-wait metrics.
LockWaitRow ParseRequest(const PgResult& r, int i, const LockColumns& c) {
  LockWaitRow w;
  w.pid = static_cast<int>(r.Int(i, c.pid).value_or(0));
  w.locktype = r.String(i, c.locktype);
  w.mode = r.String(i, c.mode);
  w.datid = static_cast<uint32_t>(r.Int(i, c.database).value_or(0));
  w.relation = r.String(i, c.relation);
  w.transactionid = r.String(i, c.transactionid);
  w.locktag = r.String(i, c.locktag);
  w.waitstart = r.Double(i, c.waitstart);
  return w;
}

// Marks the granted locks whose holder was idle, outside any transaction, with one unchanged
// state_change at the activity read before pg_locks and at `after`, the read after it: held
// across the whole pg_locks read with no transaction open, they can only be session locks.
Status MarkHeldOutsideTransactions(const PgResult* after, PollData* data) {
  if (after == nullptr) return Status::Ok();
  Columns c(*after, "idle_after_lock_read");
  const int pid_col = c["pid"];
  const int change_col = c["state_change"];
  if (Status s = c.status(); !s.ok()) return s;
  std::unordered_map<int, double> idle_after;
  for (int i = 0; i < after->Rows(); ++i) {
    const auto change = after->Double(i, change_col);
    if (change) idle_after[static_cast<int>(after->Int(i, pid_col).value_or(0))] = *change;
  }
  std::unordered_set<int> idle_throughout;
  for (const Session& s : data->sessions) {
    if (s.state != "idle" || !s.state_change) continue;
    const auto it = idle_after.find(s.pid);
    if (it != idle_after.end() && it->second == *s.state_change) idle_throughout.insert(s.pid);
  }
  if (idle_throughout.empty()) return Status::Ok();
  for (AdvisoryLock& l : data->locks) {
    l.outside_transaction = l.granted && idle_throughout.count(l.pid) != 0;
  }
  return Status::Ok();
}

// Calls `each` with every element of the int8[] text `text` ("{1,-2,3}"); false if it is not one.
template <typename F>
bool ForEachInt8(std::string_view text, F each) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return false;
  const char* p = text.data() + 1;
  const char* const end = text.data() + text.size() - 1;
  while (p < end) {
    int64_t v = 0;
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (next != end && *next != ',')) return false;
    each(v);
    p = next + (next != end ? 1 : 0);
  }
  return true;
}

// The advisory locks of one row: the row's columns with each of its keys (one for a pending
// request, every granted lock of a session, database, mode and key form otherwise).
Status ParseAdvisory(const PgResult& r, int i, const LockColumns& c,
                     std::vector<AdvisoryLock>* out) {
  AdvisoryLock l;
  l.pid = static_cast<int>(r.Int(i, c.pid).value_or(0));
  l.key.datid = static_cast<uint32_t>(r.Int(i, c.database).value_or(0));
  l.key.objsubid = static_cast<int>(r.Int(i, c.objsubid).value_or(1));
  l.exclusive = r.Bool(i, c.exclusive);
  l.granted = r.Bool(i, c.granted);
  l.waitstart = r.Double(i, c.waitstart);
  const bool ok = ForEachInt8(r.Text(i, c.keys), [&](int64_t key) {
    const auto bits = static_cast<uint64_t>(key);
    l.key.classid = static_cast<uint32_t>(bits >> 32);
    l.key.objid = static_cast<uint32_t>(bits);
    out->push_back(l);
  });
  if (!ok)
    return Status::UnexpectedShape("advisory_locks: the keys of a row are not an int8 array");
  return Status::Ok();
}

// `v` in decimal, as PostgreSQL writes the numeric sum of int8 keys.
std::string Decimal(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  while (v != 0) {
    const int d = static_cast<int>(v % 10);
    digits += static_cast<char>('0' + (d < 0 ? -d : d));
    v /= 10;
  }
  if (negative) digits += '-';
  return {digits.rbegin(), digits.rend()};
}

// A quiet holder's row: its locks from the baseline when its count and sum agree; false when they
// do not (it took or let go of a lock between the snapshot of pg_stat_activity and the read of
// pg_locks).
bool TakeQuietHolder(const PgResult& r, int i, const LockColumns& c, const PollData& baseline,
                     const std::unordered_map<int, QuietHolder>& holders,
                     std::vector<AdvisoryLock>* out) {
  const auto it = holders.find(static_cast<int>(r.Int(i, c.pid).value_or(0)));
  if (it == holders.end() || r.IsNull(i, c.digest)) return false;
  const QuietHolder& h = it->second;
  if (r.Int(i, c.entries).value_or(-1) != h.count || r.Text(i, c.digest) != Decimal(h.sum)) {
    return false;
  }
  for (const auto& [begin, end] : h.runs) {
    for (size_t j = begin; j < end; ++j) {
      out->push_back(baseline.locks[j]);
      out->back().outside_transaction = false;  // this read's own test marks it again
    }
  }
  return true;
}

// An inventory whose quiet holders disagreed: kept as a tiered poll (the pending requests it read
// stay), whose holders InventoryTier::Complete takes from the last inventory.
void FallBackToTheLastInventory(PollData* data) {
  data->inventory = false;
  data->quiet_mismatch = true;
  data->xact_locks_read = false;
  std::erase_if(data->locks, [](const AdvisoryLock& l) { return l.granted; });
  data->counted_locks.clear();
  data->xact_locks.clear();
}

}  // namespace

Status AdvisoryLocksCollector::Parse(const PollPlan& plan, const BatchResults& results,
                                     PollData* data) const {
  data->inventory = plan.inventory;
  data->xact_locks_read = plan.inventory && plan.row_locks;
  data->locks.clear();
  data->lock_waits.clear();
  data->counted_locks.clear();
  data->xact_locks.clear();
  const PgResult* r = results.Find(name());
  if (r == nullptr) return Status::Ok();
  Columns c(*r, "advisory_locks");
  const LockColumns k{c["pid"],           c["database"],  c["objsubid"], c["exclusive"],
                      c["granted"],       c["waitstart"], c["entries"],  c["keys"],
                      c["digest"],        c["locktype"],  c["mode"],     c["relation"],
                      c["transactionid"], c["locktag"]};
  if (Status s = c.status(); !s.ok()) return s;
  size_t advisory = 0;
  bool quiet = false;
  for (int i = 0; i < r->Rows(); ++i) {
    const RowKind kind = KindOf(*r, i, k);
    quiet = quiet || kind == RowKind::kQuiet;
    if (kind == RowKind::kAdvisory || kind == RowKind::kQuiet) {
      advisory += static_cast<size_t>(r->Int(i, k.entries).value_or(0));
    }
  }
  if (quiet && plan.quiet_baseline == nullptr) {
    return Status::UnexpectedShape("advisory_locks: a quiet holder's row without a baseline");
  }
  const std::unordered_map<int, QuietHolder> holders =
      quiet ? QuietHolders(*plan.quiet_baseline) : std::unordered_map<int, QuietHolder>{};
  bool mismatch = false;
  data->locks.reserve(advisory);
  for (int i = 0; i < r->Rows(); ++i) {
    switch (KindOf(*r, i, k)) {
      case RowKind::kQuiet:
        mismatch =
            mismatch || !TakeQuietHolder(*r, i, k, *plan.quiet_baseline, holders, &data->locks);
        break;
      case RowKind::kCounted:
        data->counted_locks.push_back({static_cast<int>(r->Int(i, k.pid).value_or(0)),
                                       r->String(i, k.locktype), r->Int(i, k.entries).value_or(1)});
        break;
      case RowKind::kTransaction:
        data->xact_locks.push_back({static_cast<int>(r->Int(i, k.pid).value_or(0)),
                                    static_cast<uint32_t>(r->Int(i, k.transactionid).value_or(0))});
        break;
      case RowKind::kAdvisory:
        if (Status s = ParseAdvisory(*r, i, k, &data->locks); !s.ok()) return s;
        break;
      case RowKind::kRequest:
        data->lock_waits.push_back(ParseRequest(*r, i, k));
        break;
    }
  }
  if (mismatch) FallBackToTheLastInventory(data);
  return MarkHeldOutsideTransactions(results.Find(kIdleAfterStatement), data);
}

void AdvisoryLocksCollector::BuildView(const PollData& data, const ViewContext& ctx,
                                       TargetView* view) const {
  std::unordered_map<uint32_t, DatabaseAggregate> by_datid;
  OldestHeld held = AgeHeldLocks(data, ctx, &by_datid);
  BuildWaits(data, ctx, &by_datid, view);
  for (const auto& [datid, counts] : by_datid) {
    DatabaseAggregate& agg = view->databases[ctx.index->Datname(datid)];
    agg.advisory_locks_held += counts.advisory_locks_held;
    agg.advisory_waiters += counts.advisory_waiters;
    agg.advisory_wait_max = std::max(agg.advisory_wait_max, counts.advisory_wait_max);
  }

  // Held locks: the top_n oldest get their labels, oldest first.
  std::sort(held.oldest.begin(), held.oldest.end(),
            [](const HeldCandidate& a, const HeldCandidate& b) { return a.seconds > b.seconds; });
  (*ctx.dropped)[kHeldSeconds.name] = static_cast<int64_t>(held.held - held.oldest.size());
  for (const HeldCandidate& h : held.oldest) {
    view->held.push_back({ctx.index->Datname(h.lock->key.datid),
                          LockLabel(h.lock->key, ctx.options->names),
                          IdentityOf(h.session, h.lock->pid),
                          h.lock->outside_transaction ? "session" : "unknown", h.seconds});
  }
  (*ctx.dropped)[kWaitSeconds.name] =
      KeepTopN(&view->waits, ctx.top_n,
               [](const WaitEdge& a, const WaitEdge& b) { return a.seconds > b.seconds; });
}

void AdvisoryLocksCollector::ExposeView(const TargetSnapshot& snap, const TargetView& v,
                                        Families* f) const {
  const std::string& tg = snap.target;
  for (const auto& [db, a] : v.databases) {
    f->Add(kHeld, {tg, db}, static_cast<double>(a.advisory_locks_held));
    f->Add(kWaiters, {tg, db}, static_cast<double>(a.advisory_waiters));
    f->Add(kWaitMax, {tg, db}, a.advisory_wait_max);
  }
  for (const WaitEdge& w : v.waits) {
    f->Add(kWaitSeconds,
           {tg, w.datname, w.lock, std::to_string(w.waiter.pid), w.waiter.application_name,
            std::to_string(w.blocker.pid), w.blocker.application_name,
            AddrLabel(w.blocker.client_addr), w.blocker.usename, StateLabel(w.blocker.state)},
           w.seconds);
  }
  for (const HeldLock& h : v.held) {
    f->Add(kHeldSeconds,
           {tg, h.datname, h.lock, std::to_string(h.holder.pid), h.holder.application_name,
            AddrLabel(h.holder.client_addr), h.holder.usename, StateLabel(h.holder.state), h.scope},
           h.seconds);
  }
}

void AdvisoryLocksCollector::ExposeCounters(const TargetSnapshot& snap, Families* f) const {
  const std::string& tg = snap.target;
  const Counters& c = *snap.counters;
  for (const auto& [k, n] : c.releases) {
    f->Add(kReleases, {tg, std::get<0>(k), std::get<1>(k), std::get<2>(k)}, n);
  }
  for (const auto& [k, n] : c.losses) {
    f->Add(kLosses, {tg, std::get<0>(k), std::get<1>(k), std::get<2>(k)}, n);
  }
  for (const auto& [k, n] : c.handovers) {
    f->Add(kHandovers, {tg, std::get<0>(k), std::get<1>(k)}, n);
  }
  for (const auto& [k, n] : c.takeovers) {
    f->Add(kTakeovers, {tg, std::get<0>(k), std::get<1>(k)}, n);
  }
}

PGLOCK_REGISTER_COLLECTOR(AdvisoryLocksCollector, 40);

}  // namespace pglock
