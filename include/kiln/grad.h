// Reverse-mode differentiation of ordinary C++ functions, in the spirit of JAX: grad,
// value_and_grad (with argnums and has_aux), vjp, and check_grads against finite
// differences. Arguments and results are Arrays or pytrees of them (kiln/tracing.h).
//
//   auto loss = [](const kiln::Array& w, const kiln::Array& x) { return kiln::sum(w * x); };
//   kiln::Array dw = kiln::grad(loss)(w, x);                  // d loss / d w
//   auto [value, dw2] = kiln::value_and_grad(loss)(w, x);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/detail/pytree.h"

namespace kiln {

// ----- reverse-mode differentiation -----------------------------------------------------

namespace detail {

struct FlatVjp {
  std::vector<Array> outputs;
  // Input cotangents (one per input leaf: zeros for a differentiated leaf that nothing
  // reached, an empty Array for a leaf not differentiated) for output cotangents (one per
  // output leaf; an empty Array means zero).
  std::function<std::vector<Array>(std::span<const Array>)> pullback;
};

// `differentiable[i]`: whether input leaf i is differentiated (the others are constants).
FlatVjp vjp_flat(const FlatFunction& fn, std::span<const Array> inputs,
                 const std::vector<bool>& differentiable, CallSite site);

// grad needs one scalar floating-point output.
void check_scalar_output(const Array& output, std::string_view what, CallSite site);
void check_differentiable_leaves(std::span<const Array> leaves, std::string_view what,
                                 CallSite site);
Array unit_cotangent(const Array& output, CallSite site);
// Raises "vjp: the cotangent for output <index> is <type>, but the output is <type>" unless
// the cotangent's shape and dtype are the output's.
void check_cotangent_type(const Array& cotangent, const AbstractValue& output, size_t index,
                          CallSite site);
// Zeros shaped like `leaf`: the cotangent of an argument that was not differentiated.
Array zeros_cotangent(const Array& leaf, CallSite site);

// The gradient of f with respect to the arguments kArgnums (a single gradient for one
// argnum, a std::tuple of them for several), optionally with f's value.
template <bool kWithValue, bool kHasAux, typename F, int... kArgnums>
class Grad {
 public:
  static_assert(sizeof...(kArgnums) > 0, "grad: name at least one argument to differentiate");

  Grad(F f, CallSite site) : f_(std::move(f)), site_(site) {}

  template <typename... Args>
  auto operator()(const Args&... args) const {
    static_assert(((kArgnums >= 0 && kArgnums < static_cast<int>(sizeof...(Args))) && ...),
                  "grad: an argnum is out of range for the arguments the function was called "
                  "with (argnums count from 0)");
    static_assert((kIsPytree<std::tuple_element_t<kArgnums, std::tuple<Args...>>> && ...),
                  "grad: an argnum names a static argument; differentiate with respect to an "
                  "Array, a Tree, or a vector/pair/tuple of them");
    FlatCall<F, Args...> call(f_, args...);
    std::vector<Array> leaves = call.leaves();
    std::vector<bool> differentiable(leaves.size(), false);
    for (size_t argnum : {static_cast<size_t>(kArgnums)...}) {
      auto [begin, end] = call.leaf_range(argnum);
      for (size_t i = begin; i < end; ++i) differentiable[i] = true;
      check_differentiable_leaves(std::span<const Array>(leaves).subspan(begin, end - begin),
                                  "grad", site_);
    }
    FlatVjp vjp = vjp_flat(call.function(), leaves, differentiable, site_);
    check_scalar_output(vjp.outputs.empty() ? Array() : vjp.outputs[0],
                        kHasAux ? "grad (the first element of the (loss, aux) result)" : "grad",
                        site_);
    if constexpr (!kHasAux) {
      if (vjp.outputs.size() != 1) check_scalar_output(Array(), "grad", site_);
    }
    std::vector<Array> cotangents(vjp.outputs.size());
    cotangents[0] = unit_cotangent(vjp.outputs[0], site_);
    std::vector<Array> input_cotangents = vjp.pullback(cotangents);
    auto gradient_of = [&]<int kArgnum>() {
      const Array* next = input_cotangents.data() + call.leaf_range(kArgnum).first;
      return unflatten_like(std::get<kArgnum>(call.args()), next);
    };
    auto gradients = [&] {
      if constexpr (sizeof...(kArgnums) == 1) {
        return gradient_of.template operator()<kArgnums...>();
      } else {
        return std::tuple{gradient_of.template operator()<kArgnums>()...};
      }
    };
    if constexpr (kWithValue) {
      return std::make_pair(call.rebuild_result(vjp.outputs), gradients());
    } else {
      return gradients();
    }
  }

 private:
  F f_;
  CallSite site_;
};

}  // namespace detail

// The gradient of f (which returns a scalar float Array) with respect to argument
// kArgnum (an Array or a pytree); the result has that argument's type. Several argnums
// give a std::tuple of gradients, in the order named. An argnum out of range, or one that
// names a static argument, is a compile-time error.
//   Array dw = kiln::grad(loss)(w, x);        Tree dp = kiln::grad<1>(f)(x, params);
//   auto [dw, db] = kiln::grad<0, 1>(loss)(w, b, x);
template <int kArgnum = 0, int... kMoreArgnums, typename F>
auto grad(F f, CallSite site = {}) {
  return detail::Grad<false, false, F, kArgnum, kMoreArgnums...>(std::move(f), site);
}

// (f(args...), its gradient): auto [loss, g] = kiln::value_and_grad(loss_fn)(params, x, y);
template <int kArgnum = 0, int... kMoreArgnums, typename F>
auto value_and_grad(F f, CallSite site = {}) {
  return detail::Grad<true, false, F, kArgnum, kMoreArgnums...>(std::move(f), site);
}

// For f returning (loss, aux): ((loss, aux), gradient of loss). aux is not differentiated.
struct HasAux {};
// For f returning (loss, aux): (gradient of loss, aux), as jax.grad(f, has_aux=True).
template <int kArgnum = 0, int... kMoreArgnums, typename F>
auto grad(F f, HasAux, CallSite site = {}) {
  auto with_value = detail::Grad<true, true, F, kArgnum, kMoreArgnums...>(std::move(f), site);
  return [with_value](const auto&... args) {
    auto [value, gradient] = with_value(args...);
    return std::make_pair(std::move(gradient), std::move(value.second));
  };
}
template <int kArgnum = 0, int... kMoreArgnums, typename F>
auto value_and_grad(F f, HasAux, CallSite site = {}) {
  return detail::Grad<true, true, F, kArgnum, kMoreArgnums...>(std::move(f), site);
}

// Reverse-mode: the outputs of f(args...) and a pullback mapping output cotangents
// (shaped like the outputs) to cotangents of every argument (a tuple shaped like the
// arguments; static arguments come back unchanged).
template <typename F, typename... Args>
auto vjp(F f, const Args&... args) {
  CallSite site;
  auto call = std::make_shared<detail::FlatCall<F, Args...>>(std::move(f), args...);
  std::vector<Array> leaves = call->leaves();
  std::vector<bool> differentiable(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) differentiable[i] = is_floating(leaves[i].dtype());
  detail::FlatVjp flat = detail::vjp_flat(call->function(), leaves, differentiable, site);
  auto outputs = call->rebuild_result(flat.outputs);
  using Result = std::decay_t<decltype(outputs)>;
  // Errors in the pullback name the line that calls it.
  auto pullback = [call, outputs, leaves, pull = std::move(flat.pullback)](const Result& cotangent,
                                                                           CallSite site = {}) {
    if (detail::structure_of(cotangent) != detail::structure_of(outputs)) {
      detail::fail_structure_mismatch("vjp", "cotangent", detail::structure_of(cotangent),
                                      "function's output", detail::structure_of(outputs), site);
    }
    std::vector<Array> cts = detail::flatten(cotangent);
    std::vector<Array> flat_outputs = detail::flatten(outputs);
    for (size_t i = 0; i < cts.size(); ++i) {
      if (cts[i].defined()) detail::check_cotangent_type(cts[i], flat_outputs[i].aval(), i, site);
    }
    std::vector<Array> input_cts = pull(cts);
    // Integer and bool arguments get zeros (JAX gives float0 zeros).
    for (size_t i = 0; i < input_cts.size(); ++i) {
      if (!input_cts[i].defined()) input_cts[i] = detail::zeros_cotangent(leaves[i], site);
    }
    const Array* next = input_cts.data();
    return std::apply(
        [&](const auto&... arg) {
          return std::tuple<std::decay_t<Args>...>{detail::unflatten_like(arg, next)...};
        },
        call->args());
  };
  return std::make_pair(std::move(outputs), std::move(pullback));
}

// ----- gradient checking ------------------------------------------------------------------

// Unset step and tolerances are chosen for the least precise floating-point input:
//   f64: eps 1e-6, rtol 1e-5, atol 1e-8;  f32: eps 1e-3, rtol 1e-2, atol 1e-5;
//   f16/bf16: eps 1e-1, rtol 2e-1, atol 1e-2 (coarse: prefer checking in f64).
struct GradCheckOptions {
  int order = 1;  // 2 also checks the gradient of the gradient
  // Finite-difference step: inputs move by +-eps times a standard-normal direction (an
  // absolute step, so scale inputs to order 1 or set eps to match them).
  std::optional<double> eps = std::nullopt;
  std::optional<double> rtol =
      std::nullopt;  // tolerances on <u, J v> (rtol scaled by its magnitude)
  std::optional<double> atol = std::nullopt;
  uint64_t seed = 0;  // for the random directions
  // Also checks forward mode (jvp) along the same direction: <u, J v> by the JVP, as
  // jax.test_util.check_grads with modes=("fwd", "rev"). With order 2, the JVP of the
  // gradient too (forward over reverse, as hessian computes it).
  bool forward = false;
};

namespace detail {
// Throws a kiln::Error describing the mismatch when reverse-mode derivatives of `fn` at
// `inputs` disagree with central finite differences (the VJP inner-product identity
// <u, J v> = <J^T u, v> for random v and u). Only floating-point leaves are perturbed.
void check_grads_flat(const FlatFunction& fn, std::span<const Array> inputs,
                      const GradCheckOptions& options, CallSite site);
}  // namespace detail

// Checks f's reverse-mode derivatives at args against finite differences, for users who
// write their own primitives' rules or custom_vjp functions. Use f64 inputs for tight
// tolerances. Throws a kiln::Error with the discrepancy when the check fails.
//   kiln::check_grads(my_loss, std::tuple{params, x}, {.order = 2});
template <typename F, typename... Args>
void check_grads(F f, const std::tuple<Args...>& args, GradCheckOptions options = {},
                 CallSite site = {}) {
  auto call = std::apply(
      [&](const auto&... arg) { return detail::FlatCall<F, Args...>(std::move(f), arg...); }, args);
  std::vector<Array> leaves = call.leaves();
  detail::check_grads_flat(call.function(), leaves, options, site);
}

}  // namespace kiln
