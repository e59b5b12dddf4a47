// Plans a broadcasting elementwise loop without materialising the broadcast: adjacent
// axes on which every operand behaves alike (all contiguous, or all broadcast for a given
// operand) merge, leaving an inner run where each operand is either contiguous (stride 1)
// or a single repeated element (stride 0). The driver walks the output in chunks whose
// boundaries depend only on the sizes, so results never depend on the thread count.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "base/compute_pool.h"
#include "kiln/shape.h"

namespace kiln {

template <size_t K>
struct BroadcastLayout {
  Dims outer;                              // sizes of the merged outer axes
  std::array<Dims, K> outer_strides;       // per operand, element strides on those axes
  int64_t inner = 1;                       // length of the innermost run
  std::array<bool, K> inner_contiguous{};  // stride 1 (true) or 0 (false) on the inner run
  int64_t total = 0;
};

template <size_t K>
BroadcastLayout<K> plan_broadcast(const Shape& out, const std::array<const Shape*, K>& operands) {
  BroadcastLayout<K> layout;
  layout.total = out.num_elements();
  // Per axis: does operand k vary along it (its size equals the output's, and the axis is
  // not trivially 1)? Axes of output size 1 are dropped.
  struct Axis {
    int64_t size;
    std::array<bool, K> varies;
  };
  SmallVector<int64_t, 6> kept;
  std::vector<Axis> axes;
  for (int64_t axis = 0; axis < out.rank(); ++axis) {
    if (out[axis] == 1) continue;
    Axis a{out[axis], {}};
    for (size_t k = 0; k < K; ++k) {
      a.varies[k] = operands[k]->rank() != 0 && (*operands[k])[axis] != 1;  // rank 0: a scalar
    }
    // Merge with the previous axis when every operand varies the same way on both.
    if (!axes.empty() && axes.back().varies == a.varies) {
      axes.back().size *= a.size;
    } else {
      axes.push_back(a);
    }
  }
  if (axes.empty()) axes.push_back(Axis{1, {}});
  layout.inner = axes.back().size;
  layout.inner_contiguous = axes.back().varies;
  // Strides of the outer axes: each operand's stride is the product of the sizes of the
  // axes after it on which it varies.
  std::array<int64_t, K> stride;
  for (size_t k = 0; k < K; ++k) stride[k] = axes.back().varies[k] ? layout.inner : 1;
  for (int64_t i = static_cast<int64_t>(axes.size()) - 2; i >= 0; --i) {
    const Axis& a = axes[static_cast<size_t>(i)];
    layout.outer.insert_at(0, a.size);
    for (size_t k = 0; k < K; ++k) {
      layout.outer_strides[k].insert_at(0, a.varies[k] ? stride[k] : 0);
      if (a.varies[k]) stride[k] *= a.size;
    }
  }
  return layout;
}

// Calls fn(out_offset, operand_offsets, length) for consecutive runs covering the output,
// where within a run operand k advances by 1 per element if inner_contiguous[k], else 0.
template <size_t K, typename Fn>
void for_each_run(const BroadcastLayout<K>& layout, ComputePool& pool, int64_t min_chunk, Fn&& fn) {
  int64_t chunks = chunk_count(layout.total, min_chunk);
  pool.parallel_for(chunks, [&](int64_t chunk) {
    int64_t begin = layout.total * chunk / chunks;
    int64_t end = layout.total * (chunk + 1) / chunks;
    int64_t row = begin / layout.inner;
    int64_t column = begin % layout.inner;
    // Operand offsets of the row's start, from the row's coordinates on the outer axes.
    std::array<int64_t, K> base{};
    Dims coordinate(layout.outer.size(), 0);
    int64_t rest = row;
    for (int64_t axis = static_cast<int64_t>(layout.outer.size()) - 1; axis >= 0; --axis) {
      auto a = static_cast<size_t>(axis);
      coordinate[a] = rest % layout.outer[a];
      rest /= layout.outer[a];
      for (size_t k = 0; k < K; ++k) base[k] += coordinate[a] * layout.outer_strides[k][a];
    }
    for (int64_t at = begin; at < end;) {
      int64_t length = std::min(layout.inner - column, end - at);
      std::array<int64_t, K> offsets;
      for (size_t k = 0; k < K; ++k)
        offsets[k] = base[k] + (layout.inner_contiguous[k] ? column : 0);
      fn(at, offsets, length);
      at += length;
      column = 0;
      // Next row: increment the outer coordinate.
      for (int64_t axis = static_cast<int64_t>(layout.outer.size()) - 1; axis >= 0; --axis) {
        auto a = static_cast<size_t>(axis);
        if (++coordinate[a] < layout.outer[a]) {
          for (size_t k = 0; k < K; ++k) base[k] += layout.outer_strides[k][a];
          break;
        }
        coordinate[a] = 0;
        for (size_t k = 0; k < K; ++k)
          base[k] -= layout.outer_strides[k][a] * (layout.outer[a] - 1);
      }
    }
  });
}

// Calls fn with each operand's inner step (0 or 1) as a compile-time constant, so that
// the loop over a run has fixed strides the compiler can vectorise (with runtime strides
// it keeps a scalar loop). Used by the kernels without a hand-written SIMD loop.
template <typename Fn>
void with_inner_steps(bool contiguous_a, bool contiguous_b, Fn&& fn) {
  using Zero = std::integral_constant<size_t, 0>;
  using One = std::integral_constant<size_t, 1>;
  if (contiguous_a && contiguous_b) return fn(One{}, One{});
  if (contiguous_a) return fn(One{}, Zero{});
  if (contiguous_b) return fn(Zero{}, One{});
  return fn(Zero{}, Zero{});
}
template <typename Fn>
void with_inner_steps(bool contiguous_a, bool contiguous_b, bool contiguous_c, Fn&& fn) {
  using Zero = std::integral_constant<size_t, 0>;
  using One = std::integral_constant<size_t, 1>;
  with_inner_steps(contiguous_a, contiguous_b, [&](auto step_a, auto step_b) {
    if (contiguous_c) return fn(step_a, step_b, One{});
    return fn(step_a, step_b, Zero{});
  });
}

}  // namespace kiln
