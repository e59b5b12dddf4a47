// VJP rules of the window family. reduce_window_sum's cotangent is its transpose: the
// cotangent spread out by the strides and padded, then summed over the same window (as
// JAX's _reduce_window_sum_transpose_rule). reduce_window_max routes each window's
// cotangent to the window's first maximum with select_and_scatter_add (as XLA), whose own
// VJP gathers from the same positions, built from slices, comparisons and selects.
#include <limits>

#include "prims/bind.h"
#include "prims/ids/window.h"
#include "transforms/vjp_rules/vjp_rules.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

// Output cell o's window starts at padded position o * stride, so input cell i receives
// the cotangent of every o with o * stride <= i + padding_low < o * stride + window. In
// the cotangent dilated by the stride (holes of stride - 1) and padded by window - 1 -
// padding_low in front, those cells are exactly the window-long run ending at i: a
// stride-1 windowed sum gives each input cell its total.
std::vector<Array> reduce_window_sum_vjp(const VjpArgs& args) {
  const auto& p = std::get<ReduceWindowParams>(args.params);
  const Array& x = args.inputs[0];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  if (x.size() == 0 || g.size() == 0) return {zeros_like(x, args.site)};
  auto rank = static_cast<size_t>(x.rank());
  Dims low, high, interior, ones(rank, 1), none(rank, 0);
  for (size_t a = 0; a < rank; ++a) {
    auto axis = static_cast<int64_t>(a);
    int64_t window = p.window_dimensions[a];
    int64_t out = vjp_util::dilated_size(g.dim(axis), p.window_strides[a]);
    low.push_back(window - p.padding_low[a] - 1);
    high.push_back(x.dim(axis) + window - 1 - out - low.back());
    interior.push_back(p.window_strides[a] - 1);
  }
  Array spread = pad(g, low, high, interior, 0, args.site);
  return {bind1(prim::reduce_window_sum, {spread},
                ReduceWindowParams{p.window_dimensions, ones, none, none}, args.site)};
}

// Each window's cotangent goes to the window's first maximum: select_and_scatter_add, one
// kernel (its semantics are documented with the primitive in prims/ids/window.def).
std::vector<Array> reduce_window_max_vjp(const VjpArgs& args) {
  const Array& x = args.inputs[0];
  if (!is_floating(x.dtype())) return vjp_util::none(args);
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  if (x.size() == 0 || g.size() == 0) return {zeros_like(x, args.site)};
  return {bind1(prim::select_and_scatter_add, {g, x}, args.params, args.site)};
}

// select_and_scatter_add is linear in its source, and its transpose gathers: each window
// takes the cotangent at its selected cell. Built from ops (only second derivatives of
// max pooling come here): for each window offset k in row-major order, the strided slice of
// the padded operand holding every window's k-th cell is compared with the windows'
// maximum; a window takes the first k that matches (a running "taken" mask), a NaN maximum
// matching the window's first NaN. Padding cells never match. The selection is piecewise
// constant in the operand, whose cotangent is zero.
std::vector<Array> select_and_scatter_add_vjp(const VjpArgs& args) {
  const auto& p = std::get<ReduceWindowParams>(args.params);
  const Array& source = args.inputs[0];
  const Array& x = args.inputs[1];
  CallSite site = args.site;
  std::vector<Array> result = vjp_util::none(args);
  if (!args.wanted[0]) return result;
  if (x.size() == 0 || source.size() == 0) {
    result[0] = zeros_like(source, site);
    return result;
  }
  Array ct = vjp_util::cotangent_or_zeros(args, 0);
  Array y = bind1(prim::reduce_window_max, {x}, args.params, site);
  auto rank = static_cast<size_t>(x.rank());
  bool padded = false;
  int64_t window_cells = 1;
  for (size_t a = 0; a < rank; ++a) {
    padded = padded || p.padding_low[a] > 0 || p.padding_high[a] > 0;
    window_cells *= p.window_dimensions[a];
  }
  double lowest = -std::numeric_limits<double>::infinity();
  Array x_padded = pad(x, p.padding_low, p.padding_high, {}, lowest, site);
  Array ct_padded = pad(ct, p.padding_low, p.padding_high, {}, 0, site);
  // 1 on the operand's cells, 0 on padding: only needed when some window reaches padding.
  Array inside =
      padded ? pad(ones_like(x, site), p.padding_low, p.padding_high, {}, 0, site) : Array();
  Array zero = zeros_like(source, site);
  Dims offset(rank, 0);
  Array taken, total;
  for (int64_t cell = 0; cell < window_cells; ++cell) {
    Dims start, limit;
    for (size_t a = 0; a < rank; ++a) {
      start.push_back(offset[a]);
      limit.push_back(offset[a] + vjp_util::dilated_size(source.dim(static_cast<int64_t>(a)),
                                                         p.window_strides[a]));
    }
    Array candidate = slice(x_padded, start, limit, p.window_strides, site);
    Array hit = bitwise_or(equal(candidate, y, site), not_equal(candidate, candidate, site), site);
    if (inside.defined()) {
      Array real = not_equal(slice(inside, start, limit, p.window_strides, site), zero, site);
      hit = bitwise_and(hit, real, site);
    }
    if (taken.defined()) hit = bitwise_and(hit, logical_not(taken, site), site);
    if (cell + 1 < window_cells) taken = taken.defined() ? bitwise_or(taken, hit, site) : hit;
    Array picked = where(hit, slice(ct_padded, start, limit, p.window_strides, site), zero, site);
    total = total.defined() ? add(total, picked, site) : picked;
    // Next offset in row-major order.
    for (size_t a = rank; a-- > 0;) {
      if (++offset[a] < p.window_dimensions[a]) break;
      offset[a] = 0;
    }
  }
  result[0] = total;
  return result;
}

}  // namespace

void register_vjp_window(PrimTable& table) {
  table[prim::reduce_window_max].vjp = reduce_window_max_vjp;
  table[prim::reduce_window_sum].vjp = reduce_window_sum_vjp;
  table[prim::select_and_scatter_add].vjp = select_and_scatter_add_vjp;
}

}  // namespace kiln
