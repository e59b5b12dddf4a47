// Gradient checking by the VJP inner-product identity (see include/kiln/transforms.h).
// For random directions v (inputs) and u (outputs),
//   <u, (f(x + eps v) - f(x - eps v)) / (2 eps)>  must equal  <vjp(u), v>.
// One check covers every input and output at once; the order-2 check applies the same test
// to the function x -> vjp(u) at x.
#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "kiln/jvp.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"

namespace kiln::detail {
namespace {

std::vector<double> host_values(const Array& x) {
  HostArray host = x.to_host();
  std::vector<double> values(static_cast<size_t>(x.size()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = host.element<double>(static_cast<int64_t>(i));
  return values;
}

Array random_like(const Array& like, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  std::vector<double> values(static_cast<size_t>(like.size()));
  for (double& value : values) value = normal(rng);
  Array sample = from_host(values, like.shape());
  return astype(sample, like.dtype());
}

double inner(const std::vector<Array>& a, const std::vector<Array>& b, double* scale) {
  double total = 0, magnitude = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    if (!a[k].defined() || !b[k].defined()) continue;
    std::vector<double> x = host_values(a[k]), y = host_values(b[k]);
    for (size_t i = 0; i < x.size(); ++i) {
      total += x[i] * y[i];
      magnitude += std::fabs(x[i] * y[i]);
    }
  }
  if (scale != nullptr) *scale = magnitude;
  return total;
}

}  // namespace

namespace {

// The defaults documented at GradCheckOptions, for the least precise float input.
GradCheckOptions with_defaults(GradCheckOptions options, std::span<const Array> inputs) {
  int precision = 3;  // 3: f64, 2: f32, 1: 16-bit floats
  for (const Array& input : inputs) {
    if (input.dtype() == DType::f32) precision = std::min(precision, 2);
    if (input.dtype() == DType::f16 || input.dtype() == DType::bf16) precision = 1;
  }
  struct Defaults {
    double eps, rtol, atol;
  };
  constexpr Defaults kByPrecision[] = {{1e-1, 2e-1, 1e-2}, {1e-3, 1e-2, 1e-5}, {1e-6, 1e-5, 1e-8}};
  const Defaults& d = kByPrecision[precision - 1];
  if (!options.eps) options.eps = d.eps;
  if (!options.rtol) options.rtol = d.rtol;
  if (!options.atol) options.atol = d.atol;
  return options;
}

}  // namespace

void check_grads_flat(const FlatFunction& fn, std::span<const Array> inputs,
                      const GradCheckOptions& given, CallSite site) {
  GradCheckOptions options = with_defaults(given, inputs);
  const double eps = *options.eps;
  std::mt19937_64 rng(options.seed + 0x9e3779b97f4a7c15ull);
  std::vector<bool> differentiable(inputs.size());
  std::vector<Array> tangent(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    differentiable[i] = is_floating(inputs[i].dtype());
    if (differentiable[i]) tangent[i] = random_like(inputs[i], rng);
  }
  FlatVjp vjp = vjp_flat(fn, inputs, differentiable, site);
  std::vector<Array> cotangent(vjp.outputs.size());
  for (size_t k = 0; k < vjp.outputs.size(); ++k) {
    if (is_floating(vjp.outputs[k].dtype())) cotangent[k] = random_like(vjp.outputs[k], rng);
  }
  std::vector<Array> pulled = vjp.pullback(cotangent);

  // Central differences along the tangent.
  auto shifted = [&](double sign) {
    std::vector<Array> moved(inputs.begin(), inputs.end());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (differentiable[i])
        moved[i] =
            add(inputs[i],
                mul(tangent[i], detail::weak_scalar_like(sign * eps, true, tangent[i], site), site),
                site);
    }
    return fn(moved);
  };
  std::vector<Array> plus = shifted(+1), minus = shifted(-1);
  double numeric = 0, numeric_scale = 0;
  for (size_t k = 0; k < plus.size(); ++k) {
    if (!cotangent[k].defined()) continue;
    std::vector<double> p = host_values(plus[k]), m = host_values(minus[k]);
    std::vector<double> u = host_values(cotangent[k]);
    for (size_t i = 0; i < u.size(); ++i) {
      double derivative = (p[i] - m[i]) / (2 * eps);
      numeric += u[i] * derivative;
      numeric_scale += std::fabs(u[i] * derivative);
    }
  }
  // <u, J v> by one mode against the finite differences, within the tolerance.
  auto agrees = [&](std::string_view mode, std::string_view rule, double found, double scale) {
    double tolerance =
        *options.atol + *options.rtol * std::max({std::fabs(numeric), numeric_scale, scale});
    if (std::fabs(numeric - found) <= tolerance) return;
    fail(site,
         fmt::format("check_grads: {} and finite differences disagree: <u, J v> = {:.10g} by "
                     "finite differences (eps {}) but {:.10g} by the {} (difference {:.3g}, "
                     "tolerance {:.3g})",
                     mode, numeric, eps, found, rule, std::fabs(numeric - found), tolerance),
         fmt::format("check the {} rules of the primitives this function uses; use f64 inputs "
                     "so that finite differences are accurate",
                     rule));
  };
  double reverse_scale = 0;
  double reverse = inner(pulled, tangent, &reverse_scale);
  agrees("reverse-mode", "VJP", reverse, reverse_scale);
  if (options.forward) {
    std::vector<Array> pushed = linearize_flat(fn, inputs, site).push_forward(tangent);
    double forward_scale = 0;
    double forward = inner(cotangent, pushed, &forward_scale);
    agrees("forward mode", "JVP", forward, forward_scale);
  }
  if (options.order >= 2) {
    // The gradient function itself: x -> J(x)^T u, with u fixed.
    FlatFunction pullback_fn = [fn, cotangent, differentiable, site](std::span<const Array> x) {
      FlatVjp inner_vjp = vjp_flat(fn, x, differentiable, site);
      std::vector<Array> result = inner_vjp.pullback(cotangent);
      std::vector<Array> floats;
      for (size_t i = 0; i < result.size(); ++i) {
        if (differentiable[i]) floats.push_back(result[i]);
      }
      return floats;
    };
    GradCheckOptions next = given;
    next.order = options.order - 1;
    next.seed = options.seed + 1;
    check_grads_flat(pullback_fn, inputs, next, site);
  }
}

}  // namespace kiln::detail
