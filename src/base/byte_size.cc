#include "base/byte_size.h"

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "base/trimmed.h"

namespace kiln {

std::optional<int64_t> parse_byte_size(std::string_view text) {
  std::string spec = trimmed(text);
  size_t digits = 0;
  while (digits < spec.size() &&
         ((spec[digits] >= '0' && spec[digits] <= '9') || spec[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  std::string_view number(spec.data(), digits);
  std::string unit = trimmed(std::string_view(spec).substr(digits));
  static constexpr std::array<std::pair<std::string_view, double>, 10> kUnits{{
      {"B", 1.0},
      {"kB", 1e3},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
  }};
  double scale = 0;
  if (unit.empty()) {
    scale = 1;
  } else {
    for (const auto& [name, factor] : kUnits) {
      if (unit == name) scale = factor;
    }
  }
  if (scale == 0) return std::nullopt;
  // A whole number of bytes without a unit; a fraction only of a larger unit.
  bool fraction = number.find('.') != std::string_view::npos;
  if (fraction && scale == 1) return std::nullopt;
  double value = 0;
  auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (error != std::errc() || end != number.data() + number.size()) return std::nullopt;
  double bytes = std::floor(value * scale);
  if (!(bytes < 9.2e18)) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

std::string format_byte_size(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr std::array<std::string_view, 5> kNames{"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < kNames.size()) {
    value /= 1024;
    ++unit;
  }
  int decimals = value < 10 ? 2 : value < 100 ? 1 : 0;
  return fmt::format("{:.{}f} {}", value, decimals, kNames[unit]);
}

}  // namespace kiln
