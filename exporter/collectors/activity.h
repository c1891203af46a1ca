// Client sessions (queries/activity.sql over pg_stat_activity): who is connected, in which state,
// idle in transaction for how long, and which of those hold an advisory lock or block someone and
// how long before idle_in_transaction_session_timeout ends them (and drops their session locks).
// Also the clients whose every session sits on a lock (pool starvation) and the sessions
// the exporter's role cannot see. Stateless; thread-safe.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/collectors/collector.h"

namespace pglock {

struct ClientKey {
  std::string datname;
  std::string application_name;
  std::string client_addr;
  std::string usename;
  auto Tie() const { return std::tie(datname, application_name, client_addr, usename); }
  bool operator<(const ClientKey& o) const { return Tie() < o.Tie(); }
};

struct ClientRow {
  ClientKey key;
  std::map<std::string, int> sessions_by_state;
  int total = 0;
  int idle_lock_holders = 0;
};

// This collector's part of the view (TargetView::parts): the top_n clients, those with idle lock
// holders first.
struct ClientSessions {
  std::vector<ClientRow> rows;
};

class ActivityCollector : public Collector {
 public:
  const char* name() const override { return "activity"; }
  std::vector<PreparedStatement> Prepared(int server_version_num) const override;
  void Plan(const PollPlan& plan, StatementBatch* batch) const override;
  Status Parse(const PollPlan& plan, const BatchResults& results, PollData* data) const override;
  void BuildView(const PollData& data, const ViewContext& ctx, TargetView* view) const override;
  void ExposeView(const TargetSnapshot& snap, const TargetView& view, Families* out) const override;
};

}  // namespace pglock
