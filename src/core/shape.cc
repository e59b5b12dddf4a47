// Shape and AbstractValue helpers.
#include "kiln/shape.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/sharding_spec_checks.h"

namespace kiln {

// Saturates at INT64_MAX instead of overflowing (undefined behaviour): a shape that large
// is refused by the ops' size checks and by bind's byte-count check, but callers such as
// the initializers' fan computation read the count before those checks run.
int64_t Shape::num_elements() const {
  int64_t count = 1;
  for (int64_t dim : dims_) {
    if (dim == 0) return 0;
  }
  for (int64_t dim : dims_) {
    if (__builtin_mul_overflow(count, dim, &count)) return std::numeric_limits<int64_t>::max();
  }
  return count;
}

Dims Shape::strides() const {
  Dims strides(dims_.size(), 1);
  for (int64_t axis = rank() - 2; axis >= 0; --axis) {
    strides[static_cast<size_t>(axis)] =
        strides[static_cast<size_t>(axis + 1)] * dims_[static_cast<size_t>(axis + 1)];
  }
  return strides;
}

bool strides_fit_int64(std::span<const int64_t> dims) {
  int64_t product = 1;
  for (int64_t dim : dims) {
    if (dim < 0 || __builtin_mul_overflow(product, std::max<int64_t>(dim, 1), &product)) {
      return false;
    }
  }
  return true;
}

std::string dims_to_string(std::span<const int64_t> dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

std::string Shape::to_string() const {
  return dims_to_string(dims_);
}

std::string ShardingSpec::to_string() const {
  if (!sharded) return "";
  std::vector<std::string> parts;
  for (const std::vector<std::string>& axes : dims) {
    if (axes.empty()) {
      parts.emplace_back("_");
    } else if (axes.size() == 1) {
      parts.push_back(axes[0]);
    } else {
      parts.push_back(fmt::format("({})", fmt::join(axes, ",")));
    }
  }
  return fmt::format("{{{}}}", fmt::join(parts, ","));
}

std::optional<std::string> repeated_axis(const ShardingSpec& spec) {
  std::vector<std::string_view> seen;
  for (const std::vector<std::string>& axes : spec.dims) {
    for (const std::string& axis : axes) {
      if (std::find(seen.begin(), seen.end(), axis) != seen.end()) return axis;
      seen.push_back(axis);
    }
  }
  return std::nullopt;
}

std::string repeated_axis_message(std::string_view what, const ShardingSpec& spec,
                                  const std::string& axis) {
  return fmt::format("{} {} uses mesh axis '{}' twice", what, spec.to_string(), axis);
}

std::string AbstractValue::to_string() const {
  return fmt::format("{}{}{}{}", dtype_name(dtype), weak_type ? "~" : "", shape.to_string(),
                     sharding.to_string());
}

}  // namespace kiln
