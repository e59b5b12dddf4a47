// Batching rules of the layout primitives. Most keep the batch where it already is and
// bind the same primitive with params that cover the batch axis too (a full-range slice,
// a zero pad, an extra broadcast dimension), so no operand is transposed. Per-example
// start indices of dynamic_slice and dynamic_update_slice become gathers and scatters
// (see the comments there); a per-example padding value of pad becomes a select.
#include <algorithm>

#include "base/check.h"
#include "prims/ids/index.h"
#include "prims/ids/shape.h"
#include "transforms/batch_rules/batch_rules.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln {
namespace {

using batch_util::batch_at;

using batch_util::batch_first;

// A per-axis params list with `value` inserted for the batch axis `at`.
Dims with_entry(Dims list, int64_t at, int64_t value) {
  list.insert_at(static_cast<size_t>(at), value);
  return list;
}

// The first batched operand's batch axis: where variadic rules gather every operand's.
int64_t first_batched(const BatchArgs& args) {
  for (int64_t dim : args.dims) {
    if (dim != kNotBatched) return dim;
  }
  KILN_CHECK(false, "a batching rule ran without a batched operand");
  return kNotBatched;
}

// The batch gets a broadcast dimension of its own, placed right after the output axis of
// the operand axis before it, so broadcast_dimensions stay increasing and the operand is
// not transposed.
BatchResult broadcast_in_dim_rule(const BatchArgs& args) {
  const auto& p = std::get<BroadcastInDimParams>(args.params);
  int64_t d = args.dims[0];
  int64_t out_dim = d == 0 ? 0 : p.broadcast_dimensions[static_cast<size_t>(d - 1)] + 1;
  Dims dims;
  for (int64_t axis : p.broadcast_dimensions) dims.push_back(axis < out_dim ? axis : axis + 1);
  dims.insert_at(static_cast<size_t>(d), out_dim);
  Shape shape(with_entry(p.shape.dims(), out_dim, args.size));
  Array out = bind1(prim::broadcast_in_dim, {args.inputs[0]},
                    BroadcastInDimParams{std::move(shape), std::move(dims)}, args.site);
  return BatchResult{{out}, {out_dim}};
}

// Row-major order mixes the batch into the example's elements unless it leads, so it is
// moved first (free when it already leads).
BatchResult reshape_rule(const BatchArgs& args) {
  const auto& p = std::get<ReshapeParams>(args.params);
  Array x = batch_first(args.inputs[0], args.dims[0], args.size, args.site);
  Shape shape(with_entry(p.new_sizes.dims(), 0, args.size));
  return batch_util::first(bind1(prim::reshape, {x}, ReshapeParams{shape}, args.site));
}

// The batch stays on its axis; the example's axes around it are permuted as before.
BatchResult transpose_rule(const BatchArgs& args) {
  const Dims& permutation = std::get<TransposeParams>(args.params).permutation;
  int64_t d = args.dims[0];
  Dims perm;
  for (int64_t axis : permutation) perm.push_back(axis < d ? axis : axis + 1);
  perm.insert_at(static_cast<size_t>(d), d);
  return BatchResult{{transpose(args.inputs[0], perm, args.site)}, {d}};
}

// The whole batch axis is kept.
BatchResult slice_rule(const BatchArgs& args) {
  const auto& p = std::get<SliceParams>(args.params);
  int64_t d = args.dims[0];
  SliceParams batched{with_entry(p.start_indices, d, 0), with_entry(p.limit_indices, d, args.size),
                      p.strides.empty() ? Dims{} : with_entry(p.strides, d, 1)};
  return BatchResult{{bind1(prim::slice, {args.inputs[0]}, batched, args.site)}, {d}};
}

BatchResult stop_gradient_rule(const BatchArgs& args) {
  Array out = bind1(prim::stop_gradient, {args.inputs[0]}, NoParams{}, args.site);
  return BatchResult{{out}, {args.dims[0]}};
}

// Every operand's batch on the first batched operand's axis (unbatched ones broadcast:
// the result holds a copy of them per example anyway).
BatchResult concatenate_rule(const BatchArgs& args) {
  int64_t dimension = std::get<ConcatenateParams>(args.params).dimension;
  int64_t d = first_batched(args);
  std::vector<Array> operands;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    operands.push_back(batch_at(args.inputs[i], args.dims[i], d, args.size, args.site));
  }
  ConcatenateParams batched{dimension < d ? dimension : dimension + 1};
  return BatchResult{{bind1(prim::concatenate, operands, batched, args.site)}, {d}};
}

// A shared padding value pads the batch axis by nothing. A per-example one cannot be a
// pad operand (it must be a scalar), so the examples are padded with zeros and the
// padding cells, found by padding a false array with true, are then selected from each
// example's value: exact, and one pass over the result.
BatchResult pad_rule(const BatchArgs& args) {
  const auto& p = std::get<PadParams>(args.params);
  const Array& x = args.inputs[0];
  int64_t dx = args.dims[0], dv = args.dims[1];
  CallSite site = args.site;
  int64_t d = dx == kNotBatched ? 0 : dx;
  PadParams batched{with_entry(p.low, d, 0), with_entry(p.high, d, 0),
                    with_entry(p.interior, d, 0)};
  if (dv == kNotBatched) {
    return BatchResult{{bind1(prim::pad, {x, args.inputs[1]}, batched, site)}, {d}};
  }
  Device* device = device_of(x);
  Array zero = zeros(Shape{}, x.dtype(), device, site);
  Array padded = dx == kNotBatched ? expand_dims(bind1(prim::pad, {x, zero}, p, site), 0, site)
                                   : bind1(prim::pad, {x, zero}, batched, site);
  Shape example = x.shape();
  if (dx != kNotBatched) example.dims().erase_at(static_cast<size_t>(dx));
  Array is_padding = bind1(
      prim::pad,
      {zeros(example, DType::bool_, device, site), scalar(1, DType::bool_, device, site)}, p, site);
  // [B] -> [1, .., B, .., 1] with the batch on axis d.
  Dims value_sizes(static_cast<size_t>(padded.rank()), 1);
  value_sizes[static_cast<size_t>(d)] = args.size;
  Array values = reshape(args.inputs[1], Shape(value_sizes), site);
  Array out = where(expand_dims(is_padding, d, site), values, padded, site);
  return BatchResult{{out}, {d}};
}

// ----- dynamic_slice and dynamic_update_slice -------------------------------------------

// A start-index vector with a 0 inserted for the batch axis `at` (the batch axis is taken
// whole, so its start clamps to 0 anyway).
Array with_zero_start(const Array& start, int64_t at, CallSite site) {
  int64_t rank = start.shape()[0];
  std::vector<Array> parts;
  if (at > 0) parts.push_back(slice(start, {0}, {at}, {}, site));
  parts.push_back(zeros(Shape{1}, start.dtype(), device_of(start), site));
  if (at < rank) parts.push_back(slice(start, {at}, {rank}, {}, site));
  return concatenate(parts, 0, site);
}

// The positions a window of `window` elements covers along axis `axis` of an axis of
// `axis_size`, per example: [B, window] i64 from the batch-leading starts [B, rank],
// clamped as the primitives clamp (starts are read as int64 there too).
Array window_positions(const Array& starts, int64_t axis, int64_t axis_size, int64_t window,
                       CallSite site) {
  int64_t size = starts.shape()[0];
  Device* device = device_of(starts);
  Array start = astype(slice(starts, {0, axis}, {size, axis + 1}, {}, site), DType::i64, site);
  start = minimum(maximum(start, scalar(0, DType::i64, device, site), site),
                  scalar(static_cast<double>(axis_size - window), DType::i64, device, site), site);
  return add(start, iota(Shape{1, window}, DType::i64, 1, device, site), site);
}

// The axes whose window is shorter than the axis: the only ones a start moves (a full
// window clamps to start 0).
Dims moving_axes(const Shape& example, const Dims& window) {
  Dims axes;
  for (int64_t axis = 0; axis < example.rank(); ++axis) {
    if (window[static_cast<size_t>(axis)] < example[axis]) axes.push_back(axis);
  }
  return axes;
}

// With shared starts the batch axis is sliced whole. Per-example starts are a take of
// each moving axis's window positions, one gather per axis with the batch as gather's
// batch dimension: exact, no loop, and each gather reads only what the previous kept.
BatchResult dynamic_slice_rule(const BatchArgs& args) {
  const Dims& sizes = std::get<DynamicSliceParams>(args.params).slice_sizes;
  const Array& x = args.inputs[0];
  int64_t dx = args.dims[0], ds = args.dims[1];
  CallSite site = args.site;
  if (ds == kNotBatched) {
    Array start = with_zero_start(args.inputs[1], dx, site);
    Array out = bind1(prim::dynamic_slice, {x, start},
                      DynamicSliceParams{with_entry(sizes, dx, args.size)}, site);
    return BatchResult{{out}, {dx}};
  }
  Shape example = x.shape();
  if (dx != kNotBatched) example.dims().erase_at(static_cast<size_t>(dx));
  Dims axes = moving_axes(example, sizes);
  // Every window covers its whole axis: the result is x itself, batched or not.
  if (axes.empty()) return BatchResult{{x}, {dx}};
  Array starts = batch_first(args.inputs[1], ds, args.size, site);
  Array out = x;
  size_t next = 0;
  if (dx == kNotBatched) {
    // The first take on a shared x puts the batch at that axis; it is moved to the front
    // (on the already smaller array) so later takes can pair it with their indices.
    int64_t axis = axes[next++];
    Array positions = window_positions(starts, axis, example[axis], sizes[axis], site);
    out = bind1(prim::gather, {x, positions}, GatherParams{axis, 0, IndexMode::kClip}, site);
    if (next == axes.size()) return BatchResult{{out}, {axis}};
    out = batch_at(out, axis, 0, args.size, site);
  } else {
    out = batch_at(x, dx, 0, args.size, site);
  }
  for (; next < axes.size(); ++next) {
    int64_t axis = axes[next];
    Array positions = window_positions(starts, axis, example[axis], sizes[axis], site);
    out = bind1(prim::gather, {out, positions}, GatherParams{axis + 1, 1, IndexMode::kClip}, site);
  }
  return batch_util::first(out);
}

// With shared starts, x and the update meet on one batch axis, which the update covers
// whole. Per-example starts: the windows are nested takes, one per moving axis (x's rows
// in the window, then their columns in the window, ...); the innermost is replaced by
// the update and each level is scattered back into the one above. Window positions never
// repeat, so every scatter is an exact copy.
BatchResult dynamic_update_slice_rule(const BatchArgs& args) {
  const Array& x = args.inputs[0];
  const Array& update = args.inputs[1];
  int64_t dx = args.dims[0], du = args.dims[1], ds = args.dims[2];
  CallSite site = args.site;
  if (ds == kNotBatched) {
    int64_t d = dx != kNotBatched ? dx : du;
    Array out =
        bind1(prim::dynamic_update_slice,
              {batch_at(x, dx, d, args.size, site), batch_at(update, du, d, args.size, site),
               with_zero_start(args.inputs[2], d, site)},
              NoParams{}, site);
    return BatchResult{{out}, {d}};
  }
  Shape example = x.shape();
  if (dx != kNotBatched) example.dims().erase_at(static_cast<size_t>(dx));
  Shape window = update.shape();
  if (du != kNotBatched) window.dims().erase_at(static_cast<size_t>(du));
  Dims axes = moving_axes(example, window.dims());
  // The update covers x entirely and replaces it.
  if (axes.empty()) return BatchResult{{update}, {du}};
  Array starts = batch_first(args.inputs[2], ds, args.size, site);
  std::vector<Array> positions;
  for (int64_t axis : axes) {
    positions.push_back(window_positions(starts, axis, example[axis], window[axis], site));
  }
  auto params = [&](size_t level) { return GatherParams{axes[level] + 1, 1, IndexMode::kClip}; };
  // levels[k]: x restricted to the windows of the first k moving axes.
  std::vector<Array> levels{batch_first(x, dx, args.size, site)};
  for (size_t k = 0; k + 1 < axes.size(); ++k) {
    levels.push_back(bind1(prim::gather, {levels[k], positions[k]}, params(k), site));
  }
  Array inner = batch_first(update, du, args.size, site);
  for (size_t k = axes.size(); k-- > 0;) {
    GatherParams p = params(k);
    inner = bind1(prim::scatter, {levels[k], positions[k], inner},
                  ScatterParams{p.axis, p.batch_dims, p.mode}, site);
  }
  return batch_util::first(inner);
}

}  // namespace

void register_batch_shape(PrimTable& table) {
  table[prim::broadcast_in_dim].batch = broadcast_in_dim_rule;
  table[prim::reshape].batch = reshape_rule;
  table[prim::transpose].batch = transpose_rule;
  table[prim::slice].batch = slice_rule;
  table[prim::dynamic_slice].batch = dynamic_slice_rule;
  table[prim::dynamic_update_slice].batch = dynamic_update_slice_rule;
  table[prim::concatenate].batch = concatenate_rule;
  table[prim::pad].batch = pad_rule;
  table[prim::stop_gradient].batch = stop_gradient_rule;
  // iota has no operands, so it is never batched.
}

}  // namespace kiln
