// jax.numpy's rearranging functions (kiln/array_functions.h) from layout and indexing ops:
// flip, roll, swapaxes, moveaxis, tril, triu, repeat, tile, split, array_split.
#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

Array flattened(const Array& x, CallSite site) {
  return reshape(x, Shape{x.size()}, site);
}

// The triangle of the last two axes whose column - row satisfies `keep` against k.
Array triangle(std::string_view op, const Array& x, int64_t k, bool lower, CallSite site) {
  require_defined(op, x, site);
  if (x.rank() < 2) {
    fail(site,
         fmt::format("{}: the operand must have at least 2 axes (a matrix, or a batch of them), "
                     "got {}",
                     op, x.aval().to_string()));
  }
  int64_t rows = x.shape()[x.rank() - 2], columns = x.shape()[x.rank() - 1];
  Device* device = device_of(x);
  Array row = iota(Shape{rows, columns}, DType::i64, 0, device, site);
  Array column = iota(Shape{rows, columns}, DType::i64, 1, device, site);
  Array offset = sub(column, row, site);
  Array bound = full(Shape{}, static_cast<double>(k), DType::i64, device, site);
  Array keep = lower ? less_equal(offset, bound, site) : greater_equal(offset, bound, site);
  return where(keep, x, zeros_like(x, site), site);
}

}  // namespace

Array flip(const Array& x, Dims axes, CallSite site) {
  require_defined("flip", x, site);
  Array out = x;
  for (int64_t axis : user_axes("flip", axes, x.rank(), site)) {
    int64_t n = x.shape()[axis];
    if (n <= 1) continue;
    // take with the indices n-1 ... 0: its gradient scatters back to the same places.
    Array reversed = sub(full(Shape{}, static_cast<double>(n - 1), DType::i32, device_of(x), site),
                         iota(Shape{n}, DType::i32, 0, device_of(x), site), site);
    out = take(out, reversed, axis, std::nullopt, site);
  }
  return out;
}

Array roll(const Array& x, int64_t shift, std::optional<int64_t> axis, CallSite site) {
  require_defined("roll", x, site);
  if (!axis) return reshape(roll(flattened(x, site), shift, 0, site), x.shape(), site);
  int64_t a = user_axis("roll", *axis, x.rank(), site);
  int64_t n = x.shape()[a];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  return concatenate({slice_axis(x, a, n - s, n, site), slice_axis(x, a, 0, n - s, site)}, a, site);
}

Array roll(const Array& x, Dims shifts, Dims axes, CallSite site) {
  require_defined("roll", x, site);
  if (shifts.size() != axes.size()) {
    fail(site, fmt::format("roll: {} shifts for {} axes; give one shift per axis", shifts.size(),
                           axes.size()));
  }
  Array out = x;
  for (size_t i = 0; i < axes.size(); ++i) out = roll(out, shifts[i], axes[i], site);
  return out;
}

Array swapaxes(const Array& x, int64_t axis1, int64_t axis2, CallSite site) {
  require_defined("swapaxes", x, site);
  int64_t a = user_axis("swapaxes", axis1, x.rank(), site);
  int64_t b = user_axis("swapaxes", axis2, x.rank(), site);
  Dims permutation;
  for (int64_t i = 0; i < x.rank(); ++i) permutation.push_back(i == a ? b : i == b ? a : i);
  return transpose(x, permutation, site);
}

Array moveaxis(const Array& x, int64_t source, int64_t destination, CallSite site) {
  require_defined("moveaxis", x, site);
  int64_t from = user_axis("moveaxis", source, x.rank(), site);
  int64_t to = user_axis("moveaxis", destination, x.rank(), site);
  Dims permutation;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != from) permutation.push_back(i);
  }
  permutation.insert_at(static_cast<size_t>(to), from);
  return transpose(x, permutation, site);
}

Array tril(const Array& x, int64_t k, CallSite site) {
  return triangle("tril", x, k, true, site);
}

Array triu(const Array& x, int64_t k, CallSite site) {
  return triangle("triu", x, k, false, site);
}

Array repeat(const Array& x, int64_t repeats, std::optional<int64_t> axis, CallSite site) {
  require_defined("repeat", x, site);
  if (repeats < 0) fail(site, fmt::format("repeat: repeats must be >= 0, got {}", repeats));
  if (!axis) return repeat(flattened(x, site), repeats, 0, site);
  int64_t a = user_axis("repeat", *axis, x.rank(), site);
  // [.., n, ..] -> [.., n, repeats, ..] (a new axis after `a`) -> [.., n * repeats, ..].
  Shape spread, merged = x.shape();
  Dims operand_axes;
  for (int64_t i = 0; i < x.rank(); ++i) {
    operand_axes.push_back(i <= a ? i : i + 1);
    spread.dims().push_back(x.shape()[i]);
    if (i == a) spread.dims().push_back(repeats);
  }
  merged[a] = x.shape()[a] * repeats;
  return reshape(broadcast_in_dim(x, spread, operand_axes, site), merged, site);
}

Array tile(const Array& x, Dims reps, CallSite site) {
  require_defined("tile", x, site);
  for (int64_t r : reps) {
    if (r < 0) fail(site, fmt::format("tile: every repetition must be >= 0, got {}", r));
  }
  int64_t rank = std::max<int64_t>(static_cast<int64_t>(reps.size()), x.rank());
  Dims counts, sizes;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t from_reps = i - (rank - static_cast<int64_t>(reps.size()));
    int64_t from_x = i - (rank - x.rank());
    counts.push_back(from_reps >= 0 ? reps[static_cast<size_t>(from_reps)] : 1);
    sizes.push_back(from_x >= 0 ? x.shape()[from_x] : 1);
  }
  // [s0, s1] -> [c0, s0, c1, s1] (each axis after its count) -> [c0 * s0, c1 * s1].
  Shape spread, tiled;
  Dims operand_axes;
  for (int64_t i = 0; i < rank; ++i) {
    spread.dims().push_back(counts[i]);
    spread.dims().push_back(sizes[i]);
    operand_axes.push_back(2 * i + 1);
    tiled.dims().push_back(counts[i] * sizes[i]);
  }
  Array lifted = reshape(x, Shape(sizes), site);
  return reshape(broadcast_in_dim(lifted, spread, operand_axes, site), tiled, site);
}

std::vector<Array> split(const Array& x, int64_t sections, int64_t axis, CallSite site) {
  require_defined("split", x, site);
  int64_t a = user_axis("split", axis, x.rank(), site);
  int64_t n = x.shape()[a];
  if (sections <= 0 || n % sections != 0) {
    fail(site,
         fmt::format("split: axis {} of {} (size {}) does not split into {} equal parts", axis,
                     x.aval().to_string(), n, sections),
         "array_split makes parts whose sizes differ by at most one");
  }
  std::vector<Array> parts;
  for (int64_t i = 0; i < sections; ++i) {
    parts.push_back(slice_axis(x, a, i * (n / sections), (i + 1) * (n / sections), site));
  }
  return parts;
}

std::vector<Array> split(const Array& x, const Dims& indices, int64_t axis, CallSite site) {
  require_defined("split", x, site);
  int64_t a = user_axis("split", axis, x.rank(), site);
  int64_t n = x.shape()[a];
  // As jax.numpy (stricter than NumPy, which also takes negative and decreasing indices):
  // each index in [0, n], none smaller than the one before.
  int64_t start = 0;
  for (int64_t index : indices) {
    if (index < start || index > n) {
      fail(site,
           fmt::format("split: the indices must increase within [0, {}] (the size of axis {} of "
                       "{}); got {}",
                       n, axis, x.aval().to_string(), fmt::join(indices, ", ")));
    }
    start = index;
  }
  std::vector<Array> parts;
  start = 0;
  for (size_t i = 0; i <= indices.size(); ++i) {
    int64_t end = i < indices.size() ? indices[i] : n;
    parts.push_back(slice_axis(x, a, start, end, site));
    start = end;
  }
  return parts;
}

std::vector<Array> array_split(const Array& x, int64_t sections, int64_t axis, CallSite site) {
  require_defined("array_split", x, site);
  int64_t a = user_axis("array_split", axis, x.rank(), site);
  if (sections <= 0) {
    fail(site, fmt::format("array_split: sections must be positive, got {}", sections));
  }
  int64_t n = x.shape()[a], each = n / sections, larger = n % sections;
  std::vector<Array> parts;
  int64_t start = 0;
  for (int64_t i = 0; i < sections; ++i) {
    int64_t end = start + each + (i < larger ? 1 : 0);
    parts.push_back(slice_axis(x, a, start, end, site));
    start = end;
  }
  return parts;
}

}  // namespace kiln
