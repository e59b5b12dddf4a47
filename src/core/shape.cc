// Shape and AbstractValue helpers.
#include "kiln/shape.h"

#include <fmt/format.h>

namespace kiln {

int64_t Shape::num_elements() const {
  int64_t count = 1;
  for (int64_t dim : dims_) count *= dim;
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

std::string dims_to_string(std::span<const int64_t> dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

std::string Shape::to_string() const {
  return dims_to_string(dims_);
}

std::string AbstractValue::to_string() const {
  return fmt::format("{}{}{}", dtype_name(dtype), weak_type ? "~" : "", shape.to_string());
}

}  // namespace kiln
