// The generic walk over params fields: printing and hashing for every params struct.
#include "prims/params_walk.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <xxhash.h>

namespace kiln {
namespace {

std::string format_value(int64_t value) {
  return std::to_string(value);
}
std::string format_value(bool value) {
  return value ? "true" : "false";
}
std::string format_value(DType value) {
  return std::string(dtype_name(value));
}
std::string format_value(IndexMode value) {
  return std::string(index_mode_name(value));
}
std::string format_value(const Dims& value) {
  return fmt::format("({})", fmt::join(value, ","));
}
std::string format_value(const Shape& value) {
  return format_value(value.dims());
}
std::string format_value(const std::optional<DType>& value) {
  return value ? format_value(*value) : "none";
}

}  // namespace

std::string_view index_mode_name(IndexMode mode) {
  switch (mode) {
    case IndexMode::kError:
      return "error";
    case IndexMode::kClip:
      return "clip";
    case IndexMode::kFill:
      return "fill";
  }
  return "?";
}

std::string format_params(const Params& params) {
  return std::visit(
      [](const auto& p) {
        std::vector<std::string> parts;
        for_each_field(p, [&](std::string_view name, const auto& value) {
          parts.push_back(fmt::format("{}={}", name, format_value(value)));
        });
        return fmt::format("{}", fmt::join(parts, " "));
      },
      params);
}

uint64_t hash_params(const Params& params) {
  std::string text = fmt::format("{}:{}", params.index(), format_params(params));
  return XXH3_64bits(text.data(), text.size());
}

}  // namespace kiln
