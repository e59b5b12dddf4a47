// Fast kernels of the window family, for NHWC layouts: windows over axes 1 and 2 of a
// rank-4 array (any size, stride and padding there), none over N and C. Each kernel
// declares the calls it takes (cpu_supports); the dispatcher runs the reference kernel for
// the others.
//
// Pooling (reduce_window_max / reduce_window_sum, every dtype but bool): each output
// pixel folds its taps over the contiguous channel vector; chunks are runs of output rows.
// The fold visits taps in the reference kernel's order and skips padding cells, which
// cannot change a max (they are -inf) or a sum (they are +0 added to a sum that starts at
// +0), so results equal the reference bit for bit.
//
// select_and_scatter_add (max pooling's gradient, f32/f64): chunks are runs of images, so
// each result cell is written by one chunk. Windows select over runs of channels at once
// (the reference's first-maximum rule: later taps replace only when greater, or NaN while
// the maximum is not NaN) and add their source cell. Non-overlapping windows add straight
// into the zeroed result (each cell receives at most once); overlapping ones sum in double
// in the reference's window order and round once, so results equal the reference bit for
// bit.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/element_convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_copy.h"
#include "kernels/cpu/window_layout.h"
#include "prims/ids/window.h"

namespace kiln {
namespace {

constexpr int64_t kElementsPerChunk = 1 << 15;

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

// Channels are folded in runs of kChannelRun: a loop with a constant trip count, which the
// compiler vectorizes at -O2; the last run of a pixel may be shorter.
constexpr int64_t kChannelRun = 16;

template <typename Fold, typename S, int64_t kCount>
void fold_run(const std::vector<const S*>& taps, int64_t channel, int64_t count, S* out) {
  using A = acc_t<Fold, S>;
  int64_t n = kCount > 0 ? kCount : count;
  A acc[kChannelRun];
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
        for (; channel + kChannelRun <= c; channel += kChannelRun) {
          fold_run<Fold, S, kChannelRun>(taps, channel, kChannelRun, dst);
        }
        if (channel < c) fold_run<Fold, S, 0>(taps, channel, c - channel, dst);
      }
    }
  });
}

// ----- select_and_scatter_add -----

// Selects each channel's first maximum over the taps (offsets of a window's pixels inside
// the operand, in row-major window order) and adds the source there. kCount > 0 fixes the
// number of channels so the selection loop vectorizes: it is branch-free, with bitwise
// rather than short-circuit logic, and tracks tap numbers in 32-bit lanes beside the
// values.
template <typename S, typename Acc, int64_t kCount>
void select_run(const std::vector<int64_t>& taps, const S* x, const S* source, int64_t count,
                Acc* out) {
  int64_t n = kCount > 0 ? kCount : count;
  S best[kChannelRun];
  int32_t selected[kChannelRun];
  const S* first = x + taps[0];
  for (int64_t j = 0; j < n; ++j) {
    best[j] = first[j];
    selected[j] = 0;
  }
  auto tap_count = static_cast<int32_t>(taps.size());
  for (int32_t t = 1; t < tap_count; ++t) {
    const S* values = x + taps[static_cast<size_t>(t)];
    for (int64_t j = 0; j < n; ++j) {
      S value = values[j];
      S held = best[j];
      // Greater, or NaN while the maximum is not NaN (a NaN maximum compares false).
      bool take = (value > held) | ((value != value) & (held == held));
      best[j] = take ? value : held;
      selected[j] = take ? t : selected[j];
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    out[taps[static_cast<size_t>(selected[j])] + j] += static_cast<Acc>(source[j]);
  }
}

// Scatters one image's windows into `out` (zeroed, one image of H x W x C).
template <typename S, typename Acc>
void scatter_image(const ReduceWindowParams& p, const Shape& in, const Shape& windows, const S* x,
                   const S* source, Acc* out) {
  int64_t h = in[1], w = in[2], c = in[3];
  std::vector<int64_t> taps;
  for (int64_t oh = 0; oh < windows[1]; ++oh) {
    for (int64_t ow = 0; ow < windows[2]; ++ow) {
      taps.clear();
      for_each_window_cell(p, h, w, oh, ow, [&](int64_t cell) { taps.push_back(cell * c); });
      if (taps.empty()) continue;  // a window of padding only sends nothing
      const S* src = source + (oh * windows[2] + ow) * c;
      int64_t channel = 0;
      for (; channel + kChannelRun <= c; channel += kChannelRun) {
        select_run<S, Acc, kChannelRun>(taps, x + channel, src + channel, kChannelRun,
                                        out + channel);
      }
      if (channel < c) {
        select_run<S, Acc, 0>(taps, x + channel, src + channel, c - channel, out + channel);
      }
    }
  }
}

template <typename S>
void select_and_scatter_nhwc(const KernelCall& call) {
  const auto& p = std::get<ReduceWindowParams>(call.params);
  const Shape& windows = call.inputs[0].aval->shape;
  const Shape& in = call.inputs[1].aval->shape;
  const S* source = static_cast<const S*>(call.inputs[0].data);
  const S* x = static_cast<const S*>(call.inputs[1].data);
  S* result = static_cast<S*>(call.outputs[0].data);
  int64_t image = in[1] * in[2] * in[3];
  int64_t source_image = windows[1] * windows[2] * windows[3];
  if (image == 0) return;
  bool overlapping =
      p.window_dimensions[1] > p.window_strides[1] || p.window_dimensions[2] > p.window_strides[2];
  int64_t min_images = std::max<int64_t>(1, kElementsPerChunk / image);
  shape_kernels::parallel_range(call.pool, in[0], min_images, [&](int64_t begin, int64_t end) {
    std::vector<double> sums(overlapping ? static_cast<size_t>(image) : 0);
    for (int64_t n = begin; n < end; ++n) {
      S* out = result + n * image;
      const S* x_n = x + n * image;
      const S* source_n = source + n * source_image;
      if (overlapping) {
        std::fill(sums.begin(), sums.end(), 0.0);
        scatter_image<S, double>(p, in, windows, x_n, source_n, sums.data());
        for (int64_t i = 0; i < image; ++i) out[i] = static_cast<S>(sums[static_cast<size_t>(i)]);
      } else {
        std::fill(out, out + image, S{0});
        scatter_image<S, S>(p, in, windows, x_n, source_n, out);
      }
    }
  });
}

template <typename Fold>
void cpu_pool(const KernelCall& call) {
  visit_dtype(call.inputs[0].aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (!std::is_same_v<S, bool>) pool_nhwc<Fold, S>(call);
  });
}

bool supports_pool(std::span<const AbstractValue> inputs, std::span<const AbstractValue>,
                   const Params& params) {
  return inputs[0].dtype != DType::bool_ &&
         windows_span_hw_only(std::get<ReduceWindowParams>(params), inputs[0].shape);
}

void cpu_select_and_scatter_add(const KernelCall& call) {
  if (call.inputs[1].aval->dtype == DType::f32) return select_and_scatter_nhwc<float>(call);
  select_and_scatter_nhwc<double>(call);
}

bool supports_select_and_scatter(std::span<const AbstractValue> inputs,
                                 std::span<const AbstractValue>, const Params& params) {
  DType dtype = inputs[1].dtype;
  return (dtype == DType::f32 || dtype == DType::f64) &&
         windows_span_hw_only(std::get<ReduceWindowParams>(params), inputs[1].shape);
}

}  // namespace

void register_cpu_window(PrimTable& table) {
  table[prim::reduce_window_max].cpu_kernel = cpu_pool<MaxFold>;
  table[prim::reduce_window_sum].cpu_kernel = cpu_pool<SumFold>;
  for (PrimId id : {prim::reduce_window_max, prim::reduce_window_sum}) {
    table[id].cpu_supports = supports_pool;
  }
  table[prim::select_and_scatter_add].cpu_kernel = cpu_select_and_scatter_add;
  table[prim::select_and_scatter_add].cpu_supports = supports_select_and_scatter;
}

}  // namespace kiln
