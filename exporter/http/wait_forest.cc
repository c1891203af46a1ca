#include "exporter/http/wait_forest.h"

#include <map>
#include <set>
#include <utility>

namespace pglock {
namespace {

// How deep the forest is followed: a chain longer than this is cut (and a cycle is a deadlock,
// which PostgreSQL resolves within deadlock_timeout).
constexpr int kMaxForestDepth = 32;

using EdgesByBlocker = std::multimap<std::string, const LockWaitEdge*>;

// Hangs the waiters of `node` below it, and theirs below them; *shown collects every node placed.
void Grow(WaitNode* node, const EdgesByBlocker& by_blocker, std::set<std::string>* on_path,
          std::set<std::string>* shown, int depth) {
  if (depth >= kMaxForestDepth) return;
  const auto [begin, end] = by_blocker.equal_range(NodeKey(node->who));
  for (auto it = begin; it != end; ++it) {
    const LockWaitEdge& e = *it->second;
    const std::string key = NodeKey(e.waiter);
    if (on_path->count(key) != 0) continue;  // a cycle
    WaitNode child{e.waiter, e.locktype, e.mode, e.relation, e.lock, e.seconds, 0, {}};
    if (child.who.datname.empty()) child.who.datname = e.datname;
    shown->insert(key);
    on_path->insert(key);
    Grow(&child, by_blocker, on_path, shown, depth + 1);
    on_path->erase(key);
    node->waiters.push_back(std::move(child));
  }
}

}  // namespace

std::string NodeKey(const LockParticipant& p) {
  return p.id.pid != 0 ? std::to_string(p.id.pid) : "prepared:" + p.gid + ":" + p.datname;
}

std::vector<WaitNode> BuildWaitForest(const std::vector<LockWaitEdge>& edges,
                                      const std::vector<BlockingRoot>& roots) {
  EdgesByBlocker by_blocker;
  std::set<std::string> waiters;
  for (const LockWaitEdge& e : edges) {
    by_blocker.emplace(NodeKey(e.blocker), &e);
    waiters.insert(NodeKey(e.waiter));
  }
  std::map<std::string, const BlockingRoot*> known;
  for (const BlockingRoot& r : roots) known[NodeKey(r.root)] = &r;
  std::vector<WaitNode> forest;
  std::set<std::string> shown;
  const auto add_root = [&](const LockParticipant& who) {
    const std::string key = NodeKey(who);
    if (!shown.insert(key).second) return;
    WaitNode root{who, "", "", "", "", 0, 0, {}};
    if (const auto it = known.find(key); it != known.end()) {
      root.blocked = static_cast<int64_t>(it->second->blocked_pids.size());
      root.verdict = &it->second->verdict;
    }
    std::set<std::string> on_path = {key};
    Grow(&root, by_blocker, &on_path, &shown, 0);
    forest.push_back(std::move(root));
  };
  for (const LockWaitEdge& e : edges) {
    if (waiters.count(NodeKey(e.blocker)) == 0) add_root(e.blocker);
  }
  // What no root reaches waits in a cycle (a deadlock not broken yet): its first blocker met
  // stands for the root.
  for (const LockWaitEdge& e : edges) {
    if (shown.count(NodeKey(e.waiter)) == 0) add_root(e.blocker);
  }
  return forest;
}

}  // namespace pglock
