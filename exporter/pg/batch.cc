#include "exporter/pg/batch.h"

#include <algorithm>

#include "exporter/queries.h"

namespace pglock {

std::string FillTemplate(std::string_view sql,
                         const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  out.reserve(sql.size() + 64);
  for (size_t i = 0; i < sql.size();) {
    bool replaced = false;
    if (sql[i] == '{') {
      for (const auto& [key, value] : values) {
        if (sql.size() - i >= key.size() + 2 && sql.compare(i + 1, key.size(), key) == 0 &&
            sql[i + 1 + key.size()] == '}') {
          out += value;
          i += key.size() + 2;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += sql[i++];
  }
  return out;
}

QueryTimeouts QueryTimeouts::ForPoll(std::chrono::milliseconds poll_timeout) {
  const int ms = static_cast<int>(std::min<int64_t>(poll_timeout.count(), INT32_MAX));
  return {std::max(ms, 1), std::clamp(ms / 4, 1, 500)};
}

const PgResult* BatchResults::Find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &results_[it->second];
}

Status PrepareStatements(PgConnection& conn, const std::vector<PreparedStatement>& statements,
                         SteadyClock::time_point deadline) {
  if (statements.empty()) return Status::Ok();
  // A session-mode pooler without a reset query can hand back a server session that has them.
  std::string sql = "DEALLOCATE ALL;\n";
  for (const PreparedStatement& p : statements) sql += "PREPARE " + p.name + " AS " + p.sql + ";\n";
  std::vector<PgResult> ignored;
  return conn.Exec(sql, {}, deadline, &ignored).WithContext("preparing statements");
}

void StatementBatch::Add(std::string name, std::string sql, Phase phase) {
  auto& list = phase == Phase::kBeforeTimeouts ? before_ : phase == Phase::kMain ? main_ : after_;
  list.emplace_back(std::move(name), std::move(sql));
}

void StatementBatch::AddExecute(std::string name, const std::string& prepared_name, Phase phase,
                                const std::string& args) {
  Add(std::move(name), "EXECUTE " + prepared_name + (args.empty() ? "" : "(" + args + ")"), phase);
}

std::vector<std::pair<std::string, std::string>> StatementBatch::Statements() const {
  auto out = before_;
  out.insert(out.end(), main_.begin(), main_.end());
  out.insert(out.end(), after_.begin(), after_.end());
  return out;
}

Status StatementBatch::Run(PgConnection& conn, const QueryTimeouts& timeouts,
                           SteadyClock::time_point deadline, BatchResults* out) const {
  static constexpr char kTimeouts[] = "\x01timeouts";  // cannot clash with a collector's name
  std::vector<const std::pair<std::string, std::string>*> order;
  for (const auto& s : before_) order.push_back(&s);
  const std::pair<std::string, std::string> set_timeouts{
      kTimeouts,
      FillTemplate(queries::kPollTimeouts, {{"statement_ms", std::to_string(timeouts.statement_ms)},
                                            {"lock_ms", std::to_string(timeouts.lock_ms)}})};
  order.push_back(&set_timeouts);
  for (const auto& s : main_) order.push_back(&s);
  for (const auto& s : after_) order.push_back(&s);

  std::string sql;
  for (const auto* s : order) {
    sql += s->second;
    sql += ";\n";
  }
  out->results_.clear();
  out->index_.clear();
  if (Status s = conn.Exec(sql, {}, deadline, &out->results_); !s.ok()) {
    if (s.sqlstate() == kUnknownPreparedStatement) {
      return s.WithContext(
          "the session lost the exporter's prepared statements (DISCARD ALL or DEALLOCATE, e.g. "
          "by a pooler between the exporter and PostgreSQL); reconnecting");
    }
    return s;
  }
  if (out->results_.size() != order.size()) {
    return Status::UnexpectedShape("batch: expected " + std::to_string(order.size()) +
                                   " results, got " + std::to_string(out->results_.size()));
  }
  for (size_t i = 0; i < order.size(); ++i) out->index_.emplace(order[i]->first, i);
  return Status::Ok();
}

}  // namespace pglock
