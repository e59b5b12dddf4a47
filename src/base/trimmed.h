// Text without its leading and trailing blanks (spaces and tabs), for values read from
// /proc files and tool output.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

inline std::string trimmed(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

}  // namespace kiln
