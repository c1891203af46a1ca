// The state file reader ([storage] path): no crash on any bytes, nothing half-read on an error,
// and every state it accepts encodes to bytes it reads back to the same encoding.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "exporter/storage/saved_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  pglock::SavedTarget state;
  if (!pglock::DecodeSavedTarget(bytes, &state).ok()) {
    if (state.inventory || !state.events.empty() || !state.target.empty()) std::abort();
    return 0;
  }
  const std::string once = pglock::EncodeSavedTarget(state);
  pglock::SavedTarget again;
  if (!pglock::DecodeSavedTarget(once, &again).ok()) std::abort();
  if (pglock::EncodeSavedTarget(again) != once) std::abort();
  return 0;
}
