// Where the tests find the checkout (scripts, docs, npm helpers) and the exporter binary this
// build made. Only tests/support/build_paths.cc is compiled with those paths, so that no other
// test source's command line names the checkout: a fresh clone in another folder finds every
// other test object in the compiler cache (scripts/build.sh runs ccache in depend mode, which
// hashes the command line).
#pragma once

#include <string>

namespace pglock::testing {

// The checkout's root (CMAKE_SOURCE_DIR).
const std::string& SourceDir();
// The pglock_exporter this build made; tests take $PGLOCK_EXPORTER_BINARY first.
const std::string& ExporterBinaryDefault();

}  // namespace pglock::testing
