#include "support/source_tree.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace kiln::testing {
namespace {

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "kiln tests: cannot find the source tree: %s\n", why.c_str());
  std::abort();
}

std::filesystem::path find_source_dir() {
  if (const char* set = std::getenv("KILN_SOURCE_DIR"); set != nullptr && *set != '\0') {
    return set;
  }
  std::error_code error;
  std::filesystem::path binary = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) fail("cannot read /proc/self/exe (" + error.message() + "); set KILN_SOURCE_DIR");
  std::filesystem::path note = binary.parent_path() / "kiln_source_dir.txt";
  std::ifstream in(note);
  std::string root;
  if (!std::getline(in, root) || root.empty()) {
    fail(note.string() +
         " is missing or empty (configure the build with CMake, or set KILN_SOURCE_DIR)");
  }
  if (!std::filesystem::is_directory(root)) {
    fail(note.string() + " names " + root + ", which is not a directory");
  }
  return root;
}

}  // namespace

const std::filesystem::path& source_dir() {
  static const std::filesystem::path root = find_source_dir();
  return root;
}

}  // namespace kiln::testing
