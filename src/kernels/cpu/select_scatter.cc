// Fast select_and_scatter_add (max pooling's gradient) for NHWC layouts: windows over axes 1
// and 2 of a rank-4 f32/f64 operand, none over N and C. Chunks are runs of images, so each
// result cell is written by one chunk. Windows select over runs of channels at once (the
// reference's first-maximum rule: later taps replace only when greater, or NaN while the
// maximum is not NaN) and add their source cell. Non-overlapping windows add straight into
// the zeroed result (each cell receives at most once); overlapping ones sum in double in
// the reference's window order and round once, so results equal the reference bit for bit.
// Other layouts and dtypes run the reference.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/contract_kernels.h"
#include "kernels/cpu/shape_copy.h"
#include "kernels/cpu/window_layout.h"

namespace kiln {
namespace {

constexpr int64_t kElementsPerChunk = 1 << 15;
constexpr int64_t kLanes = 16;

bool is_nhwc_windows(const KernelCall& call) {
  return windows_span_hw_only(std::get<ReduceWindowParams>(call.params),
                              call.inputs[1].aval->shape);
}

// Selects each channel's first maximum over the taps (offsets of a window's pixels inside
// the operand, in row-major window order) and adds the source there. kCount > 0 fixes the
// number of channels so the selection loop vectorizes: it is branch-free, with bitwise
// rather than short-circuit logic, and tracks tap numbers in 32-bit lanes beside the
// values.
template <typename S, typename Acc, int64_t kCount>
void select_run(const std::vector<int64_t>& taps, const S* x, const S* source, int64_t count,
                Acc* out) {
  int64_t n = kCount > 0 ? kCount : count;
  S best[kLanes];
  int32_t selected[kLanes];
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
      for (; channel + kLanes <= c; channel += kLanes) {
        select_run<S, Acc, kLanes>(taps, x + channel, src + channel, kLanes, out + channel);
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

}  // namespace

void cpu_select_and_scatter_add(const KernelCall& call) {
  DType dtype = call.inputs[1].aval->dtype;
  if (!is_nhwc_windows(call)) return prim_def(PrimId::select_and_scatter_add).ref_kernel(call);
  if (dtype == DType::f32) return select_and_scatter_nhwc<float>(call);
  if (dtype == DType::f64) return select_and_scatter_nhwc<double>(call);
  prim_def(PrimId::select_and_scatter_add).ref_kernel(call);
}

}  // namespace kiln
