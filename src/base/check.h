// KILN_CHECK: kiln's internal invariants. A failure is a bug in kiln, not in the caller's
// use of it, and is reported with kiln's own file and line. It lives here rather than in the
// public error.h so that the public headers need nothing beyond the standard library
// (fmt formats the detail).
#pragma once

#include <string>

#include <fmt/format.h>

namespace kiln::detail {
[[noreturn]] void check_failed(const char* condition, const char* file, int line,
                               const std::string& detail);
}  // namespace kiln::detail

#define KILN_CHECK(condition, ...)                                                                 \
  do {                                                                                             \
    if (!(condition)) [[unlikely]]                                                                 \
      ::kiln::detail::check_failed(#condition, __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__)); \
  } while (0)
