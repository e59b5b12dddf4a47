// Fast reduce_window_max / reduce_window_sum for NHWC pooling: windows over axes 1 and 2
// of a rank-4 array (any size, stride and padding there), none over N and C. Each output
// pixel folds its taps over the contiguous channel vector; chunks are runs of output rows.
// The fold visits taps in the reference kernel's order and skips padding cells, which
// cannot change a max (they are -inf) or a sum (they are +0 added to a sum that starts at
// +0), so results equal the reference bit for bit. Other layouts run the reference.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/element_convert.h"
#include "kernels/cpu/contract_kernels.h"
#include "kernels/cpu/window_layout.h"

namespace kiln {
namespace {

constexpr int64_t kElementsPerChunk = 1 << 15;

bool is_nhwc_pool(const KernelCall& call) {
  return windows_span_hw_only(std::get<ReduceWindowParams>(call.params),
                              call.inputs[0].aval->shape);
}

struct MaxFold {
  template <typename C>
  static C init() {
    return std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                       : std::numeric_limits<C>::lowest();
  }
  // A select without branches (random data would mispredict them), so it vectorizes: a
  // NaN value replaces acc, and a NaN acc is never replaced since no comparison with it
  // is true.
  template <typename C>
  static C step(C acc, C value) {
    return (value != value || acc < value) ? value : acc;
  }
};

struct SumFold {
  template <typename C>
  static C init() {
    return C{0};
  }
  template <typename C>
  static C step(C acc, C value) {
    return acc + value;
  }
};

// The accumulator: sums like the reference (double, or wrapping uint64 for integers);
// max in the compute type.
template <typename Fold, typename S>
using acc_t =
    std::conditional_t<std::is_same_v<Fold, SumFold>,
                       std::conditional_t<std::is_integral_v<S>, uint64_t, double>, compute_t<S>>;

// Channels are folded in runs of kLanes: a loop with a constant trip count, which the
// compiler vectorizes at -O2; the last run of a pixel may be shorter.
constexpr int64_t kLanes = 16;

template <typename Fold, typename S, int64_t kCount>
void fold_run(const std::vector<const S*>& taps, int64_t channel, int64_t count, S* out) {
  using A = acc_t<Fold, S>;
  int64_t n = kCount > 0 ? kCount : count;
  A acc[kLanes];
  for (int64_t j = 0; j < n; ++j) acc[j] = Fold::template init<A>();
  for (const S* tap : taps) {
    const S* values = tap + channel;
    for (int64_t j = 0; j < n; ++j) acc[j] = Fold::step(acc[j], static_cast<A>(widen(values[j])));
  }
  for (int64_t j = 0; j < n; ++j) out[channel + j] = convert_element<S>(acc[j]);
}

template <typename Fold, typename S>
void pool_nhwc(const KernelCall& call) {
  const auto& p = std::get<ReduceWindowParams>(call.params);
  const Shape& in = call.inputs[0].aval->shape;
  const Shape& out = call.outputs[0].aval->shape;
  const S* x = static_cast<const S*>(call.inputs[0].data);
  S* y = static_cast<S*>(call.outputs[0].data);
  int64_t h = in[1], w = in[2], c = in[3];
  int64_t lines = out[0] * out[1];
  if (lines == 0 || out[2] == 0 || c == 0) return;
  int64_t per_chunk = std::max<int64_t>(1, kElementsPerChunk / (out[2] * c));
  call.pool.parallel_for((lines + per_chunk - 1) / per_chunk, [&](int64_t chunk) {
    std::vector<const S*> taps;
    int64_t end = std::min(lines, (chunk + 1) * per_chunk);
    for (int64_t line = chunk * per_chunk; line < end; ++line) {
      int64_t n = line / out[1], oh = line % out[1];
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        // The window's cells inside the operand, in the reference's order.
        taps.clear();
        for_each_window_cell(p, h, w, oh, ow,
                             [&](int64_t cell) { taps.push_back(x + (n * h * w + cell) * c); });
        S* dst = y + (line * out[2] + ow) * c;
        int64_t channel = 0;
        for (; channel + kLanes <= c; channel += kLanes) {
          fold_run<Fold, S, kLanes>(taps, channel, kLanes, dst);
        }
        if (channel < c) fold_run<Fold, S, 0>(taps, channel, c - channel, dst);
      }
    }
  });
}

template <typename Fold>
void cpu_pool(const KernelCall& call, PrimId id) {
  if (!is_nhwc_pool(call)) return prim_def(id).ref_kernel(call);
  visit_dtype(call.inputs[0].aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (std::is_same_v<S, bool>) {
      prim_def(id).ref_kernel(call);
    } else {
      pool_nhwc<Fold, S>(call);
    }
  });
}

}  // namespace

void cpu_reduce_window_max(const KernelCall& call) {
  cpu_pool<MaxFold>(call, PrimId::reduce_window_max);
}

void cpu_reduce_window_sum(const KernelCall& call) {
  cpu_pool<SumFold>(call, PrimId::reduce_window_sum);
}

}  // namespace kiln
