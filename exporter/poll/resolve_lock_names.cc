#include "exporter/poll/resolve_lock_names.h"

#include "exporter/queries.h"

namespace pglock {
namespace {

// Evaluates one configured key expression as `type` (bigint or int4). A failed statement is the
// expression's problem (appended to *problems, *key unset); a lost connection is the Status.
Status EvalKey(PgConnection& conn, const LockNameConfig& lock, const std::string& key_name,
               const std::string& expression, const char* type, const QueryTimeouts& timeouts,
               SteadyClock::time_point deadline, std::optional<int64_t>* key,
               std::vector<std::string>* problems) {
  key->reset();
  StatementBatch batch;
  batch.Add("lock_name_expression", FillTemplate(queries::kLockNameExpression,
                                                 {{"expression", expression}, {"type", type}}));
  BatchResults results;
  const Status s = batch.Run(conn, timeouts, deadline, &results);
  if (!s.ok()) {
    if (conn.Broken()) return s.WithContext("resolving lock \"" + lock.name + "\"");
    problems->push_back(lock.Problem(key_name, "lock \"" + lock.name + "\": " + s.message()));
    return Status::Ok();
  }
  const PgResult& r = *results.Find("lock_name_expression");
  if (r.Rows() != 1 || r.IsNull(0, 0)) {
    problems->push_back(
        lock.Problem(key_name, "lock \"" + lock.name + "\": the expression is NULL"));
    return Status::Ok();
  }
  *key = r.Int(0, 0);
  return Status::Ok();
}

}  // namespace

Status ResolveLockNames(PgConnection& conn, const std::vector<LockNameConfig>& locks,
                        const QueryTimeouts& timeouts, SteadyClock::time_point deadline,
                        LockNames* names, std::vector<std::string>* problems) {
  names->clear();
  for (const LockNameConfig& lock : locks) {
    std::optional<PgResult> r;
    std::optional<int64_t> k1, k2;
    switch (lock.kind) {
      case LockNameConfig::Kind::kBigint:
        AddBigintName(lock.key, lock.name, names);
        break;
      case LockNameConfig::Kind::kPair:
        AddPairName(lock.key1, lock.key2, lock.name, names);
        break;
      case LockNameConfig::Kind::kBigintText:
        if (Status s = conn.ExecOne(queries::kLockNameBigint, {lock.key_text}, deadline, &r);
            !s.ok()) {
          return s.WithContext("resolving lock \"" + lock.name + "\"");
        }
        AddBigintName(r->Int(0, 0).value_or(0), lock.name, names);
        break;
      case LockNameConfig::Kind::kPairText:
        if (Status s = conn.ExecOne(queries::kLockNameInt4, {lock.key2_text}, deadline, &r);
            !s.ok()) {
          return s.WithContext("resolving lock \"" + lock.name + "\"");
        }
        AddPairName(lock.key1, static_cast<int32_t>(r->Int(0, 0).value_or(0)), lock.name, names);
        break;
      case LockNameConfig::Kind::kBigintSql:
        if (Status s = EvalKey(conn, lock, "key_sql", lock.key_sql, "bigint", timeouts, deadline,
                               &k1, problems);
            !s.ok()) {
          return s;
        }
        if (k1) AddBigintName(*k1, lock.name, names);
        break;
      case LockNameConfig::Kind::kPairSql:
        for (auto [key_name, expression, out] :
             {std::tuple{"key1_sql", &lock.key1_sql, &k1}, {"key2_sql", &lock.key2_sql, &k2}}) {
          if (Status s = EvalKey(conn, lock, key_name, *expression, "int4", timeouts, deadline, out,
                                 problems);
              !s.ok()) {
            return s;
          }
        }
        if (k1 && k2) {
          AddPairName(static_cast<int32_t>(*k1), static_cast<int32_t>(*k2), lock.name, names);
        }
        break;
    }
  }
  return Status::Ok();
}

}  // namespace pglock
