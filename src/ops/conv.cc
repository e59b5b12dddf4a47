// User-facing convolution and pooling on NHWC arrays: conv2d (VALID / SAME padding as in
// TensorFlow and JAX), conv_general_dilated (explicit padding, input dilation), max_pool and
// avg_pool (windows over H and W; averages count only cells inside the array).
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/element_convert.h"
#include "ops/op_util.h"
#include "prims/ids/contract.h"
#include "prims/ids/window.h"

namespace kiln {
namespace {

struct SpatialPadding {
  Dims low{0, 0};
  Dims high{0, 0};
};

// TensorFlow/JAX SAME: the output has ceil(in / stride) cells; the total padding that
// needs is split with the smaller half (for odd totals) in front.
SpatialPadding same_padding(const Shape& x, const Dims& window, const Dims& strides,
                            const Dims& dilation) {
  SpatialPadding pad;
  for (size_t i = 0; i < 2; ++i) {
    int64_t in = x[static_cast<int64_t>(i) + 1];
    int64_t out = (in + strides[i] - 1) / strides[i];
    int64_t needed = (out - 1) * strides[i] + (window[i] - 1) * dilation[i] + 1 - in;
    int64_t total = std::max<int64_t>(needed, 0);
    pad.low[i] = total / 2;
    pad.high[i] = total - total / 2;
  }
  return pad;
}

void check_nhwc(std::string_view op, const Array& x, CallSite site) {
  if (!x.defined()) fail(site, fmt::format("{}: the input is an empty Array", op));
  if (x.rank() != 4) {
    fail(site,
         fmt::format("{}: expects an NHWC input of rank 4 (batch, height, width, channels), got {}",
                     op, x.aval().to_string()),
         x.rank() == 3 ? "add the batch axis, e.g. expand_dims(x, 0)"
                       : "reshape to [batch, height, width, channels]");
  }
}

void check_pair(std::string_view op, std::string_view name, const Dims& values, CallSite site) {
  if (values.size() != 2 || values[0] < 1 || values[1] < 1) {
    fail(site,
         fmt::format("{}: {} must be two positive sizes (height, width), got {}", op, name,
                     dims_to_string(values)),
         fmt::format("e.g. {} = {{2, 2}}", name));
  }
}

Array reduce_window(PrimId id, const Array& x, const Dims& window, const Dims& strides,
                    const SpatialPadding& pad, CallSite site) {
  ReduceWindowParams params{Dims{1, window[0], window[1], 1}, Dims{1, strides[0], strides[1], 1},
                            Dims{0, pad.low[0], pad.low[1], 0},
                            Dims{0, pad.high[0], pad.high[1], 0}};
  return bind1(id, {x}, params, site);
}

// Checks a pooling call and returns its padding.
SpatialPadding pool_padding(std::string_view op, const Array& x, const Dims& window,
                            const Dims& strides, Padding padding, CallSite site) {
  check_nhwc(op, x, site);
  check_pair(op, "window", window, site);
  check_pair(op, "strides", strides, site);
  if (padding == Padding::kSame) return same_padding(x.shape(), window, strides, Dims{1, 1});
  for (size_t i = 0; i < 2; ++i) {
    if (window[i] > x.dim(static_cast<int64_t>(i) + 1)) {
      fail(site,
           fmt::format("{}: the {}x{} window is larger than the {}x{} input {} with VALID padding",
                       op, window[0], window[1], x.dim(1), x.dim(2), x.aval().to_string()),
           "use Padding::kSame, or a window no larger than the input");
    }
  }
  return {};
}

}  // namespace

Array conv_general_dilated(const Array& x, const Array& w, Dims window_strides, Dims padding_low,
                           Dims padding_high, Dims lhs_dilation, Dims rhs_dilation,
                           int64_t feature_group_count, CallSite site) {
  if (!x.defined() || !w.defined()) {
    fail(site, "conv_general_dilated: an operand is an empty Array (default-constructed)");
  }
  auto [px, pw] = promote_operands(x, w, site);
  return bind1(
      prim::conv_general_dilated, {px, pw},
      ConvParams{std::move(window_strides), std::move(padding_low), std::move(padding_high),
                 std::move(lhs_dilation), std::move(rhs_dilation), feature_group_count},
      site);
}

Array conv2d(const Array& x, const Array& w, Dims strides, Padding padding, Dims dilation,
             int64_t groups, CallSite site) {
  check_nhwc("conv2d", x, site);
  if (!w.defined() || w.rank() != 4) {
    fail(site,
         fmt::format("conv2d: expects an HWIO kernel of rank 4 (height, width, in, out), got {}",
                     w.defined() ? w.aval().to_string() : "an empty Array"),
         "a kernel for C input and O output channels has shape [kh, kw, C / groups, O]");
  }
  check_pair("conv2d", "strides", strides, site);
  check_pair("conv2d", "dilation", dilation, site);
  if (groups < 1 || x.dim(3) % groups != 0) {
    fail(site,
         fmt::format("conv2d: groups={} must be positive and divide the {} channels of {}", groups,
                     x.dim(3), x.aval().to_string()),
         "groups = C gives a depthwise convolution; groups = 1 an ordinary one");
  }
  if (w.dim(2) * groups != x.dim(3)) {
    fail(site,
         fmt::format("conv2d: the input {} has {} channels but the kernel {} expects {} "
                     "(I={} x groups={})",
                     x.aval().to_string(), x.dim(3), w.aval().to_string(), w.dim(2) * groups,
                     w.dim(2), groups),
         "x is NHWC and w is HWIO; a PyTorch-style OIHW kernel needs transpose(w, {2, 3, 1, 0})");
  }
  Dims window{w.dim(0), w.dim(1)};
  SpatialPadding pad;
  if (padding == Padding::kSame) {
    pad = same_padding(x.shape(), window, strides, dilation);
  } else {
    for (size_t i = 0; i < 2; ++i) {
      int64_t span = (window[i] - 1) * dilation[i] + 1;
      if (span > x.dim(static_cast<int64_t>(i) + 1)) {
        fail(site,
             fmt::format("conv2d: the {}x{} kernel (dilation {}) spans {} cells, more than the "
                         "{}x{} input {} with VALID padding",
                         window[0], window[1], dims_to_string(dilation), span, x.dim(1), x.dim(2),
                         x.aval().to_string()),
             "use Padding::kSame, a smaller kernel or dilation, or a larger input");
      }
    }
  }
  return conv_general_dilated(x, w, strides, pad.low, pad.high, Dims{1, 1}, dilation, groups, site);
}

Array max_pool(const Array& x, Dims window, Dims strides, Padding padding, CallSite site) {
  SpatialPadding pad = pool_padding("max_pool", x, window, strides, padding, site);
  return reduce_window(prim::reduce_window_max, x, window, strides, pad, site);
}

Array avg_pool(const Array& x, Dims window, Dims strides, Padding padding, CallSite site) {
  SpatialPadding pad = pool_padding("avg_pool", x, window, strides, padding, site);
  if (!is_floating(x.dtype())) {
    fail(site,
         fmt::format("avg_pool: expects a floating-point input, got {}", x.aval().to_string()),
         "convert first, e.g. astype(x, DType::f32)");
  }
  Array sums = reduce_window(prim::reduce_window_sum, x, window, strides, pad, site);
  bool padded = pad.low[0] + pad.low[1] + pad.high[0] + pad.high[1] > 0;
  if (!padded) return sums / (window[0] * window[1]);
  // Windows that overlap the padding average over fewer cells: divide each output pixel
  // by the number of its window's cells inside the array (rows inside x columns inside).
  int64_t out_h = sums.dim(1), out_w = sums.dim(2);
  auto inside = [&](size_t axis, int64_t o) {
    int64_t begin = o * strides[axis] - pad.low[axis];
    int64_t end = begin + window[axis];
    int64_t size = x.dim(static_cast<int64_t>(axis) + 1);
    return std::max<int64_t>(0, std::min(end, size) - std::max<int64_t>(begin, 0));
  };
  AbstractValue count_aval(Shape{1, out_h, out_w, 1}, x.dtype());
  std::vector<std::byte> bytes(static_cast<size_t>(count_aval.size_bytes()));
  visit_dtype(x.dtype(), [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    S* counts = reinterpret_cast<S*>(bytes.data());
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        counts[oh * out_w + ow] =
            convert_element<S>(static_cast<double>(inside(0, oh) * inside(1, ow)));
      }
    }
  });
  Array counts = from_host_bytes(bytes.data(), count_aval, device_of(x), site);
  return div(sums, counts, site);
}

}  // namespace kiln
