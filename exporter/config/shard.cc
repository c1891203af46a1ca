#include "exporter/config/shard.h"

#include <unistd.h>

#include <climits>

namespace pglock {

uint64_t Fnv1a64(std::string_view text) {
  uint64_t hash = 14695981039346656037ULL;  // the offset basis
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;  // the 64-bit FNV prime
  }
  return hash;
}

int JumpConsistentHash(uint64_t key, int buckets) {
  // Follows the key through bucket counts 1, 2, ... : at each jump the key moves to the new
  // bucket with probability 1/n, which the linear congruential step below draws.
  int64_t bucket = -1;
  int64_t next = 0;
  while (next < buckets) {
    bucket = next;
    key = key * 2862933555777941757ULL + 1;
    next = static_cast<int64_t>(
        static_cast<double>(bucket + 1) *
        (static_cast<double>(1LL << 31) / static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<int>(bucket);
}

int ShardOf(std::string_view target, int total) {
  return total <= 1 ? 0 : JumpConsistentHash(Fnv1a64(target), total);
}

std::optional<int> OrdinalFromHostName(std::string_view host, std::string* why) {
  const size_t dash = host.rfind('-');
  const std::string_view digits = dash == std::string_view::npos ? "" : host.substr(dash + 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    *why = "host name \"" + std::string(host) +
           "\" does not end in -<number> (a StatefulSet pod's name does, e.g. pglock-exporter-2)";
    return std::nullopt;
  }
  if (digits.size() > 6) {
    *why = "host name \"" + std::string(host) + "\" ends in a number too large for a shard";
    return std::nullopt;
  }
  return std::stoi(std::string(digits));
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace pglock
