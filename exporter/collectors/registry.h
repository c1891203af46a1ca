// The explicit list of collectors, in the order they plan, parse, collect and expose. Adding a
// collector is one line in registry.cc. Thread-safe (immutable after first use).
#pragma once

#include <vector>

#include "exporter/collectors/collector.h"

namespace pglock {

const std::vector<const Collector*>& Collectors();

}  // namespace pglock
