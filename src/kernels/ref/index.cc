// Reference kernels of the indexing family: gather, scatter, scatter_add. The operand is
// seen as [batch, pre, axis, post] and the indices as [batch, n]; gather's output (and the
// updates of the scatters) as [batch, pre, n, post]. Updates are applied in that row-major
// order, so for repeated indices scatter keeps the last and scatter_add sums in index
// order (floats in double, rounded once; integers wrapping).
#include <cstring>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "core/element_convert.h"
#include "kernels/ref/ref_kernels.h"
#include "prims/ids/index.h"

namespace kiln {
namespace {

struct IndexGeometry {
  int64_t batch = 1, pre = 1, axis_size = 0, post = 1, n = 1;
};

IndexGeometry geometry(const Shape& operand, const Shape& indices, int64_t axis,
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

// The axis position an index selects, or -1 when mode fill drops it. Mode error throws an
// Error that the runtime reports at the next synchronization with the op's call site.
// Which primitive reads the indices: the remedy the error suggests differs (take() has a
// mode; x.at(indices).set/add and take_along_axis have none).
enum class IndexUse { kGather, kScatter };

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

int64_t resolve(int64_t value, int64_t position, const Shape& indices_shape, int64_t axis,
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

// The index values; in mode error every one is checked up front, so a bad index is
// reported even when the operand's other axes leave nothing to read or write.
std::vector<int64_t> checked_indices(const KernelInput& indices, int64_t axis, int64_t axis_size,
                                     IndexMode mode, IndexUse use) {
  std::vector<int64_t> values = read_indices(indices);
  if (mode == IndexMode::kError) {
    for (size_t i = 0; i < values.size(); ++i) {
      resolve(values[i], static_cast<int64_t>(i), indices.aval->shape, axis, axis_size, mode, use);
    }
  }
  return values;
}

void ref_gather(const KernelCall& call) {
  const auto& p = std::get<GatherParams>(call.params);
  const KernelInput& operand = call.inputs[0];
  const KernelInput& indices = call.inputs[1];
  IndexGeometry g = geometry(operand.aval->shape, indices.aval->shape, p.axis, p.batch_dims);
  std::vector<int64_t> index =
      checked_indices(indices, p.axis, g.axis_size, p.mode, IndexUse::kGather);
  int64_t width = dtype_size(operand.aval->dtype);
  size_t row_bytes = static_cast<size_t>(g.post * width);
  const auto* in = static_cast<const std::byte*>(operand.data);
  auto* out = static_cast<std::byte*>(call.outputs[0].data);
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t pre = 0; pre < g.pre; ++pre) {
      for (int64_t j = 0; j < g.n; ++j) {
        int64_t position = b * g.n + j;
        int64_t a = resolve(index[static_cast<size_t>(position)], position, indices.aval->shape,
                            p.axis, g.axis_size, p.mode, IndexUse::kGather);
        std::byte* target = out + (((b * g.pre + pre) * g.n + j) * g.post) * width;
        if (a < 0) {
          // Zero bytes are 0 (or false) in every dtype.
          if (row_bytes > 0) std::memset(target, 0, row_bytes);
        } else if (row_bytes > 0) {
          std::memcpy(target, in + (((b * g.pre + pre) * g.axis_size + a) * g.post) * width,
                      row_bytes);
        }
      }
    }
  }
}

template <bool add>
void ref_scatter(const KernelCall& call) {
  const auto& p = std::get<ScatterParams>(call.params);
  const KernelInput& operand = call.inputs[0];
  const KernelInput& indices = call.inputs[1];
  const KernelInput& updates = call.inputs[2];
  IndexGeometry g = geometry(operand.aval->shape, indices.aval->shape, p.axis, p.batch_dims);
  std::vector<int64_t> index =
      checked_indices(indices, p.axis, g.axis_size, p.mode, IndexUse::kScatter);
  visit_dtype(operand.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    // Accumulator: double for floats, wrapping uint64_t for integers; plain scatter only
    // copies, in the element type (bool as a byte: std::vector<bool> has no data()).
    using Copy = std::conditional_t<std::is_same_v<S, bool>, uint8_t, S>;
    using A =
        std::conditional_t<!add, Copy, std::conditional_t<std::is_integral_v<S>, uint64_t, double>>;
    auto to_acc = [](S value) -> A {
      if constexpr (std::is_same_v<A, uint64_t>) {
        return static_cast<uint64_t>(static_cast<int64_t>(value));
      } else if constexpr (std::is_same_v<A, double>) {
        return static_cast<double>(widen(value));
      } else {
        return static_cast<A>(value);
      }
    };
    const S* base = static_cast<const S*>(operand.data);
    const S* upd = static_cast<const S*>(updates.data);
    std::vector<A> acc(static_cast<size_t>(operand.aval->num_elements()));
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = to_acc(base[i]);
    for (int64_t b = 0; b < g.batch; ++b) {
      for (int64_t pre = 0; pre < g.pre; ++pre) {
        for (int64_t j = 0; j < g.n; ++j) {
          int64_t position = b * g.n + j;
          int64_t a = resolve(index[static_cast<size_t>(position)], position, indices.aval->shape,
                              p.axis, g.axis_size, p.mode, IndexUse::kScatter);
          if (a < 0) continue;
          A* target = acc.data() + ((b * g.pre + pre) * g.axis_size + a) * g.post;
          const S* source = upd + ((b * g.pre + pre) * g.n + j) * g.post;
          for (int64_t q = 0; q < g.post; ++q) {
            if constexpr (add) {
              target[q] = target[q] + to_acc(source[q]);
            } else {
              target[q] = to_acc(source[q]);
            }
          }
        }
      }
    }
    S* out = static_cast<S*>(call.outputs[0].data);
    for (size_t i = 0; i < acc.size(); ++i) out[i] = convert_element<S>(acc[i]);
  });
}

}  // namespace

void register_ref_index(PrimTable& table) {
  table[prim::gather].ref_kernel = ref_gather;
  table[prim::scatter].ref_kernel = ref_scatter<false>;
  table[prim::scatter_add].ref_kernel = ref_scatter<true>;
}

}  // namespace kiln
