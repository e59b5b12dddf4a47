// Fast CPU kernels for the elementwise primitives. f32/f64 arithmetic and the hot math
// functions run through the Highway loops (elementwise_simd.h); every other dtype/op runs
// a plain loop over the same scalar definitions the reference uses (elementwise_ops.h),
// which the compiler vectorises where it can. Both walk broadcast operands without
// materialising them and split the output into size-determined chunks.
#include <type_traits>

#include "base/check.h"
#include "core/element_convert.h"
#include "kernels/cpu/broadcast_layout.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_simd.h"
#include "kernels/cpu/vector_ops.h"
#include "kernels/elementwise_ops.h"
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/select.h"
#include "prims/ids/unary.h"

namespace kiln {
namespace {

namespace ew = elementwise;

// Elements per chunk: large enough that handing a chunk to another thread pays off.
constexpr int64_t kMinElementwiseChunk = 16384;

template <typename Op, PrimId kPrim>
void cpu_unary(const KernelCall& call) {
  const KernelInput& x = call.inputs[0];
  const KernelOutput& y = call.outputs[0];
  int64_t n = y.aval->num_elements();
  int64_t chunks = chunk_count(n, kMinElementwiseChunk);
  visit_dtype(x.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    using C = compute_t<S>;
    if constexpr (std::is_invocable_v<Op, C>) {
      using R = std::conditional_t<std::is_same_v<std::invoke_result_t<Op, C>, bool>, bool, S>;
      const S* in = static_cast<const S*>(x.data);
      R* out = static_cast<R*>(y.data);
      call.pool.parallel_for(chunks, [&](int64_t chunk) {
        int64_t begin = n * chunk / chunks, end = n * (chunk + 1) / chunks;
        constexpr auto vector_op = vector_unary_op(kPrim);
        if constexpr (vector_op.has_value() && std::is_same_v<S, float>) {
          simd::unary_f32(*vector_op, in + begin, out + begin, static_cast<size_t>(end - begin));
        } else if constexpr (vector_op.has_value() && std::is_same_v<S, double>) {
          simd::unary_f64(*vector_op, in + begin, out + begin, static_cast<size_t>(end - begin));
        } else {
          for (int64_t i = begin; i < end; ++i) out[i] = convert_element<R>(Op{}(widen(in[i])));
        }
      });
    } else {
      KILN_CHECK(false, "unsupported dtype {}", dtype_name(x.aval->dtype));
    }
  });
}

template <typename Op, PrimId kPrim>
void cpu_binary(const KernelCall& call) {
  const KernelInput& a = call.inputs[0];
  const KernelInput& b = call.inputs[1];
  const KernelOutput& y = call.outputs[0];
  auto layout = plan_broadcast<2>(y.aval->shape, {&a.aval->shape, &b.aval->shape});
  visit_dtype(a.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    using C = compute_t<S>;
    if constexpr (std::is_invocable_v<Op, C, C>) {
      using R = std::conditional_t<std::is_same_v<std::invoke_result_t<Op, C, C>, bool>, bool, S>;
      const S* lhs = static_cast<const S*>(a.data);
      const S* rhs = static_cast<const S*>(b.data);
      R* out = static_cast<R*>(y.data);
      size_t step_a = layout.inner_contiguous[0] ? 1 : 0;
      size_t step_b = layout.inner_contiguous[1] ? 1 : 0;
      for_each_run(layout, call.pool, kMinElementwiseChunk,
                   [&](int64_t at, const std::array<int64_t, 2>& offset, int64_t length) {
                     const S* pa = lhs + offset[0];
                     const S* pb = rhs + offset[1];
                     R* po = out + at;
                     constexpr auto vector_op = vector_binary_op(kPrim);
                     auto count = static_cast<size_t>(length);
                     if constexpr (vector_op.has_value() && std::is_same_v<S, float>) {
                       simd::binary_f32(*vector_op, pa, step_a, pb, step_b, po, count);
                     } else if constexpr (vector_op.has_value() && std::is_same_v<S, double>) {
                       simd::binary_f64(*vector_op, pa, step_a, pb, step_b, po, count);
                     } else {
                       with_inner_steps(step_a != 0, step_b != 0, [&](auto sa, auto sb) {
                         for (size_t i = 0; i < count; ++i) {
                           po[i] = convert_element<R>(
                               Op{}(widen(pa[i * sa.value]), widen(pb[i * sb.value])));
                         }
                       });
                     }
                   });
    } else {
      KILN_CHECK(false, "unsupported dtype {}", dtype_name(a.aval->dtype));
    }
  });
}

void cpu_select(const KernelCall& call) {
  const KernelOutput& y = call.outputs[0];
  auto layout = plan_broadcast<3>(
      y.aval->shape,
      {&call.inputs[0].aval->shape, &call.inputs[1].aval->shape, &call.inputs[2].aval->shape});
  const bool* pred = static_cast<const bool*>(call.inputs[0].data);
  visit_dtype(y.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    const S* on_true = static_cast<const S*>(call.inputs[1].data);
    const S* on_false = static_cast<const S*>(call.inputs[2].data);
    S* out = static_cast<S*>(y.data);
    const auto& contiguous = layout.inner_contiguous;
    with_inner_steps(contiguous[0], contiguous[1], contiguous[2], [&](auto sp, auto st, auto sf) {
      for_each_run(layout, call.pool, kMinElementwiseChunk,
                   [&](int64_t at, const std::array<int64_t, 3>& offset, int64_t length) {
                     const bool* p = pred + offset[0];
                     const S* t = on_true + offset[1];
                     const S* f = on_false + offset[2];
                     S* o = out + at;
                     if constexpr (sizeof(S) == 4) {
                       simd::select_32(p, sp.value, reinterpret_cast<const uint32_t*>(t), st.value,
                                       reinterpret_cast<const uint32_t*>(f), sf.value,
                                       reinterpret_cast<uint32_t*>(o), static_cast<size_t>(length));
                     } else {
                       for (int64_t i = 0; i < length; ++i) {
                         o[i] = p[i * sp.value] ? t[i * st.value] : f[i * sf.value];
                       }
                     }
                   });
    });
  });
}

void cpu_convert(const KernelCall& call) {
  const KernelInput& x = call.inputs[0];
  const KernelOutput& y = call.outputs[0];
  int64_t n = y.aval->num_elements();
  int64_t chunks = chunk_count(n, kMinElementwiseChunk);
  visit_dtype(x.aval->dtype, [&](auto in_tag) {
    using S = storage_t<decltype(in_tag)::value>;
    visit_dtype(y.aval->dtype, [&](auto out_tag) {
      using D = storage_t<decltype(out_tag)::value>;
      const S* in = static_cast<const S*>(x.data);
      D* out = static_cast<D*>(y.data);
      call.pool.parallel_for(chunks, [&](int64_t chunk) {
        int64_t begin = n * chunk / chunks, end = n * (chunk + 1) / chunks;
        for (int64_t i = begin; i < end; ++i) out[i] = convert_element<D>(in[i]);
      });
    });
  });
}

}  // namespace

void register_cpu_elementwise(PrimTable& table) {
  table[prim::neg].cpu_kernel = cpu_unary<ew::Neg, prim::neg>;
  table[prim::abs].cpu_kernel = cpu_unary<ew::Abs, prim::abs>;
  table[prim::sign].cpu_kernel = cpu_unary<ew::Sign, prim::sign>;
  table[prim::exp].cpu_kernel = cpu_unary<ew::Exp, prim::exp>;
  table[prim::log].cpu_kernel = cpu_unary<ew::Log, prim::log>;
  table[prim::sqrt].cpu_kernel = cpu_unary<ew::Sqrt, prim::sqrt>;
  table[prim::rsqrt].cpu_kernel = cpu_unary<ew::Rsqrt, prim::rsqrt>;
  table[prim::tanh].cpu_kernel = cpu_unary<ew::Tanh, prim::tanh>;
  table[prim::logistic].cpu_kernel = cpu_unary<ew::Logistic, prim::logistic>;
  table[prim::floor].cpu_kernel = cpu_unary<ew::Floor, prim::floor>;
  table[prim::ceil].cpu_kernel = cpu_unary<ew::Ceil, prim::ceil>;
  table[prim::round].cpu_kernel = cpu_unary<ew::Round, prim::round>;
  table[prim::is_finite].cpu_kernel = cpu_unary<ew::IsFinite, prim::is_finite>;
  table[prim::not_].cpu_kernel = cpu_unary<ew::Not, prim::not_>;
  table[prim::erf].cpu_kernel = cpu_unary<ew::Erf, prim::erf>;
  table[prim::erf_inv].cpu_kernel = cpu_unary<ew::ErfInv, prim::erf_inv>;
  table[prim::add].cpu_kernel = cpu_binary<ew::Add, prim::add>;
  table[prim::sub].cpu_kernel = cpu_binary<ew::Sub, prim::sub>;
  table[prim::mul].cpu_kernel = cpu_binary<ew::Mul, prim::mul>;
  table[prim::div].cpu_kernel = cpu_binary<ew::Div, prim::div>;
  table[prim::rem].cpu_kernel = cpu_binary<ew::Rem, prim::rem>;
  table[prim::pow].cpu_kernel = cpu_binary<ew::Pow, prim::pow>;
  table[prim::max].cpu_kernel = cpu_binary<ew::Max, prim::max>;
  table[prim::min].cpu_kernel = cpu_binary<ew::Min, prim::min>;
  table[prim::and_].cpu_kernel = cpu_binary<ew::And, prim::and_>;
  table[prim::or_].cpu_kernel = cpu_binary<ew::Or, prim::or_>;
  table[prim::xor_].cpu_kernel = cpu_binary<ew::Xor, prim::xor_>;
  table[prim::eq].cpu_kernel = cpu_binary<ew::Eq, prim::eq>;
  table[prim::ne].cpu_kernel = cpu_binary<ew::Ne, prim::ne>;
  table[prim::lt].cpu_kernel = cpu_binary<ew::Lt, prim::lt>;
  table[prim::le].cpu_kernel = cpu_binary<ew::Le, prim::le>;
  table[prim::gt].cpu_kernel = cpu_binary<ew::Gt, prim::gt>;
  table[prim::ge].cpu_kernel = cpu_binary<ew::Ge, prim::ge>;
  table[prim::shift_left].cpu_kernel = cpu_binary<ew::ShiftLeft, prim::shift_left>;
  table[prim::shift_right_logical].cpu_kernel =
      cpu_binary<ew::ShiftRightLogical, prim::shift_right_logical>;
  table[prim::shift_right_arithmetic].cpu_kernel =
      cpu_binary<ew::ShiftRightArithmetic, prim::shift_right_arithmetic>;
  table[prim::select].cpu_kernel = cpu_select;
  table[prim::convert_element_type].cpu_kernel = cpu_convert;
  // expm1, log1p, sin and cos keep their reference kernels: they are not on a hot path
  // and Highway's versions lose accuracy for large arguments (sin/cos range reduction).
}

}  // namespace kiln
