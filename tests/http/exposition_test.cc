#include "exporter/http/exposition.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "exporter/collectors/activity.h"
#include "exporter/metrics/labels.h"
#include "tests/support/metrics_text.h"
#include "tests/support/utf8_check.h"

namespace pglock {
namespace {

// Holder parts as a lease row's view holds them.
std::shared_ptr<const std::vector<std::string>> Parts(std::vector<std::string> parts) {
  return std::make_shared<const std::vector<std::string>>(std::move(parts));
}

using testing::IsValidUtf8;

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

const ExporterInfo kBuild{"0.1.0", "abc123"};

// A snapshot of an up target with one of everything; `text` goes into every untrusted field.
std::shared_ptr<TargetSnapshot> FullSnapshot(const std::string& target,
                                             const std::string& text = "") {
  auto t = std::make_shared<TargetSnapshot>();
  t->target = target;
  t->up = true;
  t->poll_duration = 0.125;
  t->poll_errors = 2;
  t->quiet_fallbacks = 3;
  t->last_success = 1'700'000'000;
  t->server_version = "15.4";
  t->state = "up";

  auto v = std::make_shared<TargetView>();
  const std::string db = "appdb" + text;
  DatabaseAggregate agg;
  agg.advisory_locks_held = 3;
  agg.advisory_waiters = 1;
  agg.advisory_wait_max = 12.5;
  agg.idle_in_transaction = 2;
  agg.idle_in_transaction_max = 40;
  agg.idle_in_transaction_holders = 1;
  v->databases[db] = agg;
  v->databases["quiet" + text] = DatabaseAggregate{};

  const Identity waiter{10, "worker" + text, "10.0.0.1", "alice" + text, "active"};
  const Identity blocker{20, "holder" + text, "", "bob" + text, ""};
  v->waits.push_back({db, "sweep" + text, waiter, blocker, 12.5});
  v->held.push_back({db, "-5:-7", blocker, "session", 300});
  v->held.push_back({db, "42" + text, waiter, "unknown", 1.5});
  IdleHolder with_timeout{db,
                          {30, "cron" + text, "192.0.2.1", "carol", "idle in transaction"},
                          "advisory,blocking",
                          40,
                          20.0};
  IdleHolder without_timeout{db,
                             {31, "cron2" + text, "192.0.2.2", "carol", "idle in transaction"},
                             "blocking",
                             10,
                             std::nullopt};
  v->idle_holders = {with_timeout, without_timeout};

  ClientRow client;
  client.key = {db, "pool" + text, "", "dave" + text};
  client.sessions_by_state = {{"idle", 4}, {"unknown", 1}};
  client.total = 5;
  client.idle_lock_holders = 4;
  v->parts.Mutable<ClientSessions>()->rows.push_back(client);

  v->settings = {{"idle_in_transaction_session_timeout", 60, "configuration file"},
                 {"lock_timeout", 0, "default"}};
  v->overrides = {{"idle_in_transaction_session_timeout", 5, 7, "app" + text, "alice" + text, 30}};

  LeaseTableView split;
  split.table = "public.leases";
  split.ok = true;
  split.holder_labels = {"holder_host", "holder_pid"};
  split.held = 1;
  split.expired = 1;
  split.leases.push_back(
      {"reindex" + text, "web-1:42:x" + text, Parts({"web-1" + text, "42"}), true, 100, 60});
  split.leases.push_back({"vacuum" + text, "junk" + text, nullptr, false, 400, -10});
  LeaseTableView whole;
  whole.table = "jobs";
  whole.ok = true;
  whole.held = 1;
  whole.leases.push_back({"nightly" + text, "host-9" + text, {}, true, 5, 55});
  LeaseTableView broken;
  broken.table = "missing";
  broken.ok = false;
  v->leases = {split, whole, broken};

  PoolerView pooler;
  pooler.name = "bouncer";
  pooler.ok = true;
  pooler.session_locks[{"app" + text, "alice" + text}] = 2;
  v->poolers = {pooler};
  v->hidden_sessions = 1;
  v->lock_table.counted = true;
  v->lock_table.entries = 2100;
  v->lock_table.slots = 2688;
  v->lock_table.lock_manager_waiters = 1;
  v->lock_table.sessions = {
      {db, {77, "leaky" + text, "10.0.0.3", "bob" + text, "idle"}, "advisory", 2000}};
  t->view = v;
  t->lock_table = std::make_shared<LockTableView>(v->lock_table);

  auto counted = std::make_shared<Counters>();
  t->counters = counted;
  Counters& c = *counted;
  c.releases[{db, "unnamed", "unlocked"}] = 4;
  c.releases[{db, "sweep", "session_closed"}] = 1;
  c.losses[{db, "sweep", "idle_in_transaction_timeout"}] = 1;
  c.takeovers[{db, "unnamed"}] = 2;
  c.sessions_ended[{db, "fatal"}] = 7;
  c.lease_transitions[{"public.leases", "reindex" + text, "overlap"}] = 1;
  c.series_dropped["pglock_advisory_lock_held_seconds"] = 9;
  c.collector_errors["leases"] = 3;
  return t;
}

std::shared_ptr<TargetSnapshot> DownSnapshot(const std::string& target) {
  auto t = FullSnapshot(target);  // a stale view stays attached; it must not be shown
  t->up = false;
  t->state = "down";
  t->last_error = "connection refused";
  return t;
}

std::vector<std::shared_ptr<const TargetSnapshot>> Targets(
    std::initializer_list<std::shared_ptr<TargetSnapshot>> list) {
  return {list.begin(), list.end()};
}

// The families of ExpositionText's text, as a scraper reads them.
std::vector<MetricFamily> Parsed(const std::vector<std::shared_ptr<const TargetSnapshot>>& targets,
                                 const ExporterInfo& exporter) {
  return testing::ParseFamilies(ExpositionText(targets, exporter));
}

const MetricFamily* Find(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const MetricFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string Label(const ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label) {
    if (l.name == name) return l.value;
  }
  return "<absent>";
}

std::map<std::string, std::string> Labels(const ClientMetric& m) {
  std::map<std::string, std::string> out;
  for (const auto& l : m.label) out[l.name] = l.value;
  return out;
}

std::vector<const ClientMetric*> ForTarget(const std::vector<MetricFamily>& families,
                                           const std::string& name, const std::string& target) {
  std::vector<const ClientMetric*> out;
  if (const MetricFamily* f = Find(families, name)) {
    for (const ClientMetric& m : f->metric) {
      if (Label(m, "target") == target) out.push_back(&m);
    }
  }
  return out;
}

// Families built from the view (dropped for a target that is down).
const char* const kViewFamilies[] = {
    "pglock_advisory_locks_held",
    "pglock_advisory_lock_waiters",
    "pglock_advisory_lock_wait_seconds_max",
    "pglock_advisory_lock_wait_seconds",
    "pglock_advisory_lock_held_seconds",
    "pglock_idle_in_transaction_sessions",
    "pglock_idle_in_transaction_seconds_max",
    "pglock_idle_in_transaction_lock_holders",
    "pglock_idle_in_transaction_holder_seconds",
    "pglock_idle_in_transaction_timeout_remaining_seconds",
    "pglock_client_sessions",
    "pglock_client_idle_lock_holding_sessions",
    "pglock_setting_seconds",
    "pglock_setting_override_seconds",
    "pglock_lease_table_up",
    "pglock_leases",
    "pglock_lease_held",
    "pglock_lease_age_seconds",
    "pglock_lease_expires_in_seconds",
    "pglock_lease_holder_info",
    "pglock_pooler_up",
    "pglock_pooled_session_advisory_locks",
    "pglock_sessions_hidden",
    "pglock_lock_table_entries",
    "pglock_lock_table_slots",
    "pglock_session_lock_table_entries",
    "pglock_lock_manager_waiters",
    "pglock_lock_table_last_good_age_seconds",
};

const char* const kCounterFamilies[] = {
    "pglock_poll_errors_total",
    "pglock_series_dropped_total",
    "pglock_collector_errors_total",
    "pglock_advisory_lock_releases_total",
    "pglock_advisory_lock_losses_total",
    "pglock_advisory_lock_takeovers_total",
    "pglock_sessions_ended_total",
    "pglock_lease_transitions_total",
    "pglock_quiet_holder_fallbacks_total",
};

TEST(ExpositionTextTest, EachFamilyNameOnceAcrossTargets) {
  const auto families =
      Parsed(Targets({FullSnapshot("a"), DownSnapshot("b"), FullSnapshot("c")}), kBuild);
  std::set<std::string> names;
  for (const MetricFamily& f : families) {
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate family " << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_FALSE(f.metric.empty()) << f.name;
  }
  for (const char* name : kViewFamilies) {
    EXPECT_EQ(ForTarget(families, name, "a").size(), ForTarget(families, name, "c").size()) << name;
    EXPECT_FALSE(ForTarget(families, name, "a").empty()) << name;
  }
}

TEST(ExpositionTextTest, CountersEndInTotalAndGaugesDoNot) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  for (const MetricFamily& f : families) {
    const bool total = f.name.size() > 6 && f.name.compare(f.name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(f.type == MetricType::Counter, total) << f.name;
    EXPECT_TRUE(f.type == MetricType::Counter || f.type == MetricType::Gauge ||
                f.type == MetricType::Histogram)
        << f.name;
  }
  for (const char* name : kCounterFamilies) {
    const MetricFamily* f = Find(families, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->type, MetricType::Counter) << name;
  }
}

TEST(ExpositionTextTest, EpisodeHistogramsHaveTheirBucketsBeforeAnyEpisode) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  const MetricFamily* f = Find(families, "pglock_blocking_episode_duration_seconds");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->type, MetricType::Histogram);
  ASSERT_EQ(f->metric.size(), 1u);
  const auto& buckets = f->metric[0].histogram.bucket;
  ASSERT_FALSE(buckets.empty());
  EXPECT_EQ(buckets.front().upper_bound, 1);
  EXPECT_EQ(buckets[buckets.size() - 2].upper_bound, 3600);
  EXPECT_TRUE(std::isinf(buckets.back().upper_bound));
}

TEST(ExpositionTextTest, BuildInfoIsAlwaysThere) {
  const auto families = Parsed({}, kBuild);
  const MetricFamily* build = Find(families, "pglock_build_info");
  ASSERT_NE(build, nullptr);
  EXPECT_EQ(build->type, MetricType::Gauge);
  ASSERT_EQ(build->metric.size(), 1u);
  EXPECT_EQ(Labels(build->metric[0]),
            (std::map<std::string, std::string>{{"version", "0.1.0"}, {"revision", "abc123"}}));
  EXPECT_EQ(build->metric[0].gauge.value, 1);
  // Unsharded: shard 0 of 1, and no per-target shard series (pglock_up names every target).
  for (const auto& [name, value] : std::map<std::string, double>{
           {"pglock_shard_ordinal", 0}, {"pglock_shards", 1}, {"pglock_shard_targets", 0}}) {
    const MetricFamily* f = Find(families, name);
    ASSERT_NE(f, nullptr) << name;
    ASSERT_EQ(f->metric.size(), 1u) << name;
    EXPECT_EQ(f->metric[0].gauge.value, value) << name;
  }
  EXPECT_EQ(Find(families, "pglock_target_shard_info"), nullptr);
}

TEST(ExpositionTextTest, AShardSaysWhichShardPollsEachTarget) {
  ExporterInfo info = kBuild;
  info.shard = {.ordinal = 1, .total = 3, .targets = {{"a", 1}, {"b", 0}, {"c", 1}, {"d", 2}}};
  const auto families = Parsed(Targets({FullSnapshot("a"), FullSnapshot("c")}), info);
  EXPECT_EQ(Find(families, "pglock_shard_ordinal")->metric[0].gauge.value, 1);
  EXPECT_EQ(Find(families, "pglock_shards")->metric[0].gauge.value, 3);
  EXPECT_EQ(Find(families, "pglock_shard_targets")->metric[0].gauge.value, 2);
  const MetricFamily* owners = Find(families, "pglock_target_shard_info");
  ASSERT_NE(owners, nullptr);
  std::map<std::string, std::string> shard_of;
  for (const ClientMetric& m : owners->metric) {
    const auto labels = Labels(m);
    shard_of[labels.at("target")] = labels.at("shard");
    EXPECT_EQ(m.gauge.value, 1);
  }
  EXPECT_EQ(shard_of,
            (std::map<std::string, std::string>{{"a", "1"}, {"b", "0"}, {"c", "1"}, {"d", "2"}}));
}

TEST(ExpositionTextTest, DownTargetKeepsHealthAndCountersOnly) {
  const auto families = Parsed(Targets({FullSnapshot("a"), DownSnapshot("b")}), kBuild);
  const auto up_b = ForTarget(families, "pglock_up", "b");
  ASSERT_EQ(up_b.size(), 1u);
  EXPECT_EQ(up_b[0]->gauge.value, 0);
  const auto up_a = ForTarget(families, "pglock_up", "a");
  ASSERT_EQ(up_a.size(), 1u);
  EXPECT_EQ(up_a[0]->gauge.value, 1);

  for (const char* name : kViewFamilies) {
    EXPECT_TRUE(ForTarget(families, name, "b").empty()) << name;
  }
  // No server version for a target that is not answering.
  EXPECT_TRUE(ForTarget(families, "pglock_postgres_info", "b").empty());
  EXPECT_EQ(ForTarget(families, "pglock_postgres_info", "a").size(), 1u);

  for (const char* name : kCounterFamilies) {
    EXPECT_FALSE(ForTarget(families, name, "b").empty()) << name;
  }
  const auto errors = ForTarget(families, "pglock_poll_errors_total", "b");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]->counter.value, 2);
  const auto fallbacks = ForTarget(families, "pglock_quiet_holder_fallbacks_total", "b");
  ASSERT_EQ(fallbacks.size(), 1u);
  EXPECT_EQ(fallbacks[0]->counter.value, 3);
  EXPECT_EQ(ForTarget(families, "pglock_last_poll_success_timestamp_seconds", "b").size(), 1u);
}

// A poll failing with out of shared memory keeps the lock table's figures (read alone, or the last
// good poll's), but not the waiters of the LWLock, which only the poll's own read can tell.
TEST(ExpositionTextTest, FullLockTableKeepsItsFiguresWhileDown) {
  auto full = DownSnapshot("b");
  full->lock_table_full = true;
  const auto families = Parsed(Targets({FullSnapshot("a"), full}), kBuild);
  const auto flag = ForTarget(families, "pglock_lock_table_full", "b");
  ASSERT_EQ(flag.size(), 1u);
  EXPECT_EQ(flag[0]->gauge.value, 1);
  const auto entries = ForTarget(families, "pglock_lock_table_entries", "b");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0]->gauge.value, 2100);
  const auto top = ForTarget(families, "pglock_session_lock_table_entries", "b");
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(Label(*top[0], "pid"), "77");
  EXPECT_EQ(Label(*top[0], "application_name"), "leaky");
  EXPECT_TRUE(ForTarget(families, "pglock_lock_manager_waiters", "b").empty());
  EXPECT_EQ(ForTarget(families, "pglock_lock_table_full", "a")[0]->gauge.value, 0);
  EXPECT_TRUE(ForTarget(families, "pglock_advisory_locks_held", "b").empty());
}

TEST(ExpositionTextTest, NeverPolledTargetHasNoSuccessTimestamp) {
  auto t = std::make_shared<TargetSnapshot>();
  t->target = "new";
  t->state = "connecting";
  const auto families = Parsed(Targets({t, nullptr}), kBuild);
  EXPECT_EQ(ForTarget(families, "pglock_up", "new").size(), 1u);
  EXPECT_TRUE(ForTarget(families, "pglock_last_poll_success_timestamp_seconds", "new").empty());
  EXPECT_TRUE(ForTarget(families, "pglock_advisory_locks_held", "new").empty());
}

TEST(ExpositionTextTest, HealthValues) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  EXPECT_EQ(ForTarget(families, "pglock_poll_duration_seconds", "a").at(0)->gauge.value, 0.125);
  EXPECT_EQ(
      ForTarget(families, "pglock_last_poll_success_timestamp_seconds", "a").at(0)->gauge.value,
      1'700'000'000);
  const auto info = ForTarget(families, "pglock_postgres_info", "a");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(Label(*info[0], "server_version"), "15.4");
  EXPECT_EQ(info[0]->gauge.value, 1);
  const auto dropped = ForTarget(families, "pglock_series_dropped_total", "a");
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(Label(*dropped[0], "metric"), "pglock_advisory_lock_held_seconds");
  EXPECT_EQ(dropped[0]->counter.value, 9);
}

TEST(ExpositionTextTest, AdvisoryLockSeries) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  const auto held = ForTarget(families, "pglock_advisory_locks_held", "a");
  ASSERT_EQ(held.size(), 2u);  // appdb and the quiet database, at 0
  std::map<std::string, double> by_db;
  for (const ClientMetric* m : held) by_db[Label(*m, "datname")] = m->gauge.value;
  EXPECT_EQ(by_db, (std::map<std::string, double>{{"appdb", 3}, {"quiet", 0}}));

  const auto waits = ForTarget(families, "pglock_advisory_lock_wait_seconds", "a");
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(Labels(*waits[0]), (std::map<std::string, std::string>{
                                   {"target", "a"},
                                   {"datname", "appdb"},
                                   {"lock", "sweep"},
                                   {"waiter_pid", "10"},
                                   {"waiter_application_name", "worker"},
                                   {"blocker_pid", "20"},
                                   {"blocker_application_name", "holder"},
                                   {"blocker_client_addr", "local"},
                                   {"blocker_usename", "bob"},
                                   {"blocker_state", "unknown"},
                               }));
  EXPECT_EQ(waits[0]->gauge.value, 12.5);

  const auto held_seconds = ForTarget(families, "pglock_advisory_lock_held_seconds", "a");
  ASSERT_EQ(held_seconds.size(), 2u);
  EXPECT_EQ(Labels(*held_seconds[0]), (std::map<std::string, std::string>{
                                          {"target", "a"},
                                          {"datname", "appdb"},
                                          {"lock", "-5:-7"},
                                          {"pid", "20"},
                                          {"application_name", "holder"},
                                          {"client_addr", "local"},
                                          {"usename", "bob"},
                                          {"state", "unknown"},
                                          {"scope", "session"},
                                      }));
  EXPECT_EQ(held_seconds[0]->gauge.value, 300);
  EXPECT_EQ(Label(*held_seconds[1], "client_addr"), "10.0.0.1");
  EXPECT_EQ(Label(*held_seconds[1], "state"), "active");
  EXPECT_EQ(Label(*held_seconds[1], "scope"), "unknown");
}

TEST(ExpositionTextTest, IdleInTransactionSeries) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  const auto holders = ForTarget(families, "pglock_idle_in_transaction_holder_seconds", "a");
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(Label(*holders[0], "holds"), "advisory,blocking");
  EXPECT_EQ(Label(*holders[0], "pid"), "30");
  EXPECT_EQ(holders[0]->gauge.value, 40);
  EXPECT_EQ(Label(*holders[1], "holds"), "blocking");
  // Remaining time only where a timeout applies.
  const auto remaining =
      ForTarget(families, "pglock_idle_in_transaction_timeout_remaining_seconds", "a");
  ASSERT_EQ(remaining.size(), 1u);
  EXPECT_EQ(Labels(*remaining[0]), Labels(*holders[0]));
  EXPECT_EQ(remaining[0]->gauge.value, 20);
}

TEST(ExpositionTextTest, ClientSeries) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  const auto sessions = ForTarget(families, "pglock_client_sessions", "a");
  ASSERT_EQ(sessions.size(), 2u);
  std::map<std::string, double> by_state;
  for (const ClientMetric* m : sessions) {
    EXPECT_EQ(Label(*m, "client_addr"), "local");
    EXPECT_EQ(Label(*m, "application_name"), "pool");
    by_state[Label(*m, "state")] = m->gauge.value;
  }
  EXPECT_EQ(by_state, (std::map<std::string, double>{{"idle", 4}, {"unknown", 1}}));
  const auto idle = ForTarget(families, "pglock_client_idle_lock_holding_sessions", "a");
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0]->gauge.value, 4);
  EXPECT_EQ(Label(*idle[0], "state"), "<absent>");
}

TEST(ExpositionTextTest, SettingSeries) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  const auto settings = ForTarget(families, "pglock_setting_seconds", "a");
  ASSERT_EQ(settings.size(), 2u);
  EXPECT_EQ(Label(*settings[0], "name"), "idle_in_transaction_session_timeout");
  EXPECT_EQ(Label(*settings[0], "source"), "configuration file");
  EXPECT_EQ(settings[0]->gauge.value, 60);
  const auto overrides = ForTarget(families, "pglock_setting_override_seconds", "a");
  ASSERT_EQ(overrides.size(), 1u);
  EXPECT_EQ(Labels(*overrides[0]),
            (std::map<std::string, std::string>{{"target", "a"},
                                                {"name", "idle_in_transaction_session_timeout"},
                                                {"database", "app"},
                                                {"role", "alice"}}));
  EXPECT_EQ(overrides[0]->gauge.value, 30);
}

TEST(ExpositionTextTest, LeaseSeries) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  std::map<std::string, double> table_up;
  for (const ClientMetric* m : ForTarget(families, "pglock_lease_table_up", "a")) {
    table_up[Label(*m, "table")] = m->gauge.value;
  }
  EXPECT_EQ(table_up,
            (std::map<std::string, double>{{"public.leases", 1}, {"jobs", 1}, {"missing", 0}}));
  // A table that could not be read has no lease series at all.
  for (const char* name : {"pglock_leases", "pglock_lease_held", "pglock_lease_holder_info"}) {
    for (const ClientMetric* m : ForTarget(families, name, "a")) {
      EXPECT_NE(Label(*m, "table"), "missing") << name;
    }
  }
  const auto states = ForTarget(families, "pglock_leases", "a");
  ASSERT_EQ(states.size(), 4u);
  EXPECT_EQ(Label(*states[0], "state"), "held");
  EXPECT_EQ(Label(*states[1], "state"), "expired");

  const auto info = ForTarget(families, "pglock_lease_holder_info", "a");
  ASSERT_EQ(info.size(), 3u);
  EXPECT_EQ(Labels(*info[0]), (std::map<std::string, std::string>{{"target", "a"},
                                                                  {"table", "public.leases"},
                                                                  {"lease", "reindex"},
                                                                  {"holder_host", "web-1"},
                                                                  {"holder_pid", "42"}}));
  EXPECT_EQ(Label(*info[1], "holder_host"), "");
  EXPECT_EQ(Labels(*info[2]),
            (std::map<std::string, std::string>{
                {"target", "a"}, {"table", "jobs"}, {"lease", "nightly"}, {"holder", "host-9"}}));
  const auto expires = ForTarget(families, "pglock_lease_expires_in_seconds", "a");
  ASSERT_EQ(expires.size(), 3u);
  EXPECT_EQ(expires[1]->gauge.value, -10);
  const auto held = ForTarget(families, "pglock_lease_held", "a");
  EXPECT_EQ(held[0]->gauge.value, 1);
  EXPECT_EQ(held[1]->gauge.value, 0);
}

TEST(ExpositionTextTest, EventCounters) {
  const auto families = Parsed(Targets({FullSnapshot("a")}), kBuild);
  const auto losses = ForTarget(families, "pglock_advisory_lock_losses_total", "a");
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(Labels(*losses[0]),
            (std::map<std::string, std::string>{{"target", "a"},
                                                {"datname", "appdb"},
                                                {"lock", "sweep"},
                                                {"cause", "idle_in_transaction_timeout"}}));
  EXPECT_EQ(losses[0]->counter.value, 1);
  const auto releases = ForTarget(families, "pglock_advisory_lock_releases_total", "a");
  ASSERT_EQ(releases.size(), 2u);
  const auto ended = ForTarget(families, "pglock_sessions_ended_total", "a");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(Label(*ended[0], "reason"), "fatal");
  EXPECT_EQ(ended[0]->counter.value, 7);
  const auto transitions = ForTarget(families, "pglock_lease_transitions_total", "a");
  ASSERT_EQ(transitions.size(), 1u);
  EXPECT_EQ(Label(*transitions[0], "kind"), "overlap");
  const auto pooled = ForTarget(families, "pglock_pooled_session_advisory_locks", "a");
  ASSERT_EQ(pooled.size(), 1u);
  EXPECT_EQ(Label(*pooled[0], "pooler"), "bouncer");
  EXPECT_EQ(Label(*pooled[0], "database"), "app");
  EXPECT_EQ(Label(*pooled[0], "user"), "alice");
  EXPECT_EQ(pooled[0]->gauge.value, 2);
}

TEST(SnapshotMetricsTest, ReadsTheSourceOnEveryCall) {
  int calls = 0;
  SnapshotMetrics c(
      [&calls] {
        ++calls;
        return Targets({FullSnapshot("a")});
      },
      kBuild);
  const std::string first = c.Text();
  const std::string second = c.Text();
  EXPECT_EQ(calls, 2);
  EXPECT_NE(Find(testing::ParseFamilies(first), "pglock_up"), nullptr);
  EXPECT_EQ(first, second);
}

TEST(SnapshotMetricsTest, ThrowingSourceGivesAnEmptyScrape) {
  SnapshotMetrics c(
      []() -> std::vector<std::shared_ptr<const TargetSnapshot>> {
        throw std::runtime_error("boom");
      },
      kBuild);
  std::string text = "not empty";
  EXPECT_NO_THROW(text = c.Text());
  EXPECT_EQ(text, "");
}

// ---- Hostile text through the real serializer -----------------------------------------------

std::string HostileText() {
  std::string s = "q\"uo\"te back\\slash\\ new\nline cr\r tab\t nul";
  s += std::string(1, '\0');
  s += " bad\xFF\xFE utf8 \xC0\xAF overlong \xED\xA0\x80 surrogate \xC2\x85 nel } { = , # ";
  return s;
}

std::string HundredKilobytes() {
  std::string s;
  for (size_t i = 0; i < 100 * 1024; ++i) s += static_cast<char>((i * 131 + 7) % 256);
  return s;
}

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// Parses one sample line of the text format: name{label="value",...} number. Returns an error,
// or "" when the line is well formed.
std::string CheckSampleLine(const std::string& line, size_t max_label_bytes) {
  size_t i = 0;
  if (i >= line.size() || !IsNameStart(line[i])) return "bad metric name";
  while (i < line.size() && (IsNameChar(line[i]) || line[i] == ':')) ++i;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      if (!IsNameStart(line[i])) return "bad label name";
      while (i < line.size() && IsNameChar(line[i])) ++i;
      if (line.compare(i, 2, "=\"") != 0) return "expected =\"";
      i += 2;
      size_t value_bytes = 0;
      while (i < line.size() && line[i] != '"') {
        const auto c = static_cast<unsigned char>(line[i]);
        if (c < 0x20 || c == 0x7F) return "raw control byte in a label value";
        if (line[i] == '\\') {
          if (i + 1 >= line.size()) return "dangling backslash";
          const char e = line[i + 1];
          if (e != '\\' && e != '"' && e != 'n') return std::string("bad escape \\") + e;
          ++i;
        }
        ++i;
        ++value_bytes;
      }
      if (i >= line.size()) return "unterminated label value";
      if (value_bytes > max_label_bytes) return "label value too long";
      ++i;  // closing quote
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return "unterminated label set";
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') return "expected a space before the value";
  ++i;
  const std::string value = line.substr(i);
  if (value == "NaN" || value == "+Inf" || value == "-Inf") return "";
  char* end = nullptr;
  std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0') return "bad value \"" + value + "\"";
  return "";
}

TEST(ExpositionTextTest, HostileStringsStayWellFormed) {
  const std::string hostile = HostileText();
  const std::string huge = HundredKilobytes();
  const std::string text = ExpositionText(
      Targets({FullSnapshot("hostile", hostile), FullSnapshot("huge", huge), DownSnapshot("down")}),
      kBuild);
  ASSERT_FALSE(text.empty());
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(text.find('\0'), std::string::npos);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  // A label value may grow by escaping (each byte at most doubled) but stays bounded.
  const size_t max_label_bytes = kMaxLabelValueBytes + kTruncatedMarker.size();

  std::istringstream in(text);
  std::string line;
  int samples = 0;
  std::set<std::string> series;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      EXPECT_TRUE(line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) << line;
      continue;
    }
    ++samples;
    const std::string error = CheckSampleLine(line, max_label_bytes);
    EXPECT_EQ(error, "") << line.substr(0, 300);
    const auto space = line.rfind(' ');
    EXPECT_TRUE(series.insert(line.substr(0, space)).second)
        << "duplicate series " << line.substr(0, 300);
  }
  EXPECT_GT(samples, 50);
  // Hostile values are present, replaced and escaped, not dropped.
  EXPECT_NE(text.find("q\\\"uo\\\"te back\\\\slash"), std::string::npos);
}

// Without promtool: a failure where it is required (CI), else a warning (testing::PromtoolCheck).
TEST(ExpositionTextTest, PromtoolAcceptsHostileOutput) {
  const std::string text =
      ExpositionText(Targets({FullSnapshot("hostile", HostileText()),
                              FullSnapshot("huge", HundredKilobytes()), DownSnapshot("down")}),
                     kBuild);
  std::string out;
  EXPECT_TRUE(testing::PromtoolCheck(text, &out)) << out << "\n" << text.substr(0, 2000);
}

// The check skips a text whose form (the values' digits aside) passed before, and only that:
// another value's format, another label or a text that failed is checked again.
// Sets an environment variable (or unsets it, for nullptr) for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The forms that passed, by another process of the run, in $PGLOCK_PROMTOOL_PASSED.
std::vector<std::filesystem::path> PassedForms(const std::string& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

// PromtoolCheck(text) in a child process, as another test binary of the run would; its result.
bool CheckInAnotherProcess(const std::string& text) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::string out;
    _exit(testing::PromtoolCheck(text, &out) ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(ExpositionTextTest, PromtoolChecksEachFormOnce) {
  if (access("/usr/bin/promtool", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/promtool";
  const ScopedEnv no_shared_forms("PGLOCK_PROMTOOL_PASSED", nullptr);
  const std::string head = "# HELP t_total a\n# TYPE t_total counter\n";
  const std::string ran = "";  // promtool's output when it ran and passed
  const std::string memo = "the same form passed promtool check metrics before";
  std::string out;
  EXPECT_TRUE(testing::PromtoolCheck(head + "t_total{pid=\"1\"} 5\n", &out)) << out;
  EXPECT_EQ(out, ran);
  // Another value, another pid: the same form.
  EXPECT_TRUE(testing::PromtoolCheck(head + "t_total{pid=\"1\"} 7\n", &out)) << out;
  EXPECT_EQ(out, memo);
  EXPECT_TRUE(testing::PromtoolCheck(head + "t_total{pid=\"23058\"} 7\n", &out)) << out;
  EXPECT_EQ(out, memo);
  // Not a float: checked each time, never remembered.
  EXPECT_FALSE(testing::PromtoolCheck(head + "t_total{pid=\"1\"} 7e\n", &out));
  EXPECT_NE(out.find("expected float"), std::string::npos) << out;
  EXPECT_FALSE(testing::PromtoolCheck(head + "t_total{pid=\"1\"} 8e\n", &out));
  // Another label: another form.
  EXPECT_TRUE(testing::PromtoolCheck(head + "t_total{pid=\"1\",app=\"a\"} 7\n", &out)) << out;
  EXPECT_EQ(out, ran);
  // Two series of two pids: the same form as two others, never as one pid named twice.
  EXPECT_TRUE(testing::PromtoolCheck(head + "t_total{pid=\"1\"} 1\nt_total{pid=\"2\"} 1\n", &out))
      << out;
  EXPECT_EQ(out, ran);
  EXPECT_TRUE(testing::PromtoolCheck(head + "t_total{pid=\"30\"} 1\nt_total{pid=\"4\"} 1\n", &out))
      << out;
  EXPECT_EQ(out, memo);
  testing::PromtoolCheck(head + "t_total{pid=\"5\"} 1\nt_total{pid=\"5\"} 1\n", &out);
  EXPECT_NE(out, memo);
  // A histogram's bounds are numbers promtool reads: kept as they are.
  const std::string histogram =
      "# HELP h_seconds a\n# TYPE h_seconds histogram\nh_seconds_bucket{le=\"0.5\"} 1\n"
      "h_seconds_bucket{le=\"+Inf\"} 1\nh_seconds_sum 1\nh_seconds_count 1\n";
  EXPECT_TRUE(testing::PromtoolCheck(histogram, &out)) << out;
  EXPECT_EQ(out, ran);
  std::string other_bound = histogram;
  other_bound.replace(other_bound.find("0.5"), 3, "0.25");
  EXPECT_TRUE(testing::PromtoolCheck(other_bound, &out)) << out;
  EXPECT_EQ(out, ran);
}

TEST(ExpositionTextTest, PromtoolTrustsOnlyTheSameFormPassedByAnotherProcessOfTheRun) {
  if (access("/usr/bin/promtool", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/promtool";
  char dir[] = "/tmp/pglock_passed_forms_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const ScopedEnv shared_forms("PGLOCK_PROMTOOL_PASSED", dir);
  const std::string head = "# HELP s_total a\n# TYPE s_total counter\n";
  std::string out;
  // A failed check leaves nothing for the others.
  EXPECT_FALSE(CheckInAnotherProcess(head + "s_total{pid=\"1\"} 7e\n"));
  EXPECT_TRUE(PassedForms(dir).empty());
  // A form another process passed is not checked again here.
  EXPECT_TRUE(CheckInAnotherProcess(head + "s_total{pid=\"1\"} 5\n"));
  ASSERT_EQ(PassedForms(dir).size(), 1u);
  EXPECT_TRUE(testing::PromtoolCheck(head + "s_total{pid=\"1\"} 6\n", &out)) << out;
  EXPECT_EQ(out, "the same form passed promtool check metrics in another test of this run");
  // A file under a form's name holding another form (a shared hash) is no pass: promtool runs.
  EXPECT_TRUE(CheckInAnotherProcess(head + "s_total{app=\"a\"} 5\n"));
  ASSERT_EQ(PassedForms(dir).size(), 2u);
  for (const auto& f : PassedForms(dir)) {
    std::ifstream in(f);
    std::ostringstream form;
    form << in.rdbuf();
    if (form.str().find("app=") != std::string::npos) {
      std::ofstream(f, std::ios::trunc) << head << "s_total{app=\"b\"} 0\n";
    }
  }
  EXPECT_TRUE(testing::PromtoolCheck(head + "s_total{app=\"a\"} 6\n", &out)) << out;
  EXPECT_EQ(out, "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pglock
