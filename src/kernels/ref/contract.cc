// Reference kernels of the contract family: dot_general as plain loops over offset tables
// of its axis groups, conv_general_dilated as direct loops over the output and the kernel
// window. Floats accumulate in double and round once; integers accumulate modulo 2^64 and
// wrap to the result's width, as XLA does.
#include <cstdint>
#include <type_traits>

#include "base/check.h"
#include "core/element_convert.h"
#include "kernels/contract_layout.h"
#include "kernels/ref/accumulator.h"
#include "kernels/ref/ref_kernels.h"
#include "prims/ids/contract.h"

namespace kiln {
namespace {

using ref::accum_t;
using ref::from_accum;
using ref::to_accum;

void ref_dot_general(const KernelCall& call) {
  const KernelInput& lhs = call.inputs[0];
  const KernelInput& rhs = call.inputs[1];
  const KernelOutput& out = call.outputs[0];
  const auto& p = std::get<DotGeneralParams>(call.params);
  DotLayout layout = dot_layout(lhs.aval->shape, rhs.aval->shape, p);
  std::vector<int64_t> lhs_batch = offset_table(layout.batch.sizes, layout.batch.lhs_strides);
  std::vector<int64_t> rhs_batch = offset_table(layout.batch.sizes, layout.batch.rhs_strides);
  std::vector<int64_t> lhs_free = offset_table(layout.lhs_free.sizes, layout.lhs_free.lhs_strides);
  std::vector<int64_t> rhs_free = offset_table(layout.rhs_free.sizes, layout.rhs_free.rhs_strides);
  std::vector<int64_t> lhs_sum = offset_table(layout.contract.sizes, layout.contract.lhs_strides);
  std::vector<int64_t> rhs_sum = offset_table(layout.contract.sizes, layout.contract.rhs_strides);
  visit_dtype(lhs.aval->dtype, [&](auto in_tag) {
    using S = storage_t<decltype(in_tag)::value>;
    if constexpr (std::is_same_v<S, bool>) {
      KILN_CHECK(false, "dot_general on bool");
    } else {
      visit_dtype(out.aval->dtype, [&](auto out_tag) {
        using D = storage_t<decltype(out_tag)::value>;
        const S* a = static_cast<const S*>(lhs.data);
        const S* b = static_cast<const S*>(rhs.data);
        D* c = static_cast<D*>(out.data);
        int64_t index = 0;
        for (size_t batch = 0; batch < lhs_batch.size(); ++batch) {
          for (int64_t i : lhs_free) {
            for (int64_t j : rhs_free) {
              accum_t<S> acc = 0;
              for (size_t k = 0; k < lhs_sum.size(); ++k) {
                acc += to_accum(a[lhs_batch[batch] + i + lhs_sum[k]]) *
                       to_accum(b[rhs_batch[batch] + j + rhs_sum[k]]);
              }
              c[index++] = from_accum<D>(acc);
            }
          }
        }
      });
    }
  });
}

void ref_conv(const KernelCall& call) {
  const KernelInput& lhs = call.inputs[0];
  const KernelInput& rhs = call.inputs[1];
  const KernelOutput& out = call.outputs[0];
  const auto& p = std::get<ConvParams>(call.params);
  const Shape& xs = lhs.aval->shape;  // N H W C
  const Shape& ws = rhs.aval->shape;  // KH KW I O
  const Shape& ys = out.aval->shape;  // N OH OW O
  int64_t in_per_group = ws[2];
  int64_t out_per_group = ws[3] / p.feature_group_count;
  visit_dtype(lhs.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (!std::is_floating_point_v<compute_t<S>>) {
      KILN_CHECK(false, "conv_general_dilated on {}", dtype_name(lhs.aval->dtype));
    } else {
      const S* x = static_cast<const S*>(lhs.data);
      const S* w = static_cast<const S*>(rhs.data);
      S* y = static_cast<S*>(out.data);
      // Input cell of output position `o` and kernel tap `k` along spatial axis `axis`, or -1
      // when it falls on padding or between dilated input cells.
      auto source = [&](int64_t axis, int64_t o, int64_t k) -> int64_t {
        size_t s = static_cast<size_t>(axis);
        int64_t at = o * p.window_strides[s] + k * p.rhs_dilation[s] - p.padding_low[s];
        if (at < 0 || at % p.lhs_dilation[s] != 0) return -1;
        at /= p.lhs_dilation[s];
        return at < xs[1 + axis] ? at : -1;
      };
      // Padding and dilation holes are zeros that take part in the products (0 * inf is
      // NaN), as in the padded, dilated input the convolution is defined on.
      for (int64_t n = 0; n < ys[0]; ++n) {
        for (int64_t oh = 0; oh < ys[1]; ++oh) {
          for (int64_t ow = 0; ow < ys[2]; ++ow) {
            for (int64_t o = 0; o < ys[3]; ++o) {
              int64_t group = o / out_per_group;
              double acc = 0;
              for (int64_t kh = 0; kh < ws[0]; ++kh) {
                int64_t ih = source(0, oh, kh);
                for (int64_t kw = 0; kw < ws[1]; ++kw) {
                  int64_t iw = source(1, ow, kw);
                  for (int64_t ci = 0; ci < in_per_group; ++ci) {
                    int64_t c = group * in_per_group + ci;
                    double value = ih < 0 || iw < 0
                                       ? 0.0
                                       : static_cast<double>(
                                             widen(x[((n * xs[1] + ih) * xs[2] + iw) * xs[3] + c]));
                    acc += value * static_cast<double>(
                                       widen(w[((kh * ws[1] + kw) * ws[2] + ci) * ws[3] + o]));
                  }
                }
              }
              y[((n * ys[1] + oh) * ys[2] + ow) * ys[3] + o] = convert_element<S>(acc);
            }
          }
        }
      }
    }
  });
}

}  // namespace

void register_ref_contract(PrimTable& table) {
  table[prim::dot_general].ref_kernel = ref_dot_general;
  table[prim::conv_general_dilated].ref_kernel = ref_conv;
}

}  // namespace kiln
