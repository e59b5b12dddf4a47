// Index resolution shared by the indexing kernels (kernels/index_rows.h).
#include "kernels/index_rows.h"

#include <type_traits>

#include <fmt/format.h>

#include "base/check.h"
#include "core/element_convert.h"

namespace kiln {
namespace {

// Index values widened to int64 (every index dtype fits), in indices' row-major order.
std::vector<int64_t> read_indices(const KernelInput& indices) {
  std::vector<int64_t> values(static_cast<size_t>(indices.aval->num_elements()));
  visit_dtype(indices.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
      const S* in = static_cast<const S*>(indices.data);
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(in[i]);
    } else {
      KILN_CHECK(false, "indices of dtype {}", dtype_name(indices.aval->dtype));
    }
  });
  return values;
}

std::string out_of_range_remedy(IndexUse use, int64_t axis_size) {
  if (use == IndexUse::kGather) {
    return fmt::format(
        "valid indices are 0..{}; take() clamps them with IndexMode::kClip or "
        "reads zeros with IndexMode::kFill; elsewhere clamp the indices first "
        "(clip(indices, 0, {}))",
        axis_size - 1, axis_size - 1);
  }
  return fmt::format(
      "valid indices are 0..{}; x.at(indices).set/add checks every index: clamp "
      "them first (clip(indices, 0, {})), or give the updates you want left out "
      "an index of their own and drop it afterwards",
      axis_size - 1, axis_size - 1);
}

// The axis position an index selects, or -1 when mode fill drops it; mode error throws.
int64_t resolve_index(int64_t value, int64_t position, const Shape& indices_shape, int64_t axis,
                      int64_t axis_size, IndexMode mode, IndexUse use) {
  if (value >= 0 && value < axis_size) return value;
  switch (mode) {
    case IndexMode::kClip:
      // (The rule rejects clipping into an empty axis when anything would be read.)
      if (axis_size == 0) return -1;
      return value < 0 ? 0 : axis_size - 1;
    case IndexMode::kFill:
      return -1;
    case IndexMode::kError:
      break;
  }
  Dims where(static_cast<size_t>(indices_shape.rank()), 0);
  for (int64_t d = indices_shape.rank() - 1; d >= 0; --d) {
    where[static_cast<size_t>(d)] = position % indices_shape[d];
    position /= indices_shape[d];
  }
  fail(kUnknownSite,
       fmt::format("index {} at indices{} is out of range for axis {} of size {}", value,
                   dims_to_string(where), axis, axis_size),
       out_of_range_remedy(use, axis_size));
}

}  // namespace

IndexGeometry index_geometry(const Shape& operand, const Shape& indices, int64_t axis,
                             int64_t batch_dims) {
  IndexGeometry g;
  for (int64_t d = 0; d < operand.rank(); ++d) {
    if (d < batch_dims) {
      g.batch *= operand[d];
    } else if (d < axis) {
      g.pre *= operand[d];
    } else if (d > axis) {
      g.post *= operand[d];
    }
  }
  g.axis_size = operand[axis];
  for (int64_t d = batch_dims; d < indices.rank(); ++d) g.n *= indices[d];
  return g;
}

std::vector<int64_t> resolved_indices(const KernelInput& indices, int64_t axis, int64_t axis_size,
                                      IndexMode mode, IndexUse use) {
  std::vector<int64_t> values = read_indices(indices);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = resolve_index(values[i], static_cast<int64_t>(i), indices.aval->shape, axis,
                              axis_size, mode, use);
  }
  return values;
}

}  // namespace kiln
