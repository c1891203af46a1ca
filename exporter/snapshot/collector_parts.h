// The parts of a poll's data or view that one collector alone fills and reads, kept by their C++
// type: a collector that adds a signal declares its part's type in its own files and stores it
// here, instead of adding a field to PollData or TargetView that every other unit compiles
// against. Only what other units read (the sessions, the locks, the counters the event judgement
// uses, what the on-call page shows) stays a named field.
// Thread-compatible: filled by the thread that builds the PollData or TargetView; read-only once
// published. Copies share the parts and clone one only when it is written (Mutable()), so a copy
// never changes what another copy sees.
#pragma once

#include <map>
#include <memory>

namespace pglock {

class CollectorParts {
 public:
  // The part of type T; null when no collector stored one.
  template <typename T>
  const T* Find() const {
    const auto it = parts_.find(Key<T>());
    return it == parts_.end() ? nullptr : static_cast<const T*>(it->second.get());
  }
  // The part of type T, made empty on first use, to fill while building.
  template <typename T>
  T* Mutable() {
    std::shared_ptr<void>& part = parts_[Key<T>()];
    if (part == nullptr) {
      part = std::make_shared<T>();
    } else if (part.use_count() > 1) {
      part = std::make_shared<T>(*static_cast<const T*>(part.get()));
    }
    return static_cast<T*>(part.get());
  }

 private:
  // One address per type, the same in every translation unit (an inline template's static).
  template <typename T>
  static const void* Key() {
    static const char tag = 0;
    return &tag;
  }

  std::map<const void*, std::shared_ptr<void>> parts_;
};

}  // namespace pglock
