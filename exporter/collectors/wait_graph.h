// The waits of one poll as a graph, for the lock_waits collector (lock_waits.h): a node per waiting
// process (a parallel worker counts as its leader), a prepared transaction as a negative node,
// and edges from each waiter to the holders of what it waits for (pg_blocking_pids(), kept to the
// blockers not queued for the same object; else the waiters ahead). Answers the chain depth of a
// node, what is blocked through a root, and the cycles not broken yet. Built and read by one
// thread: Depth() caches its answers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/snapshot/poll_data.h"
#include "exporter/snapshot/poll_index.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock {

// A node of the wait graph: a process's pid (> 0), or a negative id for a prepared transaction.
using NodeId = int;

// What a waiting process asks for.
struct Request {
  std::string locktype;
  std::string mode;
  std::string relation;
  std::string locktag;
  std::string transactionid;
  uint32_t datid = 0;
  std::optional<double> waitstart;
  std::optional<AdvisoryKey> key;  // advisory requests
};

// A process that waits on a lock, and the graph node it counts as (a parallel worker counts as
// its leader: on-call acts on the leader's session).
struct WaitingProcess {
  int pid = 0;
  NodeId node = 0;
  const std::vector<int>* blocked_by = nullptr;
  std::string datname;
  std::optional<double> started;  // fallback for the wait's start on 12/13
};

// One waiting node.
struct Waiting {
  std::string datname;
  Request request;
  double seconds = 0;
  std::vector<NodeId> blockers;  // the holders of what it waits for, else the waiters ahead
};

// The waits of one poll as a graph. Borrows the PollData and PollIndex.
class WaitGraph {
 public:
  WaitGraph(const PollData& data, const PollIndex& index);

  const std::map<NodeId, Waiting>& waiting() const { return waiting_; }
  LockParticipant Participant(NodeId id) const;
  // The longest chain of waits from `id`: 0 when it waits for nothing. A cycle (a deadlock the
  // server has not broken yet) ends the chain where it closes.
  int64_t Depth(NodeId id);
  // Every waiting node that reaches `root` through edges, sorted.
  std::vector<NodeId> BlockedThrough(NodeId root) const;
  // The closed chains of waits (deadlocks not broken yet), each once, as its nodes in wait order.
  std::vector<std::vector<NodeId>> Cycles() const;
  const Session* Find(NodeId id) const { return id > 0 ? index_.Find(id) : nullptr; }

 private:
  LockParticipant Party(NodeId id) const;  // Participant() without the time in state
  std::optional<double> StateSince(NodeId id) const;
  std::vector<WaitingProcess> WaitingProcesses() const;
  void AddWait(const WaitingProcess& p, const Request& r,
               const std::unordered_map<NodeId, std::set<std::string>>& queued_for);
  NodeId PreparedBlocker(const Request& r, const std::string& datname);
  std::string DatnameOf(uint32_t datid) const { return datid == 0 ? "" : index_.Datname(datid); }
  int64_t Depth(NodeId id, std::set<NodeId>* path);

  const PollData& data_;
  const PollIndex& index_;
  std::unordered_map<int, const LockParty*> others_;  // background processes by pid
  std::vector<const LockParty*> prepared_;            // node -1 - i
  std::map<NodeId, std::string> unnamed_prepared_;    // node -> database
  std::map<NodeId, Waiting> waiting_;
  std::map<NodeId, int64_t> depth_;
};

}  // namespace pglock
