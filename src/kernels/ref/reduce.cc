// Reference kernels of the reduce family. They define the right answer: floats accumulate
// in double and are rounded to the output dtype once; integers wrap in their own width
// (computed modulo 2^64, which agrees with every narrower width); max/min propagate NaN;
// an empty reduction gives the identity. argmax/argmin follow numpy (first occurrence,
// the first NaN wins); cumsum is an inclusive scan, optionally from the end.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "core/element_convert.h"
#include "kernels/broadcast_iter.h"
#include "kernels/ref/accumulator.h"
#include "kernels/ref/reduce_kernels.h"
#include "kernels/ref/ref_kernels.h"
#include "prims/ids/reduce.h"

namespace kiln {
namespace {

enum class ReduceOp { kSum, kProd, kMax, kMin };

using ref::accum_t;
using ref::to_accum;

template <typename S, ReduceOp op>
accum_t<S> identity() {
  using A = accum_t<S>;
  if constexpr (op == ReduceOp::kSum) {
    return A{0};
  } else if constexpr (op == ReduceOp::kProd) {
    return A{1};
  } else if constexpr (std::is_floating_point_v<A>) {
    return op == ReduceOp::kMax ? -std::numeric_limits<double>::infinity()
                                : std::numeric_limits<double>::infinity();
  } else {
    // Integers and bool compare in their own type; the identity is its lowest/highest value.
    return to_accum<S>(op == ReduceOp::kMax ? std::numeric_limits<S>::lowest()
                                            : std::numeric_limits<S>::max());
  }
}

// Integers compare as their own type (the uint64_t holds them sign-extended).
template <typename S>
auto comparable(accum_t<S> value) {
  if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
    return static_cast<S>(value);
  } else {
    return value;
  }
}

template <typename S, ReduceOp op>
accum_t<S> combine(accum_t<S> acc, accum_t<S> x) {
  if constexpr (op == ReduceOp::kSum) {
    return acc + x;
  } else if constexpr (op == ReduceOp::kProd) {
    return acc * x;
  } else {
    if constexpr (std::is_floating_point_v<accum_t<S>>) {
      if (std::isnan(acc)) return acc;
      if (std::isnan(x)) return x;
    }
    bool take = op == ReduceOp::kMax ? comparable<S>(x) > comparable<S>(acc)
                                     : comparable<S>(x) < comparable<S>(acc);
    return take ? x : acc;
  }
}

// Element strides of the output seen from the input's axes: 0 on the reduced axes.
Dims reduced_strides(const Shape& in, const Dims& axes) {
  Dims strides(static_cast<size_t>(in.rank()), 0);
  int64_t stride = 1;
  for (int64_t axis = in.rank() - 1; axis >= 0; --axis) {
    bool reduced = false;
    for (int64_t a : axes) reduced = reduced || a == axis;
    if (reduced) continue;
    strides[static_cast<size_t>(axis)] = stride;
    stride *= in[axis];
  }
  return strides;
}

template <ReduceOp op>
void ref_reduce(const KernelCall& call) {
  const KernelInput& x = call.inputs[0];
  const KernelOutput& y = call.outputs[0];
  const Dims& axes = std::get<ReduceParams>(call.params).axes;
  visit_dtype(x.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    using A = accum_t<S>;
    const S* in = static_cast<const S*>(x.data);
    S* out = static_cast<S*>(y.data);
    std::vector<A> acc(static_cast<size_t>(y.aval->num_elements()), identity<S, op>());
    std::array<Dims, 1> strides{reduced_strides(x.aval->shape, axes)};
    for_each_broadcast(x.aval->shape, strides, [&](int64_t i, const std::array<int64_t, 1>& at) {
      A& slot = acc[static_cast<size_t>(at[0])];
      slot = combine<S, op>(slot, to_accum(in[i]));
    });
    for (size_t i = 0; i < acc.size(); ++i) out[i] = convert_element<S>(acc[i]);
  });
}

// [outer, size, inner] view of an array around `axis`.
struct AxisView {
  int64_t outer = 1, size = 1, inner = 1;
};
AxisView axis_view(const Shape& shape, int64_t axis) {
  AxisView view;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (d < axis) view.outer *= shape[d];
    if (d > axis) view.inner *= shape[d];
  }
  view.size = shape[axis];
  return view;
}

template <bool is_max>
void ref_arg_reduce(const KernelCall& call) {
  const KernelInput& x = call.inputs[0];
  const KernelOutput& y = call.outputs[0];
  const auto& p = std::get<ArgReduceParams>(call.params);
  AxisView view = axis_view(x.aval->shape, p.axis);
  visit_dtype(x.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    const S* in = static_cast<const S*>(x.data);
    for (int64_t o = 0; o < view.outer; ++o) {
      for (int64_t q = 0; q < view.inner; ++q) {
        const S* line = in + o * view.size * view.inner + q;
        auto best = widen(line[0]);
        int64_t best_index = 0;
        for (int64_t a = 1; a < view.size; ++a) {
          if constexpr (std::is_floating_point_v<decltype(best)>) {
            if (std::isnan(best)) break;  // the first NaN is the extreme
          }
          auto value = widen(line[a * view.inner]);
          bool better = is_max ? value > best : value < best;
          if constexpr (std::is_floating_point_v<decltype(best)>)
            better = better || std::isnan(value);
          if (better) {
            best = value;
            best_index = a;
          }
        }
        int64_t at = o * view.inner + q;
        if (y.aval->dtype == DType::i32) {
          static_cast<int32_t*>(y.data)[at] = static_cast<int32_t>(best_index);
        } else {
          static_cast<int64_t*>(y.data)[at] = best_index;
        }
      }
    }
  });
}

void ref_cumsum(const KernelCall& call) {
  const KernelInput& x = call.inputs[0];
  const KernelOutput& y = call.outputs[0];
  const auto& p = std::get<CumsumParams>(call.params);
  AxisView view = axis_view(x.aval->shape, p.axis);
  visit_dtype(x.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (std::is_same_v<S, bool>) {
      KILN_CHECK(false, "cumsum of bool");
    } else {
      const S* in = static_cast<const S*>(x.data);
      S* out = static_cast<S*>(y.data);
      for (int64_t o = 0; o < view.outer; ++o) {
        for (int64_t q = 0; q < view.inner; ++q) {
          int64_t base = o * view.size * view.inner + q;
          accum_t<S> acc{0};
          for (int64_t k = 0; k < view.size; ++k) {
            int64_t a = p.reverse ? view.size - 1 - k : k;
            int64_t at = base + a * view.inner;
            acc = acc + to_accum(in[at]);
            out[at] = convert_element<S>(acc);
          }
        }
      }
    }
  });
}

}  // namespace

namespace ref {
void reduce_sum(const KernelCall& call) {
  ref_reduce<ReduceOp::kSum>(call);
}
void reduce_max(const KernelCall& call) {
  ref_reduce<ReduceOp::kMax>(call);
}
void reduce_min(const KernelCall& call) {
  ref_reduce<ReduceOp::kMin>(call);
}
}  // namespace ref

void register_ref_reduce(PrimTable& table) {
  table[prim::reduce_sum].ref_kernel = ref::reduce_sum;
  table[prim::reduce_max].ref_kernel = ref::reduce_max;
  table[prim::reduce_min].ref_kernel = ref::reduce_min;
  table[prim::reduce_prod].ref_kernel = ref_reduce<ReduceOp::kProd>;
  table[prim::argmax].ref_kernel = ref_arg_reduce<true>;
  table[prim::argmin].ref_kernel = ref_arg_reduce<false>;
  table[prim::cumsum].ref_kernel = ref_cumsum;
}

}  // namespace kiln
