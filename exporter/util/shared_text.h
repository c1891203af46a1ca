// SharedText: an immutable string kept once per process however many values hold it. The event
// log keeps thousands of events whose strings repeat (the target, the database, the lock's name,
// a session's description, a holder): as std::string each costs 32 bytes and,
// past 15 characters, a heap block of its own in every event; as SharedText it costs a pointer,
// and the text is stored once while anything holds it.
//
// Thread-safety: SharedText values may be created, copied and destroyed from any thread. The
// texts live in one process-wide table under a mutex, taken when a text is made and when its last
// holder lets go; copies only change a count. The empty text takes neither.
#pragma once

#include <compare>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

namespace pglock {

class SharedText {
 public:
  SharedText() = default;
  SharedText(std::string_view text);  // NOLINT(google-explicit-constructor): a string's stand-in
  SharedText(const std::string& text) : SharedText(std::string_view(text)) {}  // NOLINT
  SharedText(const char* text) : SharedText(std::string_view(text)) {}         // NOLINT
  SharedText(const SharedText& other) noexcept;
  SharedText(SharedText&& other) noexcept : node_(other.node_) { other.node_ = nullptr; }
  SharedText& operator=(const SharedText& other) noexcept;
  SharedText& operator=(SharedText&& other) noexcept;
  ~SharedText();

  const std::string& str() const;
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  operator std::string_view() const { return str(); }    // NOLINT(google-explicit-constructor)
  bool empty() const { return node_ == nullptr; }
  size_t size() const { return str().size(); }
  const char* data() const { return str().data(); }
  const char* c_str() const { return str().c_str(); }

  // Two values of one text share their storage, so equality is a pointer's.
  friend bool operator==(const SharedText& a, const SharedText& b) { return a.node_ == b.node_; }
  friend bool operator==(const SharedText& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const SharedText& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const SharedText& a, const char* b) { return a.str() == b; }
  friend std::strong_ordering operator<=>(const SharedText& a, const SharedText& b) {
    return a.str() <=> b.str();
  }
  friend std::ostream& operator<<(std::ostream& os, const SharedText& t) { return os << t.str(); }

  // The distinct texts held now, process-wide (tests and benchmarks).
  static size_t Distinct();

  struct Node;

 private:
  Node* node_ = nullptr;  // null: the empty text
};

}  // namespace pglock
