#include "exporter/util/shared_text.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <unordered_set>

#include "exporter/util/thread_annotations.h"

namespace pglock {

struct SharedText::Node {
  explicit Node(std::string_view t) : text(t) {}
  // Holders of this text. It reaches zero only under the table's mutex (Release), so a text is
  // never found in the table after its last holder has let it go.
  std::atomic<uint32_t> holders{1};
  const std::string text;
};

namespace {

struct NodeHash {
  using is_transparent = void;
  size_t operator()(std::string_view t) const { return std::hash<std::string_view>()(t); }
  size_t operator()(const SharedText::Node* n) const { return (*this)(n->text); }
};

struct NodeEqual {
  using is_transparent = void;
  static std::string_view Of(std::string_view t) { return t; }
  static std::string_view Of(const SharedText::Node* n) { return n->text; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return Of(a) == Of(b);
  }
};

struct Table {
  Mutex mu;
  std::unordered_set<SharedText::Node*, NodeHash, NodeEqual> nodes GUARDED_BY(mu);
};

// Never destroyed: texts may be let go by static objects' destructors at exit.
Table& TheTable() {
  static Table* table = new Table;
  return *table;
}

void Hold(SharedText::Node* n) {
  if (n != nullptr) n->holders.fetch_add(1, std::memory_order_relaxed);
}

// One holder fewer. The count goes from one to zero only under the mutex, where no other thread
// can find the node to hold it again, so the node is removed and freed there.
void Release(SharedText::Node* n) {
  if (n == nullptr) return;
  uint32_t h = n->holders.load(std::memory_order_relaxed);
  while (h > 1) {
    if (n->holders.compare_exchange_weak(h, h - 1, std::memory_order_acq_rel)) return;
  }
  Table& t = TheTable();
  MutexLock lock(&t.mu);
  if (n->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    t.nodes.erase(n);
    delete n;
  }
}

}  // namespace

SharedText::SharedText(std::string_view text) {
  if (text.empty()) return;
  Table& t = TheTable();
  MutexLock lock(&t.mu);
  auto it = t.nodes.find(text);
  if (it != t.nodes.end()) {
    node_ = *it;
    Hold(node_);
    return;
  }
  node_ = new Node(text);
  t.nodes.insert(node_);
}

SharedText::SharedText(const SharedText& other) noexcept : node_(other.node_) { Hold(node_); }

SharedText& SharedText::operator=(const SharedText& other) noexcept {
  if (node_ != other.node_) {
    Hold(other.node_);
    Release(node_);
    node_ = other.node_;
  }
  return *this;
}

SharedText& SharedText::operator=(SharedText&& other) noexcept {
  if (this != &other) {
    Release(node_);
    node_ = other.node_;
    other.node_ = nullptr;
  }
  return *this;
}

SharedText::~SharedText() { Release(node_); }

const std::string& SharedText::str() const {
  static const std::string* const empty = new std::string;
  return node_ == nullptr ? *empty : node_->text;
}

size_t SharedText::Distinct() {
  Table& t = TheTable();
  MutexLock lock(&t.mu);
  return t.nodes.size();
}

}  // namespace pglock
