#include "exporter/snapshot/poll_index.h"

namespace pglock {

PollIndex::PollIndex(const PollData& data) {
  if (data.database_stats) {
    for (const DatabaseStats& d : *data.database_stats) datnames_[d.datid] = d.datname;
  }
  for (const Session& s : data.sessions) {
    by_pid_[s.pid] = &s;
    if (!s.datname.empty()) datnames_[s.datid] = s.datname;
  }
}

const Session* PollIndex::Find(int pid) const {
  const auto it = by_pid_.find(pid);
  return it == by_pid_.end() ? nullptr : it->second;
}

std::string PollIndex::Datname(uint32_t datid) const {
  const auto it = datnames_.find(datid);
  return it == datnames_.end() ? std::to_string(datid) : it->second;
}

Identity IdentityOf(const Session* s, int pid) {
  if (s == nullptr) return Identity{pid, "", "", "", "", ""};
  return {pid, s->application_name, s->client_addr, s->usename, s->state, s->query};
}

}  // namespace pglock
