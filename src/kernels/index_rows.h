// How the indexing primitives (gather, scatter, scatter_add) see their operands, shared by
// the reference and fast kernels so that both resolve and check indices alike. The operand
// is seen as [batch, pre, axis, post] and the indices as [batch, n]; gather's output (and
// the updates of the scatters) as [batch, pre, n, post].
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/element_convert.h"
#include "kiln/index_mode.h"
#include "prims/registry.h"

namespace kiln {

struct IndexGeometry {
  int64_t batch = 1, pre = 1, axis_size = 0, post = 1, n = 1;
};

IndexGeometry index_geometry(const Shape& operand, const Shape& indices, int64_t axis,
                             int64_t batch_dims);

// Which primitive reads the indices: the remedy an out-of-range error suggests differs
// (take() has a mode; x.at(indices).set/add and take_along_axis have none).
enum class IndexUse { kGather, kScatter };

// The axis position each index selects, in the indices' row-major order: -1 where mode fill
// drops it, clamped in mode clip. In mode error every index is checked up front, so a bad
// one is reported even when the operand's other axes leave nothing to read or write; the
// Error is reported by the runtime at the next synchronization with the op's call site.
std::vector<int64_t> resolved_indices(const KernelInput& indices, int64_t axis, int64_t axis_size,
                                      IndexMode mode, IndexUse use);

// What scatter_add sums in, so that every kernel gives the reference's bits: floats in
// double, rounded once when the row is written (convert_element); integers and bools in a
// wrapping uint64_t, which converts back as wrapping arithmetic in the element type would.
template <typename S>
using ScatterAccumulator = std::conditional_t<std::is_integral_v<S>, uint64_t, double>;

template <typename S>
ScatterAccumulator<S> to_scatter_accumulator(S value) {
  if constexpr (std::is_integral_v<S>) {
    return static_cast<uint64_t>(static_cast<int64_t>(value));
  } else {
    return static_cast<double>(widen(value));
  }
}

}  // namespace kiln
