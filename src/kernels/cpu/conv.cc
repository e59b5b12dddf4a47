// Fast conv_general_dilated. The output rows (n, oh, ow) are cut into blocks derived from
// the shape alone; each block gathers its input patches (im2col: with NHWC every kernel tap
// is a contiguous run of channels) into a per-thread scratch matrix and multiplies it by
// the HWIO kernel viewed as a [KH*KW*I, O] matrix, one GEMM per feature group. Grouped
// convolutions whose per-group products are thin (depthwise) use a direct loop instead, and a
// 1x1 unit-stride convolution is a single GEMM on the input itself. 16-bit floats compute
// in f32 and round once.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/element_convert.h"
#include "kernels/cpu/contract_kernels.h"
#include "kernels/cpu/gemm.h"

namespace kiln {
namespace {

// Scratch per block: patches of this many elements stay in the L2 cache next to the
// kernel matrix.
constexpr int64_t kScratchElements = 1 << 17;
constexpr int64_t kMinBlockRows = 64;
constexpr int64_t kMaxBlockRows = 4096;
// Runs of patch elements shorter than this are gathered column by column.
constexpr int64_t kWideRun = 16;
// Below this many patch elements or output channels per group a per-group GEMM is too thin
// to pay.
constexpr int64_t kMinGemmChannels = 8;

struct ConvGeometry {
  int64_t n, h, w, c;      // input NHWC
  int64_t kh, kw, ipg, o;  // kernel HWIO (ipg = input channels per group)
  int64_t oh, ow;          // output spatial
  int64_t groups, opg;     // feature groups, output channels per group
  const ConvParams* p;

  // Input row (or column) of output position `out` and kernel tap `tap` on spatial axis
  // `axis`, or -1 on padding or between dilated input cells.
  int64_t source(int axis, int64_t out, int64_t tap) const {
    size_t s = static_cast<size_t>(axis);
    int64_t at = out * p->window_strides[s] + tap * p->rhs_dilation[s] - p->padding_low[s];
    if (at < 0 || at % p->lhs_dilation[s] != 0) return -1;
    at /= p->lhs_dilation[s];
    return at < (axis == 0 ? h : w) ? at : -1;
  }
};

ConvGeometry geometry_of(const KernelCall& call) {
  const Shape& xs = call.inputs[0].aval->shape;
  const Shape& ws = call.inputs[1].aval->shape;
  const Shape& ys = call.outputs[0].aval->shape;
  const auto& p = std::get<ConvParams>(call.params);
  return ConvGeometry{xs[0],
                      xs[1],
                      xs[2],
                      xs[3],
                      ws[0],
                      ws[1],
                      ws[2],
                      ws[3],
                      ys[1],
                      ys[2],
                      p.feature_group_count,
                      ws[3] / p.feature_group_count,
                      &p};
}

// Copies n elements. Patch runs are often a few elements long (one channel, three taps),
// where a memmove call costs more than the copy: runs below 16 elements are copied with
// fixed-size memcpys, which the compiler turns into plain moves.
template <typename T>
inline void copy_run(T* dst, const T* src, int64_t n) {
  for (; n >= 16; n -= 16, dst += 16, src += 16) std::memcpy(dst, src, 16 * sizeof(T));
  switch (n) {
#define KILN_COPY_CASE(k)                 \
  case k:                                 \
    std::memcpy(dst, src, k * sizeof(T)); \
    break;
    KILN_COPY_CASE(1)
    KILN_COPY_CASE(2)
    KILN_COPY_CASE(3)
    KILN_COPY_CASE(4)
    KILN_COPY_CASE(5)
    KILN_COPY_CASE(6)
    KILN_COPY_CASE(7)
    KILN_COPY_CASE(8)
    KILN_COPY_CASE(9)
    KILN_COPY_CASE(10)
    KILN_COPY_CASE(11)
    KILN_COPY_CASE(12)
    KILN_COPY_CASE(13)
    KILN_COPY_CASE(14)
    KILN_COPY_CASE(15)
#undef KILN_COPY_CASE
    default:
      break;
  }
}

// Input row (column) of every output row (column) and kernel tap, -1 for padding/holes.
std::vector<int64_t> source_table(const ConvGeometry& g, int axis) {
  int64_t outs = axis == 0 ? g.oh : g.ow, taps = axis == 0 ? g.kh : g.kw;
  std::vector<int64_t> table(static_cast<size_t>(outs * taps));
  for (int64_t o = 0; o < outs; ++o) {
    for (int64_t t = 0; t < taps; ++t)
      table[static_cast<size_t>(o * taps + t)] = g.source(axis, o, t);
  }
  return table;
}

// Patch rows [begin, begin + count) of one group into `dst` (count x patch), one row at a
// time: each tap is a run of the group's channels, and with one group and no gaps the KW
// taps of a kernel row are one run. For wide channel runs.
template <typename T>
void gather_rows(const ConvGeometry& g, const T* x_group, const std::vector<int64_t>& ih_of,
                 const std::vector<int64_t>& iw_of, int64_t begin, int64_t count, T* dst) {
  int64_t ow = begin % g.ow, oh = begin / g.ow % g.oh, n = begin / (g.ow * g.oh);
  for (int64_t r = 0; r < count; ++r) {
    const int64_t* ihs = ih_of.data() + oh * g.kh;
    const int64_t* iws = iw_of.data() + ow * g.kw;
    bool contiguous = g.groups == 1 && iws[0] >= 0 && iws[g.kw - 1] == iws[0] + g.kw - 1;
    for (int64_t kh = 0; kh < g.kh; ++kh, dst += g.kw * g.ipg) {
      int64_t ih = ihs[kh];
      if (ih < 0) {
        std::fill(dst, dst + g.kw * g.ipg, T{0});
        continue;
      }
      const T* x_row = x_group + (n * g.h + ih) * g.w * g.c;
      if (contiguous) {
        copy_run(dst, x_row + iws[0] * g.c, g.kw * g.c);
        continue;
      }
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        T* cell = dst + kw * g.ipg;
        if (iws[kw] < 0) {
          std::fill(cell, cell + g.ipg, T{0});
        } else {
          copy_run(cell, x_row + iws[kw] * g.c, g.ipg);
        }
      }
    }
    if (++ow == g.ow) {
      ow = 0;
      if (++oh == g.oh) oh = 0, ++n;
    }
  }
}

// The same patch rows, one patch column (kernel tap) at a time along runs of an output
// line: for a few channels per group (the first layer of an image network), where the
// row-at-a-time copies would be a few elements each.
template <typename T>
void gather_columns(const ConvGeometry& g, const T* x_group, const std::vector<int64_t>& ih_of,
                    const std::vector<int64_t>& iw_of, int64_t begin, int64_t count, T* dst) {
  int64_t patch = g.kh * g.kw * g.ipg;
  int64_t ow0 = begin % g.ow, oh = begin / g.ow % g.oh, n = begin / (g.ow * g.oh);
  for (int64_t r = 0; r < count;) {
    int64_t run = std::min(g.ow - ow0, count - r);
    T* base = dst + r * patch;
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      int64_t ih = ih_of[static_cast<size_t>(oh * g.kh + kh)];
      const T* x_row = ih < 0 ? nullptr : x_group + (n * g.h + ih) * g.w * g.c;
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        T* column = base + (kh * g.kw + kw) * g.ipg;
        const int64_t* iws = iw_of.data() + ow0 * g.kw + kw;
        if (x_row != nullptr && g.p->lhs_dilation[1] == 1 && iws[0] >= 0 &&
            iws[(run - 1) * g.kw] >= 0) {
          // Inside the input along the whole run: a plain strided copy.
          const T* src = x_row + iws[0] * g.c;
          int64_t step = g.p->window_strides[1] * g.c;
          if (g.ipg == 1) {
            for (int64_t i = 0; i < run; ++i) column[i * patch] = src[i * step];
          } else {
            for (int64_t i = 0; i < run; ++i) {
              for (int64_t ci = 0; ci < g.ipg; ++ci) column[i * patch + ci] = src[i * step + ci];
            }
          }
          continue;
        }
        for (int64_t i = 0; i < run; ++i) {
          int64_t iw = iws[i * g.kw];
          T* cell = column + i * patch;
          if (x_row == nullptr || iw < 0) {
            for (int64_t ci = 0; ci < g.ipg; ++ci) cell[ci] = T{0};
          } else if (g.ipg == 1) {
            cell[0] = x_row[iw * g.c];
          } else {
            for (int64_t ci = 0; ci < g.ipg; ++ci) cell[ci] = x_row[iw * g.c + ci];
          }
        }
      }
    }
    r += run;
    ow0 = 0;
    if (++oh == g.oh) oh = 0, ++n;
  }
}

template <typename T>
void conv_im2col(ComputePool& pool, const ConvGeometry& g, const T* x, const T* w, T* y) {
  int64_t rows = g.n * g.oh * g.ow;
  int64_t patch = g.kh * g.kw * g.ipg;
  int64_t block_rows =
      std::clamp(kScratchElements / std::max<int64_t>(patch, 1), kMinBlockRows, kMaxBlockRows) /
      16 * 16;
  int64_t blocks = (rows + block_rows - 1) / block_rows;
  std::vector<int64_t> ih_of = source_table(g, 0), iw_of = source_table(g, 1);
  bool narrow = g.ipg < kWideRun && !(g.groups == 1 && g.kw * g.c >= kWideRun);
  // A task is one block of rows of one group: the groups of a grouped convolution with few
  // output rows (vmap's per-example weight gradients) spread over the threads too. Each
  // output element is one GEMM's, so the bits do not depend on the split.
  pool.parallel_for(blocks * g.groups, [&](int64_t task) {
    thread_local std::vector<T> scratch;
    const int64_t block = task / g.groups, group = task % g.groups;
    int64_t begin = block * block_rows;
    int64_t count = std::min(block_rows, rows - begin);
    scratch.resize(static_cast<size_t>(count * patch));
    const T* x_group = x + group * g.ipg;
    if (narrow) {
      gather_columns(g, x_group, ih_of, iw_of, begin, count, scratch.data());
    } else {
      gather_rows(g, x_group, ih_of, iw_of, begin, count, scratch.data());
    }
    GemmDims dims{.m = count, .n = g.opg, .k = patch, .lda = patch, .ldb = g.o, .ldc = g.o};
    gemm_serial(dims, scratch.data(), w + group * g.opg, y + begin * g.o + group * g.opg);
  });
}

// Direct loop for grouped convolutions with few channels per group: each output pixel
// accumulates its taps in a fixed order (kh, kw, input channel), padding included.
template <typename T>
void conv_direct(ComputePool& pool, const ConvGeometry& g, const T* x, const T* w, T* y) {
  int64_t lines = g.n * g.oh;
  int64_t per_chunk = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, g.ow * g.o));
  pool.parallel_for((lines + per_chunk - 1) / per_chunk, [&](int64_t chunk) {
    std::vector<T> acc(static_cast<size_t>(g.o));
    std::vector<T> zeros(static_cast<size_t>(g.c), T{0});
    int64_t end = std::min(lines, (chunk + 1) * per_chunk);
    for (int64_t line = chunk * per_chunk; line < end; ++line) {
      int64_t n = line / g.oh, oh = line % g.oh;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        std::fill(acc.begin(), acc.end(), T{0});
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          int64_t ih = g.source(0, oh, kh);
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            int64_t iw = ih < 0 ? -1 : g.source(1, ow, kw);
            // Padding reads zeros, which still multiply the taps (0 * inf is NaN).
            const T* pixel = iw < 0 ? zeros.data() : x + ((n * g.h + ih) * g.w + iw) * g.c;
            const T* taps = w + (kh * g.kw + kw) * g.ipg * g.o;
            if (g.ipg == 1 && g.opg == 1) {
              // Depthwise: channel o reads input channel o.
              for (int64_t o = 0; o < g.o; ++o) acc[static_cast<size_t>(o)] += pixel[o] * taps[o];
            } else {
              for (int64_t ci = 0; ci < g.ipg; ++ci) {
                for (int64_t o = 0; o < g.o; ++o) {
                  acc[static_cast<size_t>(o)] += pixel[o / g.opg * g.ipg + ci] * taps[ci * g.o + o];
                }
              }
            }
          }
        }
        std::copy(acc.begin(), acc.end(), y + ((n * g.oh + oh) * g.ow + ow) * g.o);
      }
    }
  });
}

template <typename T>
void conv_in(ComputePool& pool, const ConvGeometry& g, const T* x, const T* w, T* y) {
  int64_t rows = g.n * g.oh * g.ow;
  if (rows == 0 || g.o == 0) return;
  if (g.ipg == 0) {
    std::fill(y, y + rows * g.o, T{0});
    return;
  }
  const ConvParams& p = *g.p;
  bool unit = g.kh == 1 && g.kw == 1 && g.groups == 1;
  for (size_t s = 0; s < 2; ++s) {
    unit = unit && p.window_strides[s] == 1 && p.padding_low[s] == 0 && p.padding_high[s] == 0 &&
           p.lhs_dilation[s] == 1;
  }
  if (unit) {
    // The input is already the patch matrix.
    gemm(pool, GemmDims{.m = rows, .n = g.o, .k = g.c, .lda = g.c, .ldb = g.o, .ldc = g.o}, x, w,
         y);
  } else if (g.groups > 1 && (g.kh * g.kw * g.ipg < kMinGemmChannels || g.opg < kMinGemmChannels)) {
    // Thin per-group products (depthwise: one input and one output channel per group).
    conv_direct(pool, g, x, w, y);
  } else {
    conv_im2col(pool, g, x, w, y);
  }
}

}  // namespace

void cpu_conv_general_dilated(const KernelCall& call) {
  ConvGeometry g = geometry_of(call);
  DType dtype = call.inputs[0].aval->dtype;
  const void* x = call.inputs[0].data;
  const void* w = call.inputs[1].data;
  void* y = call.outputs[0].data;
  if (dtype == DType::f32) {
    conv_in(call.pool, g, static_cast<const float*>(x), static_cast<const float*>(w),
            static_cast<float*>(y));
  } else if (dtype == DType::f64) {
    conv_in(call.pool, g, static_cast<const double*>(x), static_cast<const double*>(w),
            static_cast<double*>(y));
  } else {
    int64_t x_count = call.inputs[0].aval->num_elements();
    int64_t w_count = call.inputs[1].aval->num_elements();
    int64_t y_count = call.outputs[0].aval->num_elements();
    std::vector<float> xf(static_cast<size_t>(x_count)), wf(static_cast<size_t>(w_count)),
        yf(static_cast<size_t>(y_count));
    convert_to(call.pool, dtype, x, x_count, xf.data());
    convert_to(call.pool, dtype, w, w_count, wf.data());
    conv_in(call.pool, g, xf.data(), wf.data(), yf.data());
    convert_from(call.pool, yf.data(), y_count, dtype, y);
  }
}

}  // namespace kiln
