// Reference kernels for the elementwise primitives: one plain loop per primitive over the
// broadcast output, calling the scalar definitions in kernels/elementwise_ops.h. 16-bit
// floats are computed in float and rounded once.
#include <type_traits>

#include "base/check.h"
#include "core/element_convert.h"
#include "kernels/broadcast_iter.h"
#include "kernels/elementwise_ops.h"
#include "kernels/ref/ref_kernels.h"
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/select.h"
#include "prims/ids/unary.h"

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
  table[prim::neg].ref_kernel = ref_unary<ew::Neg>;
  table[prim::abs].ref_kernel = ref_unary<ew::Abs>;
  table[prim::sign].ref_kernel = ref_unary<ew::Sign>;
  table[prim::exp].ref_kernel = ref_unary<ew::Exp>;
  table[prim::expm1].ref_kernel = ref_unary<ew::Expm1>;
  table[prim::log].ref_kernel = ref_unary<ew::Log>;
  table[prim::log1p].ref_kernel = ref_unary<ew::Log1p>;
  table[prim::sqrt].ref_kernel = ref_unary<ew::Sqrt>;
  table[prim::rsqrt].ref_kernel = ref_unary<ew::Rsqrt>;
  table[prim::tanh].ref_kernel = ref_unary<ew::Tanh>;
  table[prim::logistic].ref_kernel = ref_unary<ew::Logistic>;
  table[prim::sin].ref_kernel = ref_unary<ew::Sin>;
  table[prim::cos].ref_kernel = ref_unary<ew::Cos>;
  table[prim::floor].ref_kernel = ref_unary<ew::Floor>;
  table[prim::ceil].ref_kernel = ref_unary<ew::Ceil>;
  table[prim::round].ref_kernel = ref_unary<ew::Round>;
  table[prim::is_finite].ref_kernel = ref_unary<ew::IsFinite>;
  table[prim::not_].ref_kernel = ref_unary<ew::Not>;
  table[prim::erf].ref_kernel = ref_unary<ew::Erf>;
  table[prim::erf_inv].ref_kernel = ref_unary<ew::ErfInv>;
  table[prim::add].ref_kernel = ref_binary<ew::Add>;
  table[prim::sub].ref_kernel = ref_binary<ew::Sub>;
  table[prim::mul].ref_kernel = ref_binary<ew::Mul>;
  table[prim::div].ref_kernel = ref_binary<ew::Div>;
  table[prim::rem].ref_kernel = ref_binary<ew::Rem>;
  table[prim::pow].ref_kernel = ref_binary<ew::Pow>;
  table[prim::max].ref_kernel = ref_binary<ew::Max>;
  table[prim::min].ref_kernel = ref_binary<ew::Min>;
  table[prim::and_].ref_kernel = ref_binary<ew::And>;
  table[prim::or_].ref_kernel = ref_binary<ew::Or>;
  table[prim::xor_].ref_kernel = ref_binary<ew::Xor>;
  table[prim::eq].ref_kernel = ref_binary<ew::Eq>;
  table[prim::ne].ref_kernel = ref_binary<ew::Ne>;
  table[prim::lt].ref_kernel = ref_binary<ew::Lt>;
  table[prim::le].ref_kernel = ref_binary<ew::Le>;
  table[prim::gt].ref_kernel = ref_binary<ew::Gt>;
  table[prim::ge].ref_kernel = ref_binary<ew::Ge>;
  table[prim::shift_left].ref_kernel = ref_binary<ew::ShiftLeft>;
  table[prim::shift_right_logical].ref_kernel = ref_binary<ew::ShiftRightLogical>;
  table[prim::shift_right_arithmetic].ref_kernel = ref_binary<ew::ShiftRightArithmetic>;
  table[prim::select].ref_kernel = ref_select;
  table[prim::convert_element_type].ref_kernel = ref_convert;
}

}  // namespace kiln
