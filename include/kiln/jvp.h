// Forward-mode differentiation, in the spirit of JAX: jvp (a function's value and its
// directional derivative) and linearize (the value, and the derivative as a function to
// apply to many tangents). Arguments and results are Arrays or pytrees of them
// (kiln/tracing.h); Jacobians and Hessians are in kiln/jacobian.h.
//
//   auto f = [](const kiln::Array& x) { return kiln::sin(x) * x; };
//   auto [y, dy] = kiln::jvp(f, std::tuple{x}, std::tuple{t});   // dy = J(x) t
//   auto [y2, f_jvp] = kiln::linearize(f, x);                    // f_jvp(t) == dy
//
// Every primitive has a JVP rule (src/transforms/jvp_rules/), so forward mode goes through
// everything reverse mode does, and also through while_loop. Functions written with
// custom_vjp define reverse mode only and are refused, as in JAX.
#pragma once

#include <functional>
#include <memory>
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

namespace detail {

struct FlatLinearized {
  std::vector<Array> outputs;
  // Output tangents (one per output leaf; an empty Array means zero) for input tangents
  // (one per input leaf; an empty Array means zero, and non-float leaves take none).
  std::function<std::vector<Array>(std::span<const Array>)> push_forward;
};
FlatLinearized linearize_flat(const FlatFunction& fn, std::span<const Array> inputs, CallSite site);

// Raises unless the tangents have the primals' structure and each floating-point leaf's
// tangent its primal's shape and dtype; returns the tangent leaves, with non-float leaves'
// tangents dropped (they take none, as JAX's float0).
std::vector<Array> checked_tangents(std::span<const Array> primals, std::string primal_structure,
                                    std::span<const Array> tangents, std::string tangent_structure,
                                    std::string_view what, CallSite site);
// "(*, [*, *], static)": the structure of a function's arguments, static ones included.
template <typename... Args>
std::string arguments_structure(const Args&... args) {
  std::string text;
  auto one = [](const auto& value) -> std::string {
    if constexpr (kIsPytree<decltype(value)>) {
      return structure_of(value);
    } else {
      return "static";
    }
  };
  ((text += (text.empty() ? "" : ", ") + one(args)), ...);
  return "(" + text + ")";
}

// Output tangents with zeros where a result does not depend on the inputs.
std::vector<Array> with_zero_tangents(std::vector<Array> tangents, std::span<const Array> outputs,
                                      CallSite site);

}  // namespace detail

// (f(primals...), J(primals) tangents): the value and the directional derivative along
// `tangents`, which have the primals' structure, shapes and dtypes (tangents of integer and
// bool arguments are ignored; static arguments are passed through).
//   auto [y, dy] = kiln::jvp(f, std::tuple{x, w}, std::tuple{tx, tw});
template <typename F, typename... Args>
auto jvp(F f, const std::tuple<Args...>& primals, const std::tuple<Args...>& tangents,
         CallSite site = {}) {
  auto call = std::apply(
      [&](const auto&... arg) { return detail::FlatCall<F, Args...>(std::move(f), arg...); },
      primals);
  std::vector<Array> leaves = call.leaves();
  std::vector<Array> tangent_leaves = detail::checked_tangents(
      leaves,
      std::apply([](const auto&... arg) { return detail::arguments_structure(arg...); }, primals),
      std::apply([](const auto&... arg) { return detail::flatten_args(arg...); }, tangents),
      std::apply([](const auto&... arg) { return detail::arguments_structure(arg...); }, tangents),
      "jvp", site);
  detail::FlatLinearized flat = detail::linearize_flat(call.function(), leaves, site);
  std::vector<Array> out_tangents =
      detail::with_zero_tangents(flat.push_forward(tangent_leaves), flat.outputs, site);
  return std::make_pair(call.rebuild_result(flat.outputs), call.rebuild_result(out_tangents));
}

// (f(args...), f_jvp) where f_jvp(tangents...) is jvp's second result for those tangents,
// without running f again: the primal values are computed once and kept.
//   auto [y, f_jvp] = kiln::linearize(f, x);  Array dy = f_jvp(t);
template <typename F, typename... Args>
auto linearize(F f, const Args&... args) {
  CallSite site;
  auto call = std::make_shared<detail::FlatCall<F, Args...>>(std::move(f), args...);
  std::vector<Array> leaves = call->leaves();
  auto flat = std::make_shared<detail::FlatLinearized>(
      detail::linearize_flat(call->function(), leaves, site));
  auto outputs = call->rebuild_result(flat->outputs);
  std::string structure = detail::arguments_structure(args...);
  auto f_jvp = [call, flat, leaves, structure](const std::decay_t<Args>&... tangents) {
    CallSite at;
    std::vector<Array> tangent_leaves =
        detail::checked_tangents(leaves, structure, detail::flatten_args(tangents...),
                                 detail::arguments_structure(tangents...), "linearize", at);
    return call->rebuild_result(
        detail::with_zero_tangents(flat->push_forward(tangent_leaves), flat->outputs, at));
  };
  return std::make_pair(std::move(outputs), std::move(f_jvp));
}

}  // namespace kiln
