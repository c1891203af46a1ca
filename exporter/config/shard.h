// Shards: several exporters share one config's targets, each polling its own part (a StatefulSet
// of N pods with one ConfigMap). A target belongs to shard ShardOf(name, total): the jump
// consistent hash (Lamping and Veach, 2014) of the FNV-1a 64-bit hash of the target's name (its
// UTF-8 bytes). It depends on the name and the total only, so every pod computes the same answer,
// a reload that keeps a target keeps its shard, and going from N to N+1 shards moves about one
// target in N+1 (to the new shard), none between the old ones. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pglock {

// The largest shard.total accepted.
inline constexpr int kMaxShards = 1000;

// FNV-1a, 64 bits, of the bytes of `text`.
uint64_t Fnv1a64(std::string_view text);

// The bucket in [0, buckets) of `key` by the jump consistent hash; buckets >= 1.
int JumpConsistentHash(uint64_t key, int buckets);

// The shard in [0, total) that polls the target named `target`; total >= 1.
int ShardOf(std::string_view target, int total);

// The ordinal in a StatefulSet pod's name: the number after the last '-' ("pglock-exporter-2"
// -> 2). nullopt and *why when the name does not end in -<digits> (or the number is too large).
std::optional<int> OrdinalFromHostName(std::string_view host, std::string* why);

// This machine's host name (a pod's name on Kubernetes); "" when it cannot be read.
std::string HostName();

}  // namespace pglock
