#include "tests/support/build_paths.h"

namespace pglock::testing {

const std::string& SourceDir() {
  static const std::string dir = PGLOCK_SOURCE_DIR;
  return dir;
}

const std::string& ExporterBinaryDefault() {
  static const std::string path = PGLOCK_EXPORTER_BINARY_DEFAULT;
  return path;
}

}  // namespace pglock::testing
