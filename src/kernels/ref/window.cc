// Reference kernels of the window family: for each output cell (select_and_scatter_add:
// each source cell), a plain walk over its window. Cells outside the operand (padding)
// count as -inf (the lowest value for integers) for max and 0 for sum. Max propagates NaN;
// float sums accumulate in double and round once, integer sums wrap.
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "core/element_convert.h"
#include "kernels/ref/ref_kernels.h"
#include "prims/ids/window.h"

namespace kiln {
namespace {

// Folds `step(acc, value)` over each output cell's window, starting at `init`; cells
// outside the operand contribute `pad`.
template <typename S, typename Acc, typename Step>
void fold_windows(const KernelCall& call, Acc init, Acc pad, Step step) {
  const auto& p = std::get<ReduceWindowParams>(call.params);
  const Shape& in = call.inputs[0].aval->shape;
  const Shape& out = call.outputs[0].aval->shape;
  const S* x = static_cast<const S*>(call.inputs[0].data);
  S* y = static_cast<S*>(call.outputs[0].data);
  int64_t rank = in.rank();
  Dims in_strides = in.strides();
  int64_t window_cells = 1;
  for (int64_t size : p.window_dimensions) window_cells *= size;
  int64_t total = out.num_elements();
  Dims out_index(static_cast<size_t>(rank), 0);
  Dims tap(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t rest = i;
    for (int64_t axis = rank - 1; axis >= 0; --axis) {
      out_index[static_cast<size_t>(axis)] = rest % out[axis];
      rest /= out[axis];
    }
    Acc acc = init;
    for (int64_t w = 0; w < window_cells; ++w) {
      int64_t rest_w = w;
      for (int64_t axis = rank - 1; axis >= 0; --axis) {
        size_t a = static_cast<size_t>(axis);
        tap[a] = rest_w % p.window_dimensions[a];
        rest_w /= p.window_dimensions[a];
      }
      int64_t offset = 0;
      bool inside = true;
      for (int64_t axis = 0; axis < rank; ++axis) {
        size_t a = static_cast<size_t>(axis);
        int64_t at = out_index[a] * p.window_strides[a] + tap[a] - p.padding_low[a];
        if (at < 0 || at >= in[axis]) {
          inside = false;
          break;
        }
        offset += at * in_strides[a];
      }
      acc = step(acc, inside ? static_cast<Acc>(widen(x[offset])) : pad);
    }
    y[i] = convert_element<S>(acc);
  }
}

void ref_reduce_window_max(const KernelCall& call) {
  visit_dtype(call.inputs[0].aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    using C = compute_t<S>;
    if constexpr (std::is_same_v<S, bool>) {
      KILN_CHECK(false, "reduce_window_max on bool");
    } else {
      C lowest = std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                             : std::numeric_limits<C>::lowest();
      fold_windows<S, C>(call, lowest, lowest, [](C acc, C value) {
        // NaN wins: once acc is NaN no comparison replaces it.
        return (value > acc || value != value) && acc == acc ? value : acc;
      });
    }
  });
}

void ref_reduce_window_sum(const KernelCall& call) {
  visit_dtype(call.inputs[0].aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (std::is_same_v<S, bool>) {
      KILN_CHECK(false, "reduce_window_sum on bool");
    } else if constexpr (std::is_integral_v<S>) {
      // Wrapping sum: unsigned 64-bit arithmetic, then truncated to S.
      fold_windows<S, uint64_t>(call, 0, 0,
                                [](uint64_t acc, uint64_t value) { return acc + value; });
    } else {
      fold_windows<S, double>(call, 0.0, 0.0, [](double acc, double value) { return acc + value; });
    }
  });
}

// Each window's source cell goes to the window's first maximum: the first cell inside the
// operand, replaced by any later cell that is greater, or NaN while the maximum is not NaN
// (so a NaN maximum is the first NaN). Padding cells never receive; sums accumulate in
// double and round once.
void ref_select_and_scatter_add(const KernelCall& call) {
  const auto& p = std::get<ReduceWindowParams>(call.params);
  const Shape& windows = call.inputs[0].aval->shape;
  const Shape& in = call.inputs[1].aval->shape;
  visit_dtype(call.inputs[1].aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    using C = compute_t<S>;
    if constexpr (!std::is_floating_point_v<C>) {
      KILN_CHECK(false, "select_and_scatter_add on a non-float dtype");
    } else {
      const S* source = static_cast<const S*>(call.inputs[0].data);
      const S* x = static_cast<const S*>(call.inputs[1].data);
      S* result = static_cast<S*>(call.outputs[0].data);
      int64_t rank = in.rank();
      Dims in_strides = in.strides();
      int64_t window_cells = 1;
      for (int64_t size : p.window_dimensions) window_cells *= size;
      std::vector<double> sums(static_cast<size_t>(in.num_elements()), 0.0);
      Dims at(static_cast<size_t>(rank), 0);
      for (int64_t i = 0; i < windows.num_elements(); ++i) {
        for (int64_t axis = rank - 1, rest = i; axis >= 0; --axis) {
          at[static_cast<size_t>(axis)] = rest % windows[axis];
          rest /= windows[axis];
        }
        int64_t selected = -1;
        C best{};
        for (int64_t w = 0; w < window_cells; ++w) {
          int64_t offset = 0;
          bool inside = true;
          for (int64_t axis = rank - 1, rest = w; axis >= 0; --axis) {
            size_t a = static_cast<size_t>(axis);
            int64_t pos =
                at[a] * p.window_strides[a] + rest % p.window_dimensions[a] - p.padding_low[a];
            rest /= p.window_dimensions[a];
            inside = inside && pos >= 0 && pos < in[axis];
            offset += pos * in_strides[a];
          }
          if (!inside) continue;
          C value = widen(x[offset]);
          if (selected < 0 || (best == best && (value > best || value != value))) {
            selected = offset;
            best = value;
          }
        }
        if (selected >= 0) {
          sums[static_cast<size_t>(selected)] += static_cast<double>(widen(source[i]));
        }
      }
      for (size_t j = 0; j < sums.size(); ++j) result[j] = convert_element<S>(sums[j]);
    }
  });
}

}  // namespace

void register_ref_window(PrimTable& table) {
  table[prim::reduce_window_max].ref_kernel = ref_reduce_window_max;
  table[prim::reduce_window_sum].ref_kernel = ref_reduce_window_sum;
  table[prim::select_and_scatter_add].ref_kernel = ref_select_and_scatter_add;
}

}  // namespace kiln
