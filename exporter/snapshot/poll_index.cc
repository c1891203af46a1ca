#include "exporter/snapshot/poll_index.h"

#include <algorithm>
#include <iterator>

namespace pglock {

namespace {

// Sorts `entries` by key and keeps the last given of each key.
template <typename Key, typename Value>
void KeepLastOfEachKey(std::vector<std::pair<Key, Value>>* entries) {
  std::stable_sort(entries->begin(), entries->end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  auto out = entries->begin();
  for (auto it = entries->begin(); it != entries->end(); ++it) {
    if (std::next(it) != entries->end() && std::next(it)->first == it->first) continue;
    *out++ = *it;
  }
  entries->erase(out, entries->end());
}

template <typename Key, typename Value>
const Value* FindKey(const std::vector<std::pair<Key, Value>>& entries, Key key) {
  const auto it = std::lower_bound(entries.begin(), entries.end(), key,
                                   [](const auto& e, Key k) { return e.first < k; });
  return it != entries.end() && it->first == key ? &it->second : nullptr;
}

}  // namespace

PollIndex::PollIndex(const PollData& data) {
  by_pid_.reserve(data.sessions.size());
  datnames_.reserve(data.sessions.size() + (data.database_stats ? data.database_stats->size() : 0));
  if (data.database_stats) {
    for (const DatabaseStats& d : *data.database_stats) datnames_.emplace_back(d.datid, &d.datname);
  }
  for (const Session& s : data.sessions) {
    by_pid_.emplace_back(s.pid, &s);
    if (!s.datname.empty()) datnames_.emplace_back(s.datid, &s.datname);
  }
  KeepLastOfEachKey(&by_pid_);
  KeepLastOfEachKey(&datnames_);
}

const Session* PollIndex::Find(int pid) const {
  const Session* const* s = FindKey(by_pid_, pid);
  return s == nullptr ? nullptr : *s;
}

std::string PollIndex::Datname(uint32_t datid) const {
  const std::string* const* name = FindKey(datnames_, datid);
  return name == nullptr ? std::to_string(datid) : **name;
}

Identity IdentityOf(const Session* s, int pid) {
  if (s == nullptr) return Identity{pid, "", "", "", "", ""};
  return {pid, s->application_name, s->client_addr, s->usename, s->state, s->query};
}

}  // namespace pglock
