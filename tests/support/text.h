// Helpers for tests that look at text: printed programs, error messages, dumps.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::testing {

// How many times `word` occurs in `text` (occurrences may overlap).
inline int64_t count_of(std::string_view text, std::string_view word) {
  int64_t count = 0;
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace kiln::testing
