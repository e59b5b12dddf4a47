// numpy.pad's modes (jax.numpy.pad). The copying modes make each padded axis a `take` of
// the original along it, with the index of every output position worked out on the host
// (clamped for edge, reflected about the end elements for reflect, about the ends
// themselves for symmetric, wrapped around for wrap); the gradient is take's: each output
// position sends its cotangent back to the element it copies. linear_ramp and the
// statistic modes concatenate computed blocks (a ramp, the axis's statistic repeated)
// around the array, axis by axis, as jax.numpy does.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

std::string_view mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::kConstant:
      return "constant";
    case PadMode::kEdge:
      return "edge";
    case PadMode::kReflect:
      return "reflect";
    case PadMode::kSymmetric:
      return "symmetric";
    case PadMode::kWrap:
      return "wrap";
    case PadMode::kLinearRamp:
      return "linear_ramp";
    case PadMode::kMaximum:
      return "maximum";
    case PadMode::kMinimum:
      return "minimum";
    case PadMode::kMean:
      return "mean";
    case PadMode::kMedian:
      return "median";
  }
  return "?";
}

bool copies(PadMode mode) {
  return mode == PadMode::kEdge || mode == PadMode::kReflect || mode == PadMode::kSymmetric ||
         mode == PadMode::kWrap;
}

// `x` with axis `axis` resized to `size`: the shape of one padding block.
Shape block_shape(const Array& x, int64_t axis, int64_t size) {
  Shape shape = x.shape();
  shape[axis] = size;
  return shape;
}

// numpy.linspace(start, stop, count, endpoint=False) along `axis`, `stop` the edge slice
// (size 1 along the axis), in JAX's form start * (1 - k / count) + stop * (k / count);
// integers floor, as jnp.linspace's do.
Array ramp(double start, const Array& edge, int64_t axis, int64_t count, CallSite site) {
  DType dtype = edge.dtype();
  DType compute = is_floating(dtype) ? dtype : DType::f64;
  Shape shape = block_shape(edge, axis, count);
  Array step = div(iota(shape, compute, axis, device_of(edge), site),
                   full(Shape{}, static_cast<double>(count), compute, device_of(edge), site), site);
  Array one = full(Shape{}, 1, compute, device_of(edge), site);
  Array from = full(Shape{}, start, compute, device_of(edge), site);
  Array values = add(mul(from, sub(one, step, site), site),
                     mul(broadcast_to(astype(edge, compute, site), shape, site), step, site), site);
  return is_floating(dtype) ? values : astype(floor(values, site), dtype, site);
}

// The statistic of `x` along `axis`, kept as a size-1 axis, in x's dtype (integers round
// the mean and median half to even, as jax.numpy).
Array statistic(PadMode mode, const Array& x, int64_t axis, CallSite site) {
  switch (mode) {
    case PadMode::kMaximum:
      return max(x, {axis}, true, site);
    case PadMode::kMinimum:
      return min(x, {axis}, true, site);
    default:
      break;
  }
  bool integral = !is_floating(x.dtype());
  Array values = integral ? astype(x, DType::f64, site) : x;
  Array stat;
  if (mode == PadMode::kMean) {
    stat = mean(values, {axis}, true, site);
  } else {
    // The midpoint of the middle one or two after sorting (jnp.median); NaN if any is NaN.
    int64_t n = x.shape()[axis];
    Array sorted = sort(values, axis, site);
    auto at = [&](int64_t i) {
      Dims begin(static_cast<size_t>(x.rank()), 0), end = x.shape().dims();
      begin[static_cast<size_t>(axis)] = i;
      end[static_cast<size_t>(axis)] = i + 1;
      return slice(sorted, begin, end, {}, site);
    };
    Array low = at((n - 1) / 2), high = at(n / 2);
    Array half = full(Shape{}, 0.5, values.dtype(), device_of(x), site);
    stat = mul(add(low, high, site), half, site);
    if (!integral) {
      Array any_nan = any(isnan(values, site), {axis}, true, site);
      stat = where(any_nan, full(Shape{}, std::nan(""), values.dtype(), device_of(x), site), stat,
                   site);
    }
  }
  return integral ? astype(round(stat, site), x.dtype(), site) : stat;
}

int64_t floor_mod(int64_t a, int64_t b) {
  return ((a % b) + b) % b;
}

// The index into an axis of size n that output position i (counted from -before) copies.
int64_t source_index(PadMode mode, int64_t i, int64_t n) {
  switch (mode) {
    case PadMode::kEdge:
    case PadMode::kConstant:
      return std::clamp<int64_t>(i, 0, n - 1);
    case PadMode::kReflect: {
      if (n == 1) return 0;
      int64_t period = 2 * (n - 1);
      int64_t j = floor_mod(i, period);
      return j < n ? j : period - j;
    }
    case PadMode::kSymmetric: {
      int64_t j = floor_mod(i, 2 * n);
      return j < n ? j : 2 * n - 1 - j;
    }
    case PadMode::kWrap:
      return floor_mod(i, n);
    case PadMode::kLinearRamp:
    case PadMode::kMaximum:
    case PadMode::kMinimum:
    case PadMode::kMean:
    case PadMode::kMedian:
      break;  // computed, not copied (pad() never asks)
  }
  return 0;
}

}  // namespace

Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& pad_width, PadMode mode,
          double constant, CallSite site) {
  require_defined("pad", x, site);
  if (static_cast<int64_t>(pad_width.size()) != x.rank()) {
    fail(site, fmt::format("pad: {} (before, after) pairs for {} ({} axes); give one per axis",
                           pad_width.size(), x.aval().to_string(), x.rank()));
  }
  for (size_t axis = 0; axis < pad_width.size(); ++axis) {
    if (pad_width[axis].first < 0 || pad_width[axis].second < 0) {
      fail(site, fmt::format("pad: the widths of axis {} are ({}, {}); they must be >= 0", axis,
                             pad_width[axis].first, pad_width[axis].second));
    }
  }
  if (mode == PadMode::kConstant) {
    Dims low, high;
    for (const auto& [before, after] : pad_width) {
      low.push_back(before);
      high.push_back(after);
    }
    return pad(x, low, high, {}, constant, site);
  }
  Array out = x;
  for (int64_t axis = 0; axis < x.rank(); ++axis) {
    auto [before, after] = pad_width[static_cast<size_t>(axis)];
    if (before == 0 && after == 0) continue;
    int64_t n = x.shape()[axis];
    if (n == 0) {
      fail(site,
           fmt::format("pad: mode {} cannot extend axis {} of {}: it is empty", mode_name(mode),
                       axis, x.aval().to_string()),
           "use PadMode::kConstant to pad an empty axis");
    }
    if (!copies(mode)) {
      std::vector<Array> parts;
      if (mode == PadMode::kLinearRamp) {
        Dims begin(static_cast<size_t>(out.rank()), 0), end = out.shape().dims();
        end[static_cast<size_t>(axis)] = 1;
        Array first = slice(out, begin, end, {}, site);
        begin[static_cast<size_t>(axis)] = n - 1;
        end[static_cast<size_t>(axis)] = n;
        Array last = slice(out, begin, end, {}, site);
        if (before > 0) parts.push_back(ramp(constant, first, axis, before, site));
        parts.push_back(out);
        if (after > 0) parts.push_back(flip(ramp(constant, last, axis, after, site), {axis}, site));
      } else {
        Array stat = statistic(mode, out, axis, site);
        if (before > 0) parts.push_back(broadcast_to(stat, block_shape(out, axis, before), site));
        parts.push_back(out);
        if (after > 0) parts.push_back(broadcast_to(stat, block_shape(out, axis, after), site));
      }
      out = concatenate(parts, axis, site);
      continue;
    }
    std::vector<int32_t> indices;
    for (int64_t i = -before; i < n + after; ++i) {
      indices.push_back(static_cast<int32_t>(source_index(mode, i, n)));
    }
    Array picks =
        from_host(indices, Shape{static_cast<int64_t>(indices.size())}, device_of(x), site);
    out = take(out, picks, axis, std::nullopt, site);
  }
  return out;
}

}  // namespace kiln
