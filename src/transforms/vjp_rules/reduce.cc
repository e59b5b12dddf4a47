// VJP rules of the reductions and scans. reduce_max/min send the cotangent to the elements
// equal to the result, shared equally among ties (as JAX does); reduce_prod multiplies by
// the product of the other elements, built from prefix and suffix products so that zeros
// need no division and higher derivatives stay exact; cumsum's is a cumsum the other way.
// argmax/argmin are not differentiable (kNotDifferentiable in prims/ids/reduce.def).
#include <algorithm>

#include "prims/ids/reduce.h"
#include "transforms/vjp_rules/vjp_rules.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

// The reduced cotangent broadcast back over the reduced axes.
Array expand_reduced(const Array& ct, const Shape& operand, const Dims& axes, CallSite site) {
  Dims kept;
  size_t next_reduced = 0;
  for (int64_t axis = 0; axis < operand.rank(); ++axis) {
    if (next_reduced < axes.size() && axes[next_reduced] == axis) {
      ++next_reduced;
    } else {
      kept.push_back(axis);
    }
  }
  return broadcast_in_dim(ct, operand, kept, site);
}

std::vector<Array> reduce_sum_vjp(const VjpArgs& args) {
  const Dims& axes = std::get<ReduceParams>(args.params).axes;
  return {expand_reduced(vjp_util::cotangent_or_zeros(args, 0), args.inputs[0].shape(), axes,
                         args.site)};
}

// d max / dx_i = [x_i == max] / (number of elements equal to the max). A NaN result
// matches no element: the count is 0 and the whole group's cotangent is NaN, as in JAX.
std::vector<Array> extremum_vjp(const VjpArgs& args) {
  const Dims& axes = std::get<ReduceParams>(args.params).axes;
  const Array& x = args.inputs[0];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  if (axes.empty()) return {g};  // reduces nothing: the identity
  CallSite site = args.site;
  Array at_extreme = astype(equal(x, expand_reduced(args.outputs[0], x.shape(), axes, site), site),
                            g.dtype(), site);
  Array count = sum(at_extreme, axes, /*keepdims=*/false, site);
  return {mul(expand_reduced(div(g, count, site), x.shape(), axes, site), at_extreme, site)};
}

// Along the last axis of x[m, n]: the product of every element but the one at each
// position, as exclusive prefix products times exclusive suffix products. Each is a
// log2(n)-step scan of shifted multiplications (ones shifted in), so it needs no division
// (zeros are exact) and is itself differentiable (second derivatives are exact too).
Array product_of_others(const Array& x, CallSite site) {
  int64_t m = x.shape()[0], n = x.shape()[1];
  auto shifted_right = [&](const Array& a, int64_t by) {
    return pad(slice(a, {0, 0}, {m, n - by}, {}, site), {0, by}, {0, 0}, {}, 1.0, site);
  };
  auto shifted_left = [&](const Array& a, int64_t by) {
    return pad(slice(a, {0, by}, {m, n}, {}, site), {0, 0}, {0, by}, {}, 1.0, site);
  };
  Array prefix = shifted_right(x, 1);  // x[i - 1], 1 at i = 0
  Array suffix = shifted_left(x, 1);   // x[i + 1], 1 at i = n - 1
  for (int64_t by = 1; by < n; by *= 2) {
    prefix = mul(prefix, shifted_right(prefix, by), site);
    suffix = mul(suffix, shifted_left(suffix, by), site);
  }
  return mul(prefix, suffix, site);
}

// The reduced axes are moved last and flattened, so each output element owns one row.
std::vector<Array> reduce_prod_vjp(const VjpArgs& args) {
  const Dims& axes = std::get<ReduceParams>(args.params).axes;
  const Array& x = args.inputs[0];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  if (axes.empty()) return {g};
  if (x.size() == 0) return {zeros_like(x, args.site)};
  CallSite site = args.site;
  Dims permutation;
  int64_t rows = 1, row_length = 1;
  for (int64_t axis = 0; axis < x.rank(); ++axis) {
    if (!std::binary_search(axes.begin(), axes.end(), axis)) {
      permutation.push_back(axis);
      rows *= x.shape()[axis];
    }
  }
  Shape moved_shape;
  for (int64_t axis : permutation) moved_shape.dims().push_back(x.shape()[axis]);
  for (int64_t axis : axes) {
    permutation.push_back(axis);
    moved_shape.dims().push_back(x.shape()[axis]);
    row_length *= x.shape()[axis];
  }
  Array lines = reshape(transpose(x, permutation, site), Shape{rows, row_length}, site);
  Array ct = mul(product_of_others(lines, site), reshape(g, Shape{rows, 1}, site), site);
  Dims inverse(permutation.size(), 0);
  for (size_t i = 0; i < permutation.size(); ++i) {
    inverse[static_cast<size_t>(permutation[i])] = static_cast<int64_t>(i);
  }
  return {transpose(reshape(ct, moved_shape, site), inverse, site)};
}

std::vector<Array> cumsum_vjp(const VjpArgs& args) {
  const auto& p = std::get<CumsumParams>(args.params);
  return {cumsum(vjp_util::cotangent_or_zeros(args, 0), p.axis, !p.reverse, args.site)};
}

}  // namespace

void register_vjp_reduce(PrimTable& table) {
  table[prim::reduce_sum].vjp = reduce_sum_vjp;
  table[prim::reduce_max].vjp = extremum_vjp;
  table[prim::reduce_min].vjp = extremum_vjp;
  table[prim::reduce_prod].vjp = reduce_prod_vjp;
  table[prim::cumsum].vjp = cumsum_vjp;
}

}  // namespace kiln
