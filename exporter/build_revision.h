// The git revision the binary was built from (cmake/revision.cmake, refreshed at every build);
// "unknown" outside a git checkout.
#pragma once

namespace pglock {

extern const char* const kBuildRevision;

}  // namespace pglock
