#include "exporter/collectors/lock_names.h"

#include "exporter/queries.h"

namespace pglock {

void AddBigintName(int64_t key, const std::string& name, LockNames* names) {
  const auto u = static_cast<uint64_t>(key);
  (*names)[{static_cast<uint32_t>(u >> 32), static_cast<uint32_t>(u & 0xffffffffu), 1}] = name;
}

void AddPairName(int32_t key1, int32_t key2, const std::string& name, LockNames* names) {
  (*names)[{static_cast<uint32_t>(key1), static_cast<uint32_t>(key2), 2}] = name;
}

Status ResolveLockNames(PgConnection& conn, const std::vector<LockNameConfig>& locks,
                        SteadyClock::time_point deadline, LockNames* names) {
  names->clear();
  for (const LockNameConfig& lock : locks) {
    std::optional<PgResult> r;
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
    }
  }
  return Status::Ok();
}

}  // namespace pglock
