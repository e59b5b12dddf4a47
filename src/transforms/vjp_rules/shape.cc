// VJP rules of the layout family: each is the layout op's transpose (a broadcast's is a
// sum, a slice's is a pad, a pad's is a slice, a concatenation's is one slice per operand).
// Start-index operands (dynamic_slice, dynamic_update_slice) are integers and get no
// cotangent; the clamping of starts is the same forwards and backwards.
#include <algorithm>

#include "prims/bind.h"
#include "prims/ids/shape.h"
#include "transforms/vjp_rules/vjp_rules.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

std::vector<Array> reshape_vjp(const VjpArgs& args) {
  return {reshape(vjp_util::cotangent_or_zeros(args, 0), args.inputs[0].shape(), args.site)};
}

std::vector<Array> transpose_vjp(const VjpArgs& args) {
  const Dims& permutation = std::get<TransposeParams>(args.params).permutation;
  Dims inverse(permutation.size(), 0);
  for (size_t i = 0; i < permutation.size(); ++i) {
    inverse[static_cast<size_t>(permutation[i])] = static_cast<int64_t>(i);
  }
  return {transpose(vjp_util::cotangent_or_zeros(args, 0), inverse, args.site)};
}

// Sums the cotangent over the axes the broadcast created and over the operand's size-1
// axes it stretched.
std::vector<Array> broadcast_in_dim_vjp(const VjpArgs& args) {
  const auto& p = std::get<BroadcastInDimParams>(args.params);
  const Shape& operand = args.inputs[0].shape();
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  Dims summed;
  std::vector<bool> kept(static_cast<size_t>(p.shape.rank()), false);
  for (size_t i = 0; i < p.broadcast_dimensions.size(); ++i) {
    int64_t axis = p.broadcast_dimensions[i];
    kept[static_cast<size_t>(axis)] = true;
    if (operand[static_cast<int64_t>(i)] == 1 && p.shape[axis] != 1) summed.push_back(axis);
  }
  for (int64_t axis = 0; axis < p.shape.rank(); ++axis) {
    if (!kept[static_cast<size_t>(axis)]) summed.push_back(axis);
  }
  std::sort(summed.begin(), summed.end());
  Array reduced = summed.empty() ? g : sum(g, summed, /*keepdims=*/false, args.site);
  return {reshape(reduced, operand, args.site)};
}

// Zeros around the slice and between its strided elements: pad with low = start, interior
// = stride - 1, and high = whatever follows the last element taken.
std::vector<Array> slice_vjp(const VjpArgs& args) {
  const auto& p = std::get<SliceParams>(args.params);
  const Shape& operand = args.inputs[0].shape();
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  Dims low, high, interior;
  for (int64_t axis = 0; axis < operand.rank(); ++axis) {
    auto k = static_cast<size_t>(axis);
    int64_t stride = p.strides.empty() ? 1 : p.strides[k];
    int64_t count = g.shape()[axis];
    // (count - 1) * stride < limit - start, so this cannot overflow.
    int64_t end = count == 0 ? p.start_indices[k] : p.start_indices[k] + (count - 1) * stride + 1;
    low.push_back(p.start_indices[k]);
    high.push_back(operand[axis] - end);
    // With fewer than two elements the stride leaves no gap (and may be huge).
    interior.push_back(count > 1 ? stride - 1 : 0);
  }
  return {pad(g, low, high, interior, 0.0, args.site)};
}

std::vector<Array> dynamic_slice_vjp(const VjpArgs& args) {
  std::vector<Array> cts = vjp_util::none(args);
  if (args.wanted[0]) {
    const Array& x = args.inputs[0];
    // The primitives, not the ops: the start is the primitive's, whose negative values
    // clamp (the ops count them from the end first, as JAX's wrappers do).
    cts[0] =
        bind1(prim::dynamic_update_slice,
              {zeros_like(x, args.site), vjp_util::cotangent_or_zeros(args, 0), args.inputs[1]},
              NoParams{}, args.site);
  }
  return cts;
}

// The operand's cotangent is the result's with the overwritten window zeroed; the update's
// is that window.
std::vector<Array> dynamic_update_slice_vjp(const VjpArgs& args) {
  const Array& update = args.inputs[1];
  const Array& start = args.inputs[2];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  std::vector<Array> cts = vjp_util::none(args);
  if (args.wanted[0]) {
    cts[0] = bind1(prim::dynamic_update_slice, {g, zeros_like(update, args.site), start},
                   NoParams{}, args.site);
  }
  if (args.wanted[1]) {
    cts[1] = bind1(prim::dynamic_slice, {g, start}, DynamicSliceParams{update.shape().dims()},
                   args.site);
  }
  return cts;
}

std::vector<Array> concatenate_vjp(const VjpArgs& args) {
  int64_t dimension = std::get<ConcatenateParams>(args.params).dimension;
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  std::vector<Array> cts = vjp_util::none(args);
  Dims start(static_cast<size_t>(g.rank()), 0);
  Dims limit = g.shape().dims();
  int64_t offset = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    int64_t size = args.inputs[i].shape()[dimension];
    if (args.wanted[i]) {
      start[static_cast<size_t>(dimension)] = offset;
      limit[static_cast<size_t>(dimension)] = offset + size;
      cts[i] = slice(g, start, limit, {}, args.site);
    }
    offset += size;
  }
  return cts;
}

// Along one axis of a pad: operand elements [first, last) land inside the result, element
// i at low + i * step. Computed in 128 bits: low, interior and step may be huge where
// they cancel out (the primitive allows that).
struct KeptRange {
  int64_t first = 0, last = 0, step = 1;
  int64_t position(int64_t i, int64_t low) const {
    return static_cast<int64_t>(static_cast<__int128>(low) + static_cast<__int128>(i) * step);
  }
};
KeptRange kept_range(int64_t size, int64_t low, int64_t interior, int64_t out_size) {
  KeptRange range;
  __int128 step = static_cast<__int128>(interior) + 1;
  __int128 lo = low;
  __int128 first = lo >= 0 ? 0 : (-lo + step - 1) / step;
  __int128 room = static_cast<__int128>(out_size) - 1 - lo;  // last in-range offset
  __int128 last = room < 0 ? 0 : std::min<__int128>(size, room / step + 1);
  range.first = static_cast<int64_t>(std::min<__int128>(first, size));
  range.last = static_cast<int64_t>(std::max<__int128>(last, range.first));
  range.step = static_cast<int64_t>(step);
  return range;
}

// The operand's cotangent is the strided slice of the result's cotangent at the operand's
// positions, padded with zeros where the pad cropped operand elements away. The padding
// value's cotangent sums the cotangent over the padding cells (found by padding zeros
// with ones, which is exact where subtracting two sums would cancel).
std::vector<Array> pad_vjp(const VjpArgs& args) {
  const auto& p = std::get<PadParams>(args.params);
  const Array& x = args.inputs[0];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  std::vector<Array> cts = vjp_util::none(args);
  if (args.wanted[0]) {
    Dims start, limit, strides, low, high;
    bool any_kept = true;
    for (int64_t axis = 0; axis < x.rank(); ++axis) {
      auto k = static_cast<size_t>(axis);
      KeptRange range = kept_range(x.shape()[axis], p.low[k], p.interior[k], g.shape()[axis]);
      any_kept = any_kept && range.last > range.first;
      if (!any_kept) break;
      start.push_back(range.position(range.first, p.low[k]));
      limit.push_back(range.position(range.last - 1, p.low[k]) + 1);
      strides.push_back(range.last - range.first > 1 ? range.step : 1);
      low.push_back(range.first);
      high.push_back(x.shape()[axis] - range.last);
    }
    cts[0] = any_kept
                 ? pad(slice(g, start, limit, strides, args.site), low, high, {}, 0.0, args.site)
                 : zeros_like(x, args.site);
  }
  if (args.wanted[1]) {
    Array padding_cells = pad(zeros_like(x, args.site), p.low, p.high, p.interior, 1.0, args.site);
    Array total = sum(mul(g, padding_cells, args.site), {}, /*keepdims=*/false, args.site);
    cts[1] = reshape(total, args.inputs[1].shape(), args.site);
  }
  return cts;
}

}  // namespace

void register_vjp_shape(PrimTable& table) {
  table[prim::reshape].vjp = reshape_vjp;
  table[prim::transpose].vjp = transpose_vjp;
  table[prim::broadcast_in_dim].vjp = broadcast_in_dim_vjp;
  table[prim::slice].vjp = slice_vjp;
  table[prim::dynamic_slice].vjp = dynamic_slice_vjp;
  table[prim::dynamic_update_slice].vjp = dynamic_update_slice_vjp;
  table[prim::concatenate].vjp = concatenate_vjp;
  table[prim::pad].vjp = pad_vjp;
}

}  // namespace kiln
