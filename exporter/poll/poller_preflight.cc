// The poller's side of preflight requests (exporter/snapshot/preflight.h, docs/preflight.md): the
// table's relation locks read on the poll's own connection, right after a good poll, judged
// against that poll.
#include <spdlog/spdlog.h>

#include <optional>

#include "exporter/pg/batch.h"
#include "exporter/pg/columns.h"
#include "exporter/poll/poller.h"
#include "exporter/queries.h"

namespace pglock {

Status Poller::ReadPreflight(const PreflightRequest& request, SteadyClock::time_point deadline,
                             PreflightFacts* facts) {
  if (!conn_ || conn_->Broken()) return Status::ConnectionLost("no connection to the target");
  const std::string null = "NULL";
  const std::string waitstart =
      conn_->ServerVersionNum() >= 140000 ? "date_part('epoch', l.waitstart)" : "NULL::float8";
  StatementBatch batch;
  batch.Add(
      "preflight",
      FillTemplate(
          queries::kPreflight,
          {{"schema", request.parsed.schema ? conn_->QuoteLiteral(*request.parsed.schema) : null},
           {"name", conn_->QuoteLiteral(request.parsed.name)},
           {"role", request.role.empty() ? null : conn_->QuoteLiteral(request.role)},
           {"waitstart", waitstart}}));
  BatchResults results;
  if (Status s = batch.Run(*conn_, QueryTimeouts::ForPoll(poll_.timeout), deadline, &results);
      !s.ok()) {
    return s;
  }
  const PgResult& r = *results.Find("preflight");
  Columns c(r, "preflight");
  const int relid = c["relid"], relation = c["relation"], datid = c["datid"],
            datname = c["datname"], roleid = c["roleid"], pid = c["pid"], mode = c["mode"],
            granted = c["granted"], waited = c["waitstart"], gid = c["gid"],
            backend_type = c["backend_type"], state = c["state"], state_change = c["state_change"],
            activity_query = c["activity_query"];
  if (Status s = c.status(); !s.ok()) return s;
  for (int i = 0; i < r.Rows(); ++i) {
    facts->datid = static_cast<uint32_t>(r.Int(i, datid).value_or(0));
    facts->datname = r.String(i, datname);
    if (!r.IsNull(i, roleid)) facts->roleid = static_cast<uint32_t>(r.Int(i, roleid).value_or(0));
    if (r.IsNull(i, relid)) continue;
    facts->table_found = true;
    facts->relation = r.String(i, relation);
    if (r.IsNull(i, mode)) continue;
    RelationLock l;
    l.pid = r.IsNull(i, pid) ? 0 : static_cast<int>(r.Int(i, pid).value_or(0));
    l.mode = r.String(i, mode);
    l.granted = r.Bool(i, granted);
    if (!r.IsNull(i, waited)) l.waitstart = r.Double(i, waited);
    l.gid = r.String(i, gid);
    l.backend_type = r.String(i, backend_type);
    l.state = r.String(i, state);
    if (!r.IsNull(i, state_change)) l.state_change = r.Double(i, state_change);
    l.activity_query = r.String(i, activity_query);
    facts->locks.push_back(std::move(l));
  }
  return Status::Ok();
}

void Poller::AnswerPreflights(const PollData& data, const TargetView& view) {
  const auto tickets = preflight_->Take();
  if (tickets.empty()) return;
  std::optional<PollIndex> built;
  const PollIndex& index = IndexOf(data, &built);
  // One poll.timeout for all of them: a request never makes the next poll late by more.
  const auto deadline = SteadyClock::now() + poll_.timeout;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& ticket : tickets) {
    PreflightAnswer answer;
    PreflightFacts facts;
    const auto started = SteadyClock::now();
    if (Status s = ReadPreflight(ticket->request(), deadline, &facts); !s.ok()) {
      answer.status = 503;
      answer.error = "reading the table's locks: " + s.message();
    } else {
      answer = JudgePreflight(ticket->request(), facts, data, index, view);
    }
    answer.target = target_.name;
    answer.answered_at = now;
    spdlog::debug("target {}: preflight {} {}: {} in {:.1f} ms", target_.name,
                  ticket->request().table, ticket->request().mode,
                  answer.status == 200 ? answer.verdict : answer.error,
                  std::chrono::duration<double, std::milli>(SteadyClock::now() - started).count());
    ticket->Answer(std::move(answer));
  }
}

void Poller::RefusePreflights(const std::string& why) {
  for (const auto& ticket : preflight_->Take()) {
    PreflightAnswer answer;
    answer.status = 503;
    answer.target = target_.name;
    answer.error = why;
    ticket->Answer(std::move(answer));
  }
}

}  // namespace pglock
