// Activation functions (include/kiln/nn/activations.h), composed of kiln ops. Each form is
// chosen so that neither the value nor the gradient overflows at large |x|: no exp of a
// large positive number, no 0 * inf in a gradient through the branch a `where` discards.
#include "kiln/nn/activations.h"

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <string_view>

#include <fmt/format.h>

#include "base/edit_distance.h"
#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"

namespace kiln::nn {
namespace {

void check_float(std::string_view op, const Array& x, CallSite site) {
  if (!x.defined())
    fail(site, fmt::format("nn::{}: x is an empty Array (default-constructed)", op));
  if (!is_floating(x.dtype())) {
    fail(site,
         fmt::format("nn::{}: expected a floating-point array, got {}", op, x.aval().to_string()),
         "convert it first, e.g. astype(x, DType::f32)");
  }
}

int64_t softmax_axis(std::string_view op, const Array& x, int64_t axis, CallSite site) {
  check_float(op, x, site);
  int64_t rank = x.rank();
  if (axis < -rank || axis >= rank) {
    fail(site,
         fmt::format("nn::{}: axis {} is out of range for {} (rank {})", op, axis,
                     x.aval().to_string(), rank),
         "axes count from 0, or from the end when negative (-1 is the last)");
  }
  return axis < 0 ? axis + rank : axis;
}

// x minus its maximum along `axis`. The maximum only shifts the values for stability; the
// result does not depend on it mathematically, so no gradient flows through it.
Array shifted_by_max(const Array& x, int64_t axis, CallSite site) {
  return sub(x, stop_gradient(max(x, {axis}, /*keepdims=*/true, site), site), site);
}

}  // namespace

Array relu(const Array& x, CallSite site) {
  check_float("relu", x, site);
  // Not maximum(x, 0): its tie rule would give a gradient of 1/2 at 0; this gives 0 there,
  // as JAX and PyTorch do, and still propagates NaN (NaN <= 0 is false).
  return where(less_equal(x, kiln::detail::weak_scalar_like(0, true, x, site), site),
               zeros_like(x, site), x, site);
}

Array leaky_relu(const Array& x, double negative_slope, CallSite site) {
  check_float("leaky_relu", x, site);
  return where(greater_equal(x, kiln::detail::weak_scalar_like(0, true, x, site), site), x,
               mul(x, kiln::detail::weak_scalar_like(negative_slope, true, x, site), site), site);
}

Array elu(const Array& x, double alpha, CallSite site) {
  check_float("elu", x, site);
  Array zero = zeros_like(x, site);
  Array positive = greater(x, zero, site);
  // expm1 of a large positive x would overflow and poison the discarded branch's gradient.
  Array negative_part = expm1(where(positive, zero, x, site), site);
  return where(positive, x,
               mul(negative_part, kiln::detail::weak_scalar_like(alpha, true, x, site), site),
               site);
}

Array gelu(const Array& x, bool approximate, CallSite site) {
  check_float("gelu", x, site);
  Array half = kiln::detail::weak_scalar_like(0.5, true, x, site);
  Array one = kiln::detail::weak_scalar_like(1, true, x, site);
  if (!approximate) {
    Array cdf =
        mul(half,
            add(one,
                erf(mul(x, kiln::detail::weak_scalar_like(std::numbers::sqrt2 / 2, true, x, site),
                        site),
                    site),
                site),
            site);
    return mul(x, cdf, site);
  }
  // The tanh form's cdf is exactly 0 or 1 (in f64 too) once |x| >= 10, so clamping its
  // argument there changes no value; it keeps x^3 finite, whose derivative times a zero
  // tanh' would otherwise be NaN at |x| ~ 1e13 and beyond.
  Array clamped = clip(x, -10, 10, site);
  Array inner = mul(kiln::detail::weak_scalar_like(std::sqrt(2 / std::numbers::pi), true, x, site),
                    add(clamped,
                        mul(kiln::detail::weak_scalar_like(0.044715, true, x, site),
                            mul(clamped, mul(clamped, clamped, site), site), site),
                        site),
                    site);
  return mul(x, mul(half, add(one, kiln::tanh(inner, site), site), site), site);
}

Array silu(const Array& x, CallSite site) {
  check_float("silu", x, site);
  return mul(x, logistic(x, site), site);
}

Array sigmoid(const Array& x, CallSite site) {
  check_float("sigmoid", x, site);
  return logistic(x, site);
}

Array softplus(const Array& x, CallSite site) {
  check_float("softplus", x, site);
  // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): the exponent is never positive. -|x| is
  // written min(x, -x) so that the slope at 0 is sigmoid(0) = 1/2: max's tie gives 1/2 and
  // min's tie a slope of 0 there, where abs's slope at 0 (1, as in JAX) would give 0.
  return add(maximum(x, zeros_like(x, site), site),
             log1p(exp(minimum(x, neg(x, site), site), site), site), site);
}

Array softmax(const Array& x, int64_t axis, CallSite site) {
  int64_t a = softmax_axis("softmax", x, axis, site);
  Array e = exp(shifted_by_max(x, a, site), site);
  return div(e, sum(e, {a}, /*keepdims=*/true, site), site);
}

Array log_softmax(const Array& x, int64_t axis, CallSite site) {
  int64_t a = softmax_axis("log_softmax", x, axis, site);
  Array shifted = shifted_by_max(x, a, site);
  return sub(shifted, log(sum(exp(shifted, site), {a}, /*keepdims=*/true, site), site), site);
}

namespace {

// The mask `where` for x (bool, broadcasting to x's shape), or an error naming `op`.
Array mask_for(std::string_view op, const Array& x, const Array& where, CallSite site) {
  if (!where.defined()) fail(site, fmt::format("nn::{}: where is an empty Array", op));
  if (where.dtype() != DType::bool_) {
    fail(site,
         fmt::format("nn::{}: where must be a bool mask, got {}", op, where.aval().to_string()),
         "compare to get one, e.g. not_equal(tokens, pad_id)");
  }
  return broadcast_to(where, x.shape(), site);
}

// The masked maximum along `axis`, 0 where every element is masked: a finite shift for
// exp, so that no inf or NaN enters the forward pass or the gradient of a masked row.
Array masked_shift(const Array& x, const Array& mask, int64_t axis, CallSite site) {
  Array lowest =
      full(Shape{}, -std::numeric_limits<double>::infinity(), x.dtype(), device_of(x), site);
  Array peak = max(where(mask, x, broadcast_to(lowest, x.shape(), site), site), {axis}, true, site);
  peak = where(isfinite(peak, site), peak, zeros_like(peak, site), site);
  return stop_gradient(peak, site);
}

// What masked softmax and log_softmax share: x minus the masked maximum (masked elements
// enter as the shift itself, exp(0) = 1, so exp cannot overflow and no 0 * inf reaches the
// gradient), its exponentials with the masked ones zeroed, and their sum along the axis
// (1 for a row with every element masked, so that dividing gives zeros, not NaN).
struct MaskedExp {
  Array mask, shifted, e, total;
};

MaskedExp masked_exp(std::string_view op, const Array& x, int64_t axis, const Array& where_mask,
                     CallSite site) {
  Array mask = mask_for(op, x, where_mask, site);
  Array shift = masked_shift(x, mask, axis, site);
  Array shifted = sub(where(mask, x, broadcast_to(shift, x.shape(), site), site), shift, site);
  Array e = where(mask, exp(shifted, site), zeros_like(x, site), site);
  Array total = sum(e, {axis}, true, site);
  total = where(equal(total, zeros_like(total, site), site), ones_like(total, site), total, site);
  return {mask, shifted, e, total};
}

}  // namespace

Array softmax(const Array& x, int64_t axis, const Array& where_mask, CallSite site) {
  MaskedExp m = masked_exp("softmax", x, softmax_axis("softmax", x, axis, site), where_mask, site);
  return div(m.e, m.total, site);
}

Array log_softmax(const Array& x, int64_t axis, const Array& where_mask, CallSite site) {
  MaskedExp m =
      masked_exp("log_softmax", x, softmax_axis("log_softmax", x, axis, site), where_mask, site);
  Array minus_inf = broadcast_to(
      full(Shape{}, -std::numeric_limits<double>::infinity(), x.dtype(), device_of(x), site),
      x.shape(), site);
  return where(m.mask, sub(m.shifted, log(m.total, site), site), minus_inf, site);
}

ActivationFn activation_by_name(std::string_view name, CallSite site) {
  struct Entry {
    std::string_view name;
    ActivationFn fn;
  };
  static constexpr std::array<Entry, 10> kEntries = {{
      {"relu", [](const Array& x) { return relu(x); }},
      {"leaky_relu", [](const Array& x) { return leaky_relu(x); }},
      {"elu", [](const Array& x) { return elu(x); }},
      {"gelu", [](const Array& x) { return gelu(x, /*approximate=*/false); }},
      {"gelu_tanh", [](const Array& x) { return gelu(x, /*approximate=*/true); }},
      {"silu", [](const Array& x) { return silu(x); }},
      {"sigmoid", [](const Array& x) { return sigmoid(x); }},
      {"tanh", [](const Array& x) { return nn::tanh(x); }},
      {"softplus", [](const Array& x) { return softplus(x); }},
      {"identity", [](const Array& x) { return x; }},
  }};
  std::array<std::string_view, kEntries.size()> names;
  for (size_t i = 0; i < kEntries.size(); ++i) {
    if (kEntries[i].name == name) return kEntries[i].fn;
    names[i] = kEntries[i].name;
  }
  std::string_view guess = closest_match(name, names);
  fail(site,
       fmt::format("activation_by_name: unknown activation '{}'{}", name,
                   guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess)),
       "known activations: relu, leaky_relu, elu, gelu, gelu_tanh, silu, sigmoid, tanh, "
       "softplus, identity");
}

}  // namespace kiln::nn
