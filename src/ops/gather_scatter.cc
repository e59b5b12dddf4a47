// jax.lax.gather and scatter with dimension numbers (see kiln/gather_scatter.h), composed
// from the one-axis gather / scatter primitives on the flattened operand: every window
// element's flat position is its window's start (from the indices, clamped or checked per
// `mode`) plus its offset in the window (an iota), dotted with the operand's strides.
// Being ops, they differentiate, batch and compile through the primitives they bind.
#include "kiln/gather_scatter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/dtype_info.h"
#include "ops/op_util.h"
#include "prims/ids/index.h"

namespace kiln::lax {
namespace {

bool contains(const Dims& dims, int64_t value) {
  return std::find(dims.begin(), dims.end(), value) != dims.end();
}

int64_t position_of(const Dims& dims, int64_t value) {
  auto found = std::find(dims.begin(), dims.end(), value);
  return found == dims.end() ? -1 : static_cast<int64_t>(found - dims.begin());
}

// `dims` (a field of the dimension numbers) holds distinct axes in [0, limit), ascending
// where `sorted`.
void check_axes(std::string_view op, std::string_view field, const Dims& dims, int64_t limit,
                bool sorted, CallSite site) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= limit) {
      fail(site, fmt::format("{}: {} = {} names axis {}, outside [0, {})", op, field,
                             dims_to_string(dims), dims[i], limit));
    }
    for (size_t j = 0; j < i; ++j) {
      if (dims[j] == dims[i] || (sorted && dims[j] > dims[i])) {
        fail(site, fmt::format("{}: {} = {} must hold distinct axes{}", op, field,
                               dims_to_string(dims), sorted ? " in ascending order" : ""));
      }
    }
  }
}

// What gather and scatter share: the operand, the indices (index vectors along the last
// axis) and, per operand axis, where each window starts and how large it is.
struct WindowSpec {
  std::string_view op;
  const Array& operand;
  const Array& indices;
  const Dims& start_map;         // operand axis of each index-vector entry
  const Dims& operand_batching;  // operand axes paired with...
  const Dims& indices_batching;  // ...these axes of the indices
  Dims window_sizes;             // per operand axis
  IndexMode mode;
};

void check_common(const WindowSpec& w, CallSite site) {
  require_index_operands(w.op, w.operand, w.indices, site);
  if (w.indices.rank() == 0) {
    fail(site,
         fmt::format("{}: indices must have at least one axis (the index vectors lie "
                     "along the last), got {}",
                     w.op, w.indices.aval().to_string()),
         "for a single start, pass shape [k]; for n starts of one axis, shape [n, 1]");
  }
  int64_t rank = w.operand.rank();
  int64_t vector = w.indices.shape()[w.indices.rank() - 1];
  if (vector != static_cast<int64_t>(w.start_map.size())) {
    fail(site, fmt::format("{}: the index vectors (last axis of indices {}) have {} entries, "
                           "but the start map {} names {} operand axes",
                           w.op, w.indices.aval().to_string(), vector, dims_to_string(w.start_map),
                           w.start_map.size()));
  }
  check_axes(w.op, "the start map", w.start_map, rank, false, site);
  check_axes(w.op, "operand_batching_dims", w.operand_batching, rank, true, site);
  check_axes(w.op, "the indices' batching dims", w.indices_batching, w.indices.rank() - 1, false,
             site);
  if (w.operand_batching.size() != w.indices_batching.size()) {
    fail(site,
         fmt::format("{}: operand_batching_dims {} and the indices' batching dims {} must "
                     "pair up (same length)",
                     w.op, dims_to_string(w.operand_batching), dims_to_string(w.indices_batching)));
  }
  for (size_t i = 0; i < w.operand_batching.size(); ++i) {
    int64_t d = w.operand_batching[i], b = w.indices_batching[i];
    if (contains(w.start_map, d)) {
      fail(site, fmt::format("{}: operand axis {} is both a batching axis and in the start map",
                             w.op, d));
    }
    if (w.operand.shape()[d] != w.indices.shape()[b]) {
      fail(site, fmt::format("{}: batching operand axis {} (size {}) pairs with indices axis {} "
                             "(size {}); their sizes must be equal",
                             w.op, d, w.operand.shape()[d], b, w.indices.shape()[b]));
    }
  }
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = w.window_sizes[static_cast<size_t>(d)];
    if (size < 0 || size > w.operand.shape()[d]) {
      fail(site, fmt::format("{}: the window along operand axis {} has size {}, outside [0, {}] "
                             "(operand {})",
                             w.op, d, size, w.operand.shape()[d], w.operand.aval().to_string()));
    }
  }
}

// The flat position in the operand of every element of `target` (a gather's output, or a
// scatter's updates): `batch_axes` are target's axes that run over the index vectors (the
// indices' axes but the last, in order); `window_axis[d]` is target's axis that runs over
// the window along operand axis d, or -1. Where a window does not fit, the position is
// `outside` (kError, kFill) and `fits` is false; kClip moves the window inside instead.
struct FlatPositions {
  Array position;  // i64, target's shape
  Array fits;      // bool, target's shape; undefined when every window fits by construction
};

FlatPositions flat_positions(const WindowSpec& w, const Shape& target, const Dims& batch_axes,
                             const std::vector<int64_t>& window_axis, int64_t outside,
                             CallSite site) {
  const Shape& operand = w.operand.shape();
  int64_t rank = operand.rank();
  Dims strides = operand.strides();
  Array indices = astype(w.indices, DType::i64, site);
  int64_t last = indices.rank() - 1;
  Dims batch_dims;
  for (int64_t a = 0; a < last; ++a) batch_dims.push_back(indices.shape()[a]);
  Shape batch(batch_dims);
  Array start = zeros(batch, DType::i64, nullptr, site);
  Array fits;
  for (int64_t d = 0; d < rank; ++d) {
    Array from;
    int64_t k = position_of(w.start_map, d);
    int64_t b = position_of(w.operand_batching, d);
    if (k >= 0) {
      Dims begin(static_cast<size_t>(indices.rank()), 0);
      Dims end = indices.shape().dims();
      begin[static_cast<size_t>(last)] = k;
      end[static_cast<size_t>(last)] = k + 1;
      Array column = reshape(slice(indices, begin, end, {}, site), batch, site);
      int64_t upper = operand[d] - w.window_sizes[static_cast<size_t>(d)];
      Array clipped = clip(column, 0, static_cast<double>(upper), site);
      if (w.mode != IndexMode::kClip) {
        Array inside = equal(column, clipped, site);
        fits = fits.defined() ? bitwise_and(fits, inside, site) : inside;
      }
      from = w.mode == IndexMode::kClip ? clipped : column;
    } else if (b >= 0) {
      from = iota(batch, DType::i64, w.indices_batching[static_cast<size_t>(b)], nullptr, site);
    }
    if (from.defined() && strides[static_cast<size_t>(d)] != 0) {
      start = add(start,
                  mul(from,
                      scalar(static_cast<double>(strides[static_cast<size_t>(d)]), DType::i64,
                             nullptr, site),
                      site),
                  site);
    }
  }
  Array position = broadcast_in_dim(start, target, batch_axes, site);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t axis = window_axis[static_cast<size_t>(d)];
    if (axis < 0) continue;
    Array offset = iota(target, DType::i64, axis, nullptr, site);
    position = add(
        position,
        mul(offset,
            scalar(static_cast<double>(strides[static_cast<size_t>(d)]), DType::i64, nullptr, site),
            site),
        site);
  }
  FlatPositions result{position, Array()};
  if (fits.defined()) {
    result.fits = broadcast_in_dim(fits, target, batch_axes, site);
    result.position =
        where(result.fits, position,
              full(target, static_cast<double>(outside), DType::i64, nullptr, site), site);
  }
  return result;
}

double default_fill(DType dtype) {
  if (is_floating(dtype)) return std::numeric_limits<double>::quiet_NaN();
  if (dtype == DType::bool_) return 1;
  IntInfo info = iinfo(dtype);
  return static_cast<double>(is_signed_integer(dtype) ? info.min : info.max);
}

// ----- scatter ---------------------------------------------------------------------------

enum class Combine { kSet, kAdd, kMul, kMin, kMax };

std::string_view name_of(Combine combine) {
  switch (combine) {
    case Combine::kSet:
      return "scatter";
    case Combine::kAdd:
      return "scatter_add";
    case Combine::kMul:
      return "scatter_mul";
    case Combine::kMin:
      return "scatter_min";
    case Combine::kMax:
      return "scatter_max";
  }
  return "scatter";
}

// A flat one-axis scatter (set or add) of `values` at `positions` into `base`; positions
// past the end are dropped (kFill), -1 fails (kError).
Array flat_scatter(PrimId prim, const Array& base, const Array& positions, const Array& values,
                   IndexMode mode, CallSite site) {
  return bind1(
      prim, {base, positions, values},
      ScatterParams{0, 0, mode == IndexMode::kError ? IndexMode::kError : IndexMode::kFill}, site);
}

// Inclusive products within runs of equal keys (keys sorted), by doubling: after the step
// of shift s each element holds the product of up to 2s elements of its run ending at it.
Array run_products(const Array& keys, Array values, CallSite site) {
  int64_t n = values.shape()[0];
  for (int64_t shift = 1; shift < n; shift *= 2) {
    Array earlier_values = slice(values, {0}, {n - shift}, {}, site);
    Array earlier_keys = slice(keys, {0}, {n - shift}, {}, site);
    Array same = equal(slice(keys, {shift}, {n}, {}, site), earlier_keys, site);
    Array factor = where(same, earlier_values, ones_like(earlier_values, site), site);
    Array head = slice(values, {0}, {shift}, {}, site);
    Array tail = mul(slice(values, {shift}, {n}, {}, site), factor, site);
    values = concatenate({head, tail}, 0, site);
  }
  return values;
}

Array scatter_with(Combine combine, const Array& operand, const Array& indices,
                   const Array& updates, const ScatterDimensionNumbers& dn, IndexMode mode,
                   CallSite site) {
  std::string_view op = name_of(combine);
  if (!updates.defined()) fail(site, fmt::format("{}: updates is an empty Array", op));
  int64_t rank = operand.defined() ? operand.rank() : 0;
  check_axes(op, "inserted_window_dims", dn.inserted_window_dims, rank, true, site);
  check_axes(op, "update_window_dims", dn.update_window_dims, updates.rank(), true, site);
  // The window's operand axes: those neither inserted nor batching, in order.
  Dims window;
  for (int64_t d = 0; d < rank; ++d) {
    if (!contains(dn.inserted_window_dims, d) && !contains(dn.operand_batching_dims, d)) {
      window.push_back(d);
    }
  }
  if (window.size() != dn.update_window_dims.size()) {
    fail(site, fmt::format("{}: update_window_dims {} name {} axes, but the operand {} has {} "
                           "window axes (those not in inserted_window_dims {} or "
                           "operand_batching_dims {})",
                           op, dims_to_string(dn.update_window_dims), dn.update_window_dims.size(),
                           operand.aval().to_string(), window.size(),
                           dims_to_string(dn.inserted_window_dims),
                           dims_to_string(dn.operand_batching_dims)));
  }
  Dims sizes(static_cast<size_t>(rank), 1);
  std::vector<int64_t> window_axis(static_cast<size_t>(rank), -1);
  for (size_t i = 0; i < window.size(); ++i) {
    sizes[static_cast<size_t>(window[i])] = updates.shape()[dn.update_window_dims[i]];
    window_axis[static_cast<size_t>(window[i])] = dn.update_window_dims[i];
  }
  WindowSpec spec{op,
                  operand,
                  indices,
                  dn.scatter_dims_to_operand_dims,
                  dn.operand_batching_dims,
                  dn.scatter_indices_batching_dims,
                  sizes,
                  mode};
  check_common(spec, site);
  for (int64_t d : dn.inserted_window_dims) {
    if (contains(dn.operand_batching_dims, d)) {
      fail(site, fmt::format("{}: operand axis {} is both inserted and a batching axis", op, d));
    }
  }
  if (updates.dtype() != operand.dtype()) {
    fail(site,
         fmt::format("{}: updates {} must have the operand's dtype {}", op,
                     updates.aval().to_string(), dtype_name(operand.dtype())),
         "astype the updates first");
  }
  // The updates' other axes run over the index vectors, in the indices' order and sizes.
  Dims batch_axes;
  for (int64_t a = 0; a < updates.rank(); ++a) {
    if (!contains(dn.update_window_dims, a)) batch_axes.push_back(a);
  }
  const Shape& index_shape = indices.shape();
  bool batch_matches = static_cast<int64_t>(batch_axes.size()) == index_shape.rank() - 1;
  for (size_t j = 0; batch_matches && j < batch_axes.size(); ++j) {
    batch_matches = updates.shape()[batch_axes[j]] == index_shape[static_cast<int64_t>(j)];
  }
  if (!batch_matches) {
    fail(site, fmt::format("{}: updates {} do not fit indices {}: the updates' axes outside "
                           "update_window_dims {} must be the indices' axes but the last",
                           op, updates.aval().to_string(), indices.aval().to_string(),
                           dims_to_string(dn.update_window_dims)));
  }
  int64_t n = operand.size();
  if (updates.size() == 0) return operand;
  FlatPositions flat = flat_positions(spec, updates.shape(), batch_axes, window_axis,
                                      mode == IndexMode::kError ? -1 : n, site);
  Array positions = reshape(flat.position, Shape{updates.size()}, site);
  Array values = reshape(updates, Shape{updates.size()}, site);
  Array base = reshape(operand, Shape{n}, site);
  Array result;
  switch (combine) {
    case Combine::kSet:
      result = flat_scatter(prim::scatter, base, positions, values, mode, site);
      break;
    case Combine::kAdd:
      result = flat_scatter(prim::scatter_add, base, positions, values, mode, site);
      break;
    case Combine::kMin:
    case Combine::kMax: {
      // Sorted by position and then by value (for min, by the negated value), the last
      // update of each position is its extreme, and scatter keeps the last. NaN sorts last,
      // so it wins, as XLA's min and max propagate it.
      bool is_max = combine == Combine::kMax;
      bool negate = !is_max && is_floating(values.dtype());
      Array key = negate ? neg(values, site) : values;
      Array sorted_operands[] = {positions, key, values};
      std::vector<Array> sorted = sort(sorted_operands, 0, 2, site);
      Array picks = sorted[2];
      Array order = sorted[0];
      if (!is_max && !negate) {
        // Integers: the smallest is first in its run; reversed, it is last.
        picks = flip(picks, {0}, site);
        order = flip(order, {0}, site);
      }
      Array extremes = flat_scatter(prim::scatter, base, order, picks, mode, site);
      result = is_max ? maximum(base, extremes, site) : minimum(base, extremes, site);
      break;
    }
    case Combine::kMul: {
      Array sorted_operands[] = {positions, values};
      std::vector<Array> sorted = sort(sorted_operands, 0, 1, site);
      Array products = run_products(sorted[0], sorted[1], site);
      Array factors =
          flat_scatter(prim::scatter, ones_like(base, site), sorted[0], products, mode, site);
      result = mul(base, factors, site);
      break;
    }
  }
  return reshape(result, operand.shape(), site);
}

}  // namespace

Array gather(const Array& operand, const Array& start_indices, const GatherDimensionNumbers& dn,
             Dims slice_sizes, IndexMode mode, std::optional<double> fill_value, CallSite site) {
  std::string_view op = "gather";
  int64_t rank = operand.defined() ? operand.rank() : 0;
  if (static_cast<int64_t>(slice_sizes.size()) != rank) {
    fail(site,
         fmt::format("gather: slice_sizes {} has {} entries for an operand of rank {}",
                     dims_to_string(slice_sizes), slice_sizes.size(), rank),
         "one size per operand axis");
  }
  WindowSpec spec{op,
                  operand,
                  start_indices,
                  dn.start_index_map,
                  dn.operand_batching_dims,
                  dn.start_indices_batching_dims,
                  slice_sizes,
                  mode};
  check_common(spec, site);
  check_axes(op, "collapsed_slice_dims", dn.collapsed_slice_dims, rank, true, site);
  for (int64_t d : dn.collapsed_slice_dims) {
    if (slice_sizes[static_cast<size_t>(d)] != 1) {
      fail(site, fmt::format("gather: collapsed axis {} must have slice size 1, not {}", d,
                             slice_sizes[static_cast<size_t>(d)]));
    }
    if (contains(dn.operand_batching_dims, d)) {
      fail(site, fmt::format("gather: operand axis {} is both collapsed and a batching axis", d));
    }
  }
  for (int64_t d : dn.operand_batching_dims) {
    if (slice_sizes[static_cast<size_t>(d)] != 1) {
      fail(site, fmt::format("gather: batching axis {} must have slice size 1, not {}", d,
                             slice_sizes[static_cast<size_t>(d)]));
    }
  }
  Dims window;
  for (int64_t d = 0; d < rank; ++d) {
    if (!contains(dn.collapsed_slice_dims, d) && !contains(dn.operand_batching_dims, d)) {
      window.push_back(d);
    }
  }
  int64_t batch_rank = start_indices.rank() - 1;
  int64_t out_rank = batch_rank + static_cast<int64_t>(window.size());
  if (window.size() != dn.offset_dims.size()) {
    fail(site, fmt::format("gather: offset_dims {} name {} output axes, but the window has {} "
                           "(the operand's axes not collapsed or batching)",
                           dims_to_string(dn.offset_dims), dn.offset_dims.size(), window.size()));
  }
  check_axes(op, "offset_dims", dn.offset_dims, out_rank, true, site);
  Dims out_dims, batch_axes;
  std::vector<int64_t> window_axis(static_cast<size_t>(rank), -1);
  int64_t next_batch = 0;
  for (int64_t o = 0; o < out_rank; ++o) {
    int64_t i = position_of(dn.offset_dims, o);
    if (i >= 0) {
      int64_t d = window[static_cast<size_t>(i)];
      out_dims.push_back(slice_sizes[static_cast<size_t>(d)]);
      window_axis[static_cast<size_t>(d)] = o;
    } else {
      out_dims.push_back(start_indices.shape()[next_batch++]);
      batch_axes.push_back(o);
    }
  }
  Shape out(out_dims);
  if (out.num_elements() == 0) return zeros(out, operand.dtype(), nullptr, site);
  FlatPositions flat = flat_positions(spec, out, batch_axes, window_axis, -1, site);
  // kFill's windows that do not fit were given -1; read them clamped, then fill.
  IndexMode read = mode == IndexMode::kError ? IndexMode::kError : IndexMode::kClip;
  Array values = bind1(prim::gather, {reshape(operand, Shape{operand.size()}, site), flat.position},
                       GatherParams{0, 0, read}, site);
  if (mode != IndexMode::kFill) return values;
  double fill = fill_value.value_or(default_fill(operand.dtype()));
  return where(flat.fits, values, full(out, fill, operand.dtype(), nullptr, site), site);
}

Array scatter(const Array& operand, const Array& scatter_indices, const Array& updates,
              const ScatterDimensionNumbers& dimension_numbers, IndexMode mode, CallSite site) {
  return scatter_with(Combine::kSet, operand, scatter_indices, updates, dimension_numbers, mode,
                      site);
}
Array scatter_add(const Array& operand, const Array& scatter_indices, const Array& updates,
                  const ScatterDimensionNumbers& dimension_numbers, IndexMode mode, CallSite site) {
  return scatter_with(Combine::kAdd, operand, scatter_indices, updates, dimension_numbers, mode,
                      site);
}
Array scatter_mul(const Array& operand, const Array& scatter_indices, const Array& updates,
                  const ScatterDimensionNumbers& dimension_numbers, IndexMode mode, CallSite site) {
  return scatter_with(Combine::kMul, operand, scatter_indices, updates, dimension_numbers, mode,
                      site);
}
Array scatter_min(const Array& operand, const Array& scatter_indices, const Array& updates,
                  const ScatterDimensionNumbers& dimension_numbers, IndexMode mode, CallSite site) {
  return scatter_with(Combine::kMin, operand, scatter_indices, updates, dimension_numbers, mode,
                      site);
}
Array scatter_max(const Array& operand, const Array& scatter_indices, const Array& updates,
                  const ScatterDimensionNumbers& dimension_numbers, IndexMode mode, CallSite site) {
  return scatter_with(Combine::kMax, operand, scatter_indices, updates, dimension_numbers, mode,
                      site);
}

}  // namespace kiln::lax
