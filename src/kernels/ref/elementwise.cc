// Reference kernels for the elementwise primitives: one plain loop per primitive over the
// broadcast output, calling the scalar definitions in kernels/elementwise_ops.h. 16-bit
// floats are computed in float and rounded once.
#include <type_traits>

#include "core/element_convert.h"
#include "kernels/broadcast_iter.h"
#include "kernels/elementwise_ops.h"
#include "kernels/ref/ref_kernels.h"

namespace kiln {
namespace {

template <typename Op>
void ref_unary(const KernelCall& call) {
  const KernelInput& x = call.inputs[0];
  const KernelOutput& y = call.outputs[0];
  visit_dtype(x.aval->dtype, [&](auto in_tag) {
    using S = storage_t<decltype(in_tag)::value>;
    using C = compute_t<S>;
    if constexpr (!std::is_invocable_v<Op, C>) {
      KILN_CHECK(false, "unsupported dtype {}", dtype_name(x.aval->dtype));
    } else {
      using R = std::invoke_result_t<Op, C>;
      const S* in = static_cast<const S*>(x.data);
      int64_t n = y.aval->num_elements();
      if constexpr (std::is_same_v<R, bool>) {
        bool* out = static_cast<bool*>(y.data);
        for (int64_t i = 0; i < n; ++i) out[i] = Op{}(widen(in[i]));
      } else {
        S* out = static_cast<S*>(y.data);
        for (int64_t i = 0; i < n; ++i) out[i] = convert_element<S>(Op{}(widen(in[i])));
      }
    }
  });
}

template <typename Op>
void ref_binary(const KernelCall& call) {
  const KernelInput& a = call.inputs[0];
  const KernelInput& b = call.inputs[1];
  const KernelOutput& y = call.outputs[0];
  const Shape& out_shape = y.aval->shape;
  std::array<Dims, 2> strides{broadcast_strides(a.aval->shape, out_shape),
                              broadcast_strides(b.aval->shape, out_shape)};
  visit_dtype(a.aval->dtype, [&](auto in_tag) {
    using S = storage_t<decltype(in_tag)::value>;
    using C = compute_t<S>;
    if constexpr (!std::is_invocable_v<Op, C, C>) {
      KILN_CHECK(false, "unsupported dtype {}", dtype_name(a.aval->dtype));
    } else {
      using R = std::invoke_result_t<Op, C, C>;
      const S* lhs = static_cast<const S*>(a.data);
      const S* rhs = static_cast<const S*>(b.data);
      using Out = std::conditional_t<std::is_same_v<R, bool>, bool, S>;
      Out* out = static_cast<Out*>(y.data);
      for_each_broadcast(out_shape, strides, [&](int64_t i, const std::array<int64_t, 2>& at) {
        out[i] = convert_element<Out>(Op{}(widen(lhs[at[0]]), widen(rhs[at[1]])));
      });
    }
  });
}

void ref_select(const KernelCall& call) {
  const Shape& out_shape = call.outputs[0].aval->shape;
  std::array<Dims, 3> strides{};
  for (size_t k = 0; k < 3; ++k)
    strides[k] = broadcast_strides(call.inputs[k].aval->shape, out_shape);
  const bool* pred = static_cast<const bool*>(call.inputs[0].data);
  int64_t width = dtype_size(call.outputs[0].aval->dtype);
  const auto* on_true = static_cast<const std::byte*>(call.inputs[1].data);
  const auto* on_false = static_cast<const std::byte*>(call.inputs[2].data);
  auto* out = static_cast<std::byte*>(call.outputs[0].data);
  for_each_broadcast(out_shape, strides, [&](int64_t i, const std::array<int64_t, 3>& at) {
    const std::byte* source = pred[at[0]] ? on_true + at[1] * width : on_false + at[2] * width;
    std::copy(source, source + width, out + i * width);
  });
}

void ref_convert(const KernelCall& call) {
  const KernelInput& x = call.inputs[0];
  const KernelOutput& y = call.outputs[0];
  int64_t n = y.aval->num_elements();
  visit_dtype(x.aval->dtype, [&](auto in_tag) {
    using S = storage_t<decltype(in_tag)::value>;
    visit_dtype(y.aval->dtype, [&](auto out_tag) {
      using D = storage_t<decltype(out_tag)::value>;
      const S* in = static_cast<const S*>(x.data);
      D* out = static_cast<D*>(y.data);
      for (int64_t i = 0; i < n; ++i) out[i] = convert_element<D>(in[i]);
    });
  });
}

}  // namespace

namespace elementwise {
void integer_division_by_zero() {
  fail(kUnknownSite, "integer division by zero",
       "mask the divisor first, e.g. where(b == 0, 1, b), or divide in floating point");
}
}  // namespace elementwise

void register_ref_elementwise(PrimTable& table) {
  namespace ew = elementwise;
  table[PrimId::neg].ref_kernel = ref_unary<ew::Neg>;
  table[PrimId::abs].ref_kernel = ref_unary<ew::Abs>;
  table[PrimId::sign].ref_kernel = ref_unary<ew::Sign>;
  table[PrimId::exp].ref_kernel = ref_unary<ew::Exp>;
  table[PrimId::expm1].ref_kernel = ref_unary<ew::Expm1>;
  table[PrimId::log].ref_kernel = ref_unary<ew::Log>;
  table[PrimId::log1p].ref_kernel = ref_unary<ew::Log1p>;
  table[PrimId::sqrt].ref_kernel = ref_unary<ew::Sqrt>;
  table[PrimId::rsqrt].ref_kernel = ref_unary<ew::Rsqrt>;
  table[PrimId::tanh].ref_kernel = ref_unary<ew::Tanh>;
  table[PrimId::logistic].ref_kernel = ref_unary<ew::Logistic>;
  table[PrimId::sin].ref_kernel = ref_unary<ew::Sin>;
  table[PrimId::cos].ref_kernel = ref_unary<ew::Cos>;
  table[PrimId::floor].ref_kernel = ref_unary<ew::Floor>;
  table[PrimId::ceil].ref_kernel = ref_unary<ew::Ceil>;
  table[PrimId::round].ref_kernel = ref_unary<ew::Round>;
  table[PrimId::is_finite].ref_kernel = ref_unary<ew::IsFinite>;
  table[PrimId::not_].ref_kernel = ref_unary<ew::Not>;
  table[PrimId::erf].ref_kernel = ref_unary<ew::Erf>;
  table[PrimId::erf_inv].ref_kernel = ref_unary<ew::ErfInv>;
  table[PrimId::add].ref_kernel = ref_binary<ew::Add>;
  table[PrimId::sub].ref_kernel = ref_binary<ew::Sub>;
  table[PrimId::mul].ref_kernel = ref_binary<ew::Mul>;
  table[PrimId::div].ref_kernel = ref_binary<ew::Div>;
  table[PrimId::rem].ref_kernel = ref_binary<ew::Rem>;
  table[PrimId::pow].ref_kernel = ref_binary<ew::Pow>;
  table[PrimId::max].ref_kernel = ref_binary<ew::Max>;
  table[PrimId::min].ref_kernel = ref_binary<ew::Min>;
  table[PrimId::and_].ref_kernel = ref_binary<ew::And>;
  table[PrimId::or_].ref_kernel = ref_binary<ew::Or>;
  table[PrimId::xor_].ref_kernel = ref_binary<ew::Xor>;
  table[PrimId::eq].ref_kernel = ref_binary<ew::Eq>;
  table[PrimId::ne].ref_kernel = ref_binary<ew::Ne>;
  table[PrimId::lt].ref_kernel = ref_binary<ew::Lt>;
  table[PrimId::le].ref_kernel = ref_binary<ew::Le>;
  table[PrimId::gt].ref_kernel = ref_binary<ew::Gt>;
  table[PrimId::ge].ref_kernel = ref_binary<ew::Ge>;
  table[PrimId::shift_left].ref_kernel = ref_binary<ew::ShiftLeft>;
  table[PrimId::shift_right_logical].ref_kernel = ref_binary<ew::ShiftRightLogical>;
  table[PrimId::shift_right_arithmetic].ref_kernel = ref_binary<ew::ShiftRightArithmetic>;
  table[PrimId::select].ref_kernel = ref_select;
  table[PrimId::convert_element_type].ref_kernel = ref_convert;
}

}  // namespace kiln
