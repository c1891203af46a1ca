// pglock_session_verdict_info: the verdict on a session an alert names, with the words the alert
// descriptions print (its advice label) taken from VerdictAdvice, the function /locks prints.
#include "exporter/collectors/verdict_series.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "exporter/metrics/labels.h"
#include "exporter/snapshot/verdict.h"
#include "tests/support/metrics_text.h"

namespace pglock {
namespace {

// The labels of the one series AddVerdictSeries adds, by name.
std::map<std::string, std::string> SeriesLabels(VerdictSubject subject, const Verdict& v) {
  Families f;
  AddVerdictSeries("main", subject, "app", v.pid, v, &f);
  const auto families = testing::ParseFamilies(f.Text());
  std::map<std::string, std::string> labels;
  if (families.size() != 1 || families[0].metric.size() != 1) return labels;
  EXPECT_EQ(families[0].name, "pglock_session_verdict_info");
  for (const auto& l : families[0].metric[0].label) labels[l.name] = l.value;
  return labels;
}

TEST(VerdictSeries, AdviceIsTheVerdictsWordsBesideItsCommand) {
  RootFacts pooled;
  pooled.root.id = {6569, "web", "10.0.2.10", "app", "idle in transaction", ""};
  pooled.pooled = PooledConnection{"pgbouncer-main", "app", "app", "web@10.0.2.10", "web@x"};
  RootFacts idle;
  idle.root.id = {4242, "worker", "10.0.3.7", "jobs", "idle in transaction", ""};
  idle.root.backend_type = "client backend";
  idle.xact_seconds = 300;
  for (const Verdict& v : {DecideVerdict(pooled), DecideVerdict(idle)}) {
    const auto labels = SeriesLabels(VerdictSubject::kBlockingRoot, v);
    ASSERT_EQ(labels.size(), 9u) << v.command;
    EXPECT_EQ(labels.at("advice"), VerdictAdvice(v));
    EXPECT_EQ(labels.at("command"), v.command);
    EXPECT_EQ(labels.at("then_command"), v.then_command);
    EXPECT_EQ(labels.at("action"), VerdictActionName(v.action));
    EXPECT_EQ(labels.at("pid"), std::to_string(v.pid));
    EXPECT_EQ(labels.at("seen_as"), "blocking_root");
  }
  EXPECT_EQ(SeriesLabels(VerdictSubject::kBlockingRoot, DecideVerdict(idle)).at("advice"),
            "SELECT pg_terminate_backend(4242)");
}

// A pooled connection's advice names its database twice and its pooler once: with names of 30
// characters it still fits a label value whole (no truncation marker).
TEST(VerdictSeries, PooledAdviceWithLongNamesFitsALabelValue) {
  const std::string name(30, 'n');
  IdleHolder h;
  h.holder = {77, "web", "10.0.2.10", "app", "idle in transaction", ""};
  PoolerView pooler;
  pooler.name = name;
  PooledLockRow row;
  row.pid = 77;
  row.database = name;
  row.user = "app";
  pooler.locks.push_back(row);
  const Verdict v = IdleHolderVerdict(h, {pooler});
  ASSERT_EQ(v.action, VerdictAction::kPoolerReconnect);
  EXPECT_LE(VerdictAdvice(v).size(), kMaxLabelValueBytes);
  const auto labels = SeriesLabels(VerdictSubject::kIdleInTransactionHolder, v);
  EXPECT_EQ(labels.at("advice"), VerdictAdvice(v));
  EXPECT_EQ(labels.at("advice").find(kTruncatedMarker), std::string::npos);
}

}  // namespace
}  // namespace pglock
