// The parts of a poll's data or view that one collector alone fills and reads, kept by their C++
// type: a collector that adds a signal declares its part's type in its own files and stores it
// here, instead of adding a field to PollData or TargetView that every other unit compiles
// against. Only what other units read (the sessions, the locks, the counters the event judgement
// uses, what the on-call page shows) stays a named field.
// A part of a poll's data that only inventory polls read (its type declares
// `static constexpr bool kReadAtInventory = true;`) is carried to the tiered polls after it
// (InventoryTier::Complete, CarryInventoryParts()), without the tier knowing its type.
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
    return it == parts_.end() ? nullptr : static_cast<const T*>(it->second.part.get());
  }
  // The part of type T, made empty on first use, to fill while building.
  template <typename T>
  T* Mutable() {
    Part& entry = parts_[Key<T>()];
    std::shared_ptr<void>& part = entry.part;
    if (part == nullptr) {
      part = std::make_shared<T>();
    } else if (part.use_count() > 1) {
      part = std::make_shared<T>(*static_cast<const T*>(part.get()));
    }
    if constexpr (requires { T::kReadAtInventory; }) entry.read_at_inventory = T::kReadAtInventory;
    return static_cast<T*>(part.get());
  }

  // Shares the parts `inventory` read at its inventory (kReadAtInventory), replacing this one's.
  void CarryInventoryParts(const CollectorParts& inventory) {
    for (const auto& [key, entry] : inventory.parts_) {
      if (entry.read_at_inventory) parts_[key] = entry;
    }
  }

 private:
  struct Part {
    std::shared_ptr<void> part;
    bool read_at_inventory = false;
  };

  // One address per type, the same in every translation unit (an inline template's static).
  template <typename T>
  static const void* Key() {
    static const char tag = 0;
    return &tag;
  }

  std::map<const void*, Part> parts_;
};

}  // namespace pglock
