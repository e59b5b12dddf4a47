// VJP rules of the contract family (the transposes JAX uses, written with kiln's ops).
// dot_general: each operand's cotangent is a dot_general of the result's cotangent with
// the other operand, transposed back into the operand's axis order. conv_general_dilated:
// the input's cotangent is a convolution of the cotangent with the spatially flipped
// kernel (strides and input dilation exchanged); the kernel's is a convolution of the
// input with the cotangent (batch and feature axes exchanged). Both are built from
// differentiable ops, so second derivatives work.
#include <algorithm>
#include <numeric>

#include "prims/ids/contract.h"
#include "transforms/vjp_rules/vjp_rules.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

// ----- dot_general ------------------------------------------------------------------------

// The axes of a rank-`rank` operand that are neither batch nor contracting, in order.
Dims free_axes(int64_t rank, const Dims& batch, const Dims& contracting) {
  Dims axes;
  for (int64_t axis = 0; axis < rank; ++axis) {
    if (std::find(batch.begin(), batch.end(), axis) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), axis) == contracting.end()) {
      axes.push_back(axis);
    }
  }
  return axes;
}

// The permutation that sorts `values` (which are distinct).
Dims argsort(const Dims& values) {
  Dims order(values.size(), 0);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return values[static_cast<size_t>(a)] < values[static_cast<size_t>(b)];
  });
  return order;
}

Dims iota_dims(int64_t begin, int64_t end) {
  Dims dims(static_cast<size_t>(std::max<int64_t>(end - begin, 0)), 0);
  std::iota(dims.begin(), dims.end(), begin);
  return dims;
}

// One operand's side of a dot_general: `x` is the operand whose cotangent is wanted, `y`
// the other one, with their batch and contracting axes.
struct DotSide {
  const Array& x;
  const Array& y;
  const Dims& x_contracting;
  const Dims& y_contracting;
  const Dims& x_batch;
  const Dims& y_batch;
  bool x_is_lhs;
};

// The result g has axes [batch, lhs free, rhs free]. Contracting g's y-free axes with y's
// free axes (batch with batch) leaves [batch, x free, y's contracting axes in increasing
// order]; the x axes these are, in order, are x_batch, x_free and x_contracting sorted by
// their partners in y. A transpose puts them back into x's order.
Array dot_operand_cotangent(const Array& g, const DotSide& side, CallSite site) {
  Dims x_free = free_axes(side.x.rank(), side.x_batch, side.x_contracting);
  Dims y_free = free_axes(side.y.rank(), side.y_batch, side.y_contracting);
  auto nb = static_cast<int64_t>(side.x_batch.size());
  auto nx = static_cast<int64_t>(x_free.size());
  auto ny = static_cast<int64_t>(y_free.size());
  Dims g_y_free = side.x_is_lhs ? iota_dims(nb + nx, nb + nx + ny) : iota_dims(nb, nb + ny);
  // x's contracting axes in the order of their partners in y.
  Dims x_contracting_by_y;
  for (int64_t k : argsort(side.y_contracting)) {
    x_contracting_by_y.push_back(side.x_contracting[static_cast<size_t>(k)]);
  }
  // dot_general(g, y) yields [batch, x free, x contracting]; dot_general(y, g) yields
  // [batch, x contracting, x free]. Whichever is already in x's axis order needs no
  // transpose: for a dense layer's kernel (x^T g) that saves a copy of the whole gradient.
  Dims produced = side.x_batch, swapped = side.x_batch;
  for (int64_t axis : x_free) produced.push_back(axis);
  for (int64_t axis : x_contracting_by_y) produced.push_back(axis);
  for (int64_t axis : x_contracting_by_y) swapped.push_back(axis);
  for (int64_t axis : x_free) swapped.push_back(axis);
  Array product;
  if (!std::is_sorted(produced.begin(), produced.end()) &&
      std::is_sorted(swapped.begin(), swapped.end())) {
    product = dot_general(side.y, g, y_free, g_y_free, side.y_batch, iota_dims(0, nb), std::nullopt,
                          site);
    produced = swapped;
  } else {
    product = dot_general(g, side.y, g_y_free, y_free, iota_dims(0, nb), side.y_batch, std::nullopt,
                          site);
  }
  Dims permutation = argsort(produced);
  if (!std::is_sorted(produced.begin(), produced.end())) {
    product = transpose(product, permutation, site);
  }
  // With preferred_element_type (or a promoted cotangent) the product is wider than x.
  return product.dtype() == side.x.dtype() ? product : astype(product, side.x.dtype(), site);
}

std::vector<Array> dot_general_vjp(const VjpArgs& args) {
  const auto& p = std::get<DotGeneralParams>(args.params);
  const Array& lhs = args.inputs[0];
  const Array& rhs = args.inputs[1];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  std::vector<Array> cts = vjp_util::none(args);
  if (args.wanted[0] && is_floating(lhs.dtype())) {
    cts[0] = dot_operand_cotangent(
        g, DotSide{lhs, rhs, p.lhs_contracting, p.rhs_contracting, p.lhs_batch, p.rhs_batch, true},
        args.site);
  }
  if (args.wanted[1] && is_floating(rhs.dtype())) {
    cts[1] = dot_operand_cotangent(
        g, DotSide{rhs, lhs, p.rhs_contracting, p.lhs_contracting, p.rhs_batch, p.lhs_batch, false},
        args.site);
  }
  return cts;
}

// ----- conv_general_dilated ---------------------------------------------------------------

// x reversed along `axis` (kiln has no rev primitive: size-1 slices joined in reverse
// order, which differentiate through slice and concatenate). Kernel windows are small.
Array reverse_axis(const Array& x, int64_t axis, CallSite site) {
  int64_t size = x.dim(axis);
  if (size <= 1) return x;
  Dims start(static_cast<size_t>(x.rank()), 0);
  Dims limit = x.shape().dims();
  std::vector<Array> pieces;
  for (int64_t i = size - 1; i >= 0; --i) {
    start[static_cast<size_t>(axis)] = i;
    limit[static_cast<size_t>(axis)] = i + 1;
    pieces.push_back(slice(x, start, limit, {}, site));
  }
  return concatenate(pieces, axis, site);
}

// Cotangent of the NHWC input: y[n, o] sums x_padded[n, o * stride + k * rhs_dilation] *
// w[k], so x's cotangent at p sums g[o] * w[k] over o * stride + k * rhs_dilation = p:
// a convolution of g (dilated by the stride) with w flipped in space, stepping by the
// input's dilation. Per group the kernel's I and O axes swap: HWIO [kh, kw, I, G * O/G]
// becomes [kh, kw, O/G, G * I].
Array conv_lhs_cotangent(const Array& g, const Array& x, const Array& w, const ConvParams& p,
                         CallSite site) {
  int64_t groups = p.feature_group_count;
  Dims low{0, 0}, high{0, 0};
  for (size_t i = 0; i < 2; ++i) {
    auto axis = static_cast<int64_t>(i);
    int64_t in = vjp_util::dilated_size(x.dim(axis + 1), p.lhs_dilation[i]);
    int64_t window = vjp_util::dilated_size(w.dim(axis), p.rhs_dilation[i]);
    int64_t out = vjp_util::dilated_size(g.dim(axis + 1), p.window_strides[i]);
    low[i] = window - p.padding_low[i] - 1;
    high[i] = in + window - 1 - out - low[i];
  }
  Array flipped = reverse_axis(reverse_axis(w, 0, site), 1, site);
  int64_t kh = w.dim(0), kw = w.dim(1), in_per_group = w.dim(2), out_per_group = w.dim(3) / groups;
  Array grouped = reshape(flipped, Shape{kh, kw, in_per_group, groups, out_per_group}, site);
  Array swapped = reshape(transpose(grouped, {0, 1, 4, 3, 2}, site),
                          Shape{kh, kw, out_per_group, groups * in_per_group}, site);
  return conv_general_dilated(g, swapped, p.lhs_dilation, low, high, p.window_strides,
                              p.rhs_dilation, groups, site);
}

// Cotangent of the HWIO kernel: dw[k, i, o] sums x_padded[n, o' * stride + k * rhs_dilation,
// i] * g[n, o', o] over n and o': a convolution of x (batch and channels exchanged) with g
// (as an [OH, OW, N, O] kernel), stepping by the rhs dilation and dilated by the stride.
// Groups: x's channels (G, I) become batch I and features (G, N), and the same group count
// pairs each group's inputs with its own outputs (XLA's feature/batch group exchange).
Array conv_rhs_cotangent(const Array& g, const Array& x, const Array& w, const ConvParams& p,
                         CallSite site) {
  int64_t groups = p.feature_group_count;
  Dims high{0, 0};
  for (size_t i = 0; i < 2; ++i) {
    auto axis = static_cast<int64_t>(i);
    int64_t in = vjp_util::dilated_size(x.dim(axis + 1), p.lhs_dilation[i]);
    int64_t window = vjp_util::dilated_size(w.dim(axis), p.rhs_dilation[i]);
    int64_t out = vjp_util::dilated_size(g.dim(axis + 1), p.window_strides[i]);
    high[i] = out - in + window - p.padding_low[i] - 1;
  }
  int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), in_per_group = x.dim(3) / groups;
  Array x_grouped = reshape(x, Shape{n, h, wd, groups, in_per_group}, site);
  Array x_swapped = reshape(transpose(x_grouped, {4, 1, 2, 3, 0}, site),
                            Shape{in_per_group, h, wd, groups * n}, site);
  Array g_kernel = transpose(g, {1, 2, 0, 3}, site);
  Array product = conv_general_dilated(x_swapped, g_kernel, p.rhs_dilation, p.padding_low, high,
                                       p.lhs_dilation, p.window_strides, groups, site);
  return transpose(product, {1, 2, 0, 3}, site);
}

std::vector<Array> conv_vjp(const VjpArgs& args) {
  const auto& p = std::get<ConvParams>(args.params);
  const Array& x = args.inputs[0];
  const Array& w = args.inputs[1];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  std::vector<Array> cts = vjp_util::none(args);
  // With nothing to sum over (or nothing to sum into) both cotangents are zero; the
  // transposed convolutions would also reject the empty windows.
  bool empty = x.size() == 0 || w.size() == 0 || g.size() == 0;
  if (args.wanted[0]) {
    cts[0] = empty ? zeros_like(x, args.site) : conv_lhs_cotangent(g, x, w, p, args.site);
  }
  if (args.wanted[1]) {
    cts[1] = empty ? zeros_like(w, args.site) : conv_rhs_cotangent(g, x, w, p, args.site);
  }
  return cts;
}

}  // namespace

void register_vjp_contract(PrimTable& table) {
  table[prim::dot_general].vjp = dot_general_vjp;
  table[prim::conv_general_dilated].vjp = conv_vjp;
}

}  // namespace kiln
