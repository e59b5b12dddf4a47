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
#include "kernels/index_rows.h"
#include "kernels/ref/ref_kernels.h"
#include "prims/ids/index.h"

namespace kiln {
namespace {

void ref_gather(const KernelCall& call) {
  const auto& p = std::get<GatherParams>(call.params);
  const KernelInput& operand = call.inputs[0];
  const KernelInput& indices = call.inputs[1];
  IndexGeometry g = index_geometry(operand.aval->shape, indices.aval->shape, p.axis, p.batch_dims);
  std::vector<int64_t> index =
      resolved_indices(indices, p.axis, g.axis_size, p.mode, IndexUse::kGather);
  int64_t width = dtype_size(operand.aval->dtype);
  size_t row_bytes = static_cast<size_t>(g.post * width);
  const auto* in = static_cast<const std::byte*>(operand.data);
  auto* out = static_cast<std::byte*>(call.outputs[0].data);
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t pre = 0; pre < g.pre; ++pre) {
      for (int64_t j = 0; j < g.n; ++j) {
        int64_t a = index[static_cast<size_t>(b * g.n + j)];
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
  IndexGeometry g = index_geometry(operand.aval->shape, indices.aval->shape, p.axis, p.batch_dims);
  std::vector<int64_t> index =
      resolved_indices(indices, p.axis, g.axis_size, p.mode, IndexUse::kScatter);
  visit_dtype(operand.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    // Accumulator: scatter_add's (index_rows.h); plain scatter only copies, in the element
    // type (bool as a byte: std::vector<bool> has no data()).
    using Copy = std::conditional_t<std::is_same_v<S, bool>, uint8_t, S>;
    using A = std::conditional_t<add, ScatterAccumulator<S>, Copy>;
    auto to_acc = [](S value) -> A {
      if constexpr (add) {
        return to_scatter_accumulator(value);
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
          int64_t a = index[static_cast<size_t>(b * g.n + j)];
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
