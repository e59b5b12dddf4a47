// numpy.pad's modes (jax.numpy.pad): each padded axis becomes a `take` of the original
// along it, with the index of every output position worked out on the host (clamped for
// edge, reflected about the end elements for reflect, about the ends themselves for
// symmetric, wrapped around for wrap). The gradient is take's: each output position sends
// its cotangent back to the element it copies.
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
  }
  return "?";
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
