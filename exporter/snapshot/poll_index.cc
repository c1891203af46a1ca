#include "exporter/snapshot/poll_index.h"

#include <algorithm>
#include <iterator>
#include <memory>

namespace pglock {

namespace {

// Sorts `entries` by key and keeps the last given of each key (std::sort: stable_sort would
// allocate a buffer of its own).
template <typename Entry>
void KeepLastOfEachKey(std::vector<Entry>* entries) {
  std::sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.order < b.order;
  });
  auto out = entries->begin();
  for (auto it = entries->begin(); it != entries->end(); ++it) {
    if (std::next(it) != entries->end() && std::next(it)->key == it->key) continue;
    *out++ = *it;
  }
  entries->erase(out, entries->end());
}

template <typename Entry, typename Key>
const Entry* FindKey(const std::vector<Entry>& entries, Key key) {
  const auto it = std::lower_bound(entries.begin(), entries.end(), key,
                                   [](const Entry& e, Key k) { return e.key < k; });
  return it != entries.end() && it->key == key ? &*it : nullptr;
}

}  // namespace

PollIndex::PollIndex(const PollData& data) {
  by_pid_.reserve(data.sessions.size());
  datnames_.reserve(data.sessions.size() + (data.database_stats ? data.database_stats->size() : 0));
  uint32_t order = 0;
  if (data.database_stats) {
    for (const DatabaseStats& d : *data.database_stats) {
      datnames_.push_back({d.datid, order++, &d.datname});
    }
  }
  for (const Session& s : data.sessions) {
    by_pid_.push_back({s.pid, order, &s});
    if (!s.datname.empty()) datnames_.push_back({s.datid, order, &s.datname});
    ++order;
  }
  KeepLastOfEachKey(&by_pid_);
  KeepLastOfEachKey(&datnames_);
}

void IndexPoll(PollData* data) { data->index.Set(std::make_shared<const PollIndex>(*data)); }

const PollIndex& IndexOf(const PollData& data, std::optional<PollIndex>* built) {
  if (const PollIndex* index = data.index.get()) return *index;
  return built->emplace(data);
}

const Session* PollIndex::Find(int pid) const {
  const auto* e = FindKey(by_pid_, pid);
  return e == nullptr ? nullptr : e->value;
}

std::string PollIndex::Datname(uint32_t datid) const {
  const auto* e = FindKey(datnames_, datid);
  return e == nullptr ? std::to_string(datid) : *e->value;
}

Identity IdentityOf(const Session* s, int pid) {
  if (s == nullptr) return Identity{pid, "", "", "", "", ""};
  return {pid, s->application_name, s->client_addr, s->usename, s->state, s->query};
}

}  // namespace pglock
