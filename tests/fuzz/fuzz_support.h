// What every fuzz target shares: the one outcome besides success that a parser may have is
// a kiln::Error with a message. Anything else (another exception type, an abort, a
// sanitizer report, a leak, memory beyond libFuzzer's -malloc_limit_mb) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "kiln/error.h"

namespace kiln::fuzz {

// Stops the run with a message libFuzzer shows beside the input that caused it.
[[noreturn]] inline void finding(std::string_view what) {
  std::fprintf(stderr, "fuzz finding: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

// Runs `parse`; a kiln::Error must carry a message, and is otherwise an accepted outcome.
// Returns whether `parse` succeeded.
template <typename Parse>
bool parses(Parse&& parse) {
  try {
    parse();
    return true;
  } catch (const Error& error) {
    if (error.message().empty()) finding("a kiln::Error without a message");
    return false;
  }
}

// A file under /dev/shm (memory, not disk) holding the input, for the readers whose entry
// point is a path: the target calls that same entry point, with every check it makes on
// a file, instead of an internal function that might skip some. One file per process,
// rewritten for each input.
class InputFile {
 public:
  explicit InputFile(std::string_view suffix)
      : path_(std::filesystem::path("/dev/shm") /
              ("kiln-fuzz-" + std::to_string(::getpid()) + std::string(suffix))) {}
  ~InputFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  const std::filesystem::path& write(const uint8_t* data, size_t size) {
    write_to(path_, data, size);
    return path_;
  }
  // For a target whose input must have a fixed name (a file inside a savepoint).
  static void write_to(const std::filesystem::path& path, const uint8_t* data, size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) finding("could not write the input file under /dev/shm");
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace kiln::fuzz
