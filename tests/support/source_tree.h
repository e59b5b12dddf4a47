// Where the checkout's files are, for tests that read its data files (fixtures, examples,
// docs) or run its scripts.
#pragma once

#include <filesystem>

namespace kiln::testing {

// The root of the source tree: $KILN_SOURCE_DIR if set, else the path CMake wrote beside
// the test binaries (tests/CMakeLists.txt). A runtime lookup rather than a compile-time
// define: a flag holding the checkout's absolute path would make every test object miss
// the compiler cache in any other clone (docs/development.md).
const std::filesystem::path& source_dir();

}  // namespace kiln::testing
