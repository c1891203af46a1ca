// The configured names of advisory keys, as the keys pg_locks shows
// (exporter/poll/resolve_lock_names.h resolves them on the server). Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "exporter/snapshot/poll_data.h"

namespace pglock {

// (classid, objid, objsubid) -> name; the database is not part of a configured name.
using LockNames = std::map<std::tuple<uint32_t, uint32_t, int>, std::string>;

// Adds the key of a bigint lock (objsubid 1) or an int4 pair (objsubid 2).
void AddBigintName(int64_t key, const std::string& name, LockNames* names);
void AddPairName(int32_t key1, int32_t key2, const std::string& name, LockNames* names);

// The `lock` label: the configured name (names may be null), else the rendered key.
std::string LockLabel(const AdvisoryKey& key, const LockNames* names);
// The `lock` label of a counter: the configured name, else "unnamed" (counters are bounded by
// the configured names).
std::string CounterLockLabel(const AdvisoryKey& key, const LockNames* names);

}  // namespace pglock
