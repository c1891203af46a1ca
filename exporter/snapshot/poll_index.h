// Look-ups over one poll: a session by pid, and the one datid -> datname mapping
// (pg_stat_database first, then the sessions' own datname; a datid nobody names is rendered as its
// number). Built once a poll is complete (IndexPoll) and kept with it, so that the judges, the
// view, the timeline and the preflights of that poll and the next share it (IndexOf).
// Thread-compatible; borrows the PollData, which must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

class PollIndex {
 public:
  explicit PollIndex(const PollData& data);
  PollIndex(const PollIndex&) = delete;
  PollIndex& operator=(const PollIndex&) = delete;

  // nullptr when no client session has that pid.
  const Session* Find(int pid) const;
  std::string Datname(uint32_t datid) const;

 private:
  // Sorted by key, one entry per key (the last given wins): two allocations an index whatever
  // the number of sessions, and a poll builds several.
  template <typename Key, typename Value>
  struct Entry {
    Key key;
    uint32_t order;  // as given
    Value value;
  };
  std::vector<Entry<int, const Session*>> by_pid_;
  std::vector<Entry<uint32_t, const std::string*>> datnames_;
};

// Indexes `data`, which no longer changes its sessions or databases, into data->index.
void IndexPoll(PollData* data);

// `data`'s own index when IndexPoll made one; else one built into `*built` (a poll a test made).
const PollIndex& IndexOf(const PollData& data, std::optional<PollIndex>* built);

// The identity of the session `s` (null: only the pid is known) as the view and events show it.
Identity IdentityOf(const Session* s, int pid);

}  // namespace pglock
