// custom_vjp: a function with a hand-written backward rule (see docs/transformations.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/detail/pytree.h"

// ----- custom VJPs ------------------------------------------------------------------------
namespace kiln {
namespace detail {

struct CustomResult {
  std::vector<Array> outputs;
  std::vector<Array> residuals;
};
using CustomForward = std::function<CustomResult(std::span<const Array>)>;
using CustomBackward =
    std::function<std::vector<Array>(std::span<const Array> residuals, std::span<const Array> cts)>;

// Whether forward mode may differentiate a custom function's forward computation. kiln's
// own functions (a checkpoint, a replay's saved values) compute exactly the math they stand
// for, so they may; a user's custom_vjp refuses, as in JAX, since its backward rule would
// be silently bypassed.
enum class ForwardMode { kRefused, kThroughForward };
int64_t register_custom_function(std::string name, CustomForward forward, CustomBackward backward,
                                 ForwardMode forward_mode = ForwardMode::kRefused);
std::vector<Array> call_custom_function(int64_t id, std::span<const Array> inputs, CallSite site);

template <typename Fwd, typename... Args>
using ForwardResult = std::decay_t<std::invoke_result_t<const Fwd&, const std::decay_t<Args>&...>>;

}  // namespace detail

// A function with a hand-written VJP, for fused operations whose composed gradient would
// be slow or unstable (softmax cross-entropy, attention...). `fwd(args...)` returns
// {output, residuals}: the output (an Array or pytree) and the Arrays the backward pass
// needs. `bwd(residuals, output_cotangent)` returns the cotangents of the arguments, as a
// std::tuple with one entry per argument (a single Array when there is one argument).
// Arguments must be Arrays or pytrees of them; capture anything static in the lambdas.
// An integer or bool argument takes no cotangent (JAX gives it a float0 zero): return an
// empty `Array()` for it; a defined cotangent must still have its shape and dtype, and is
// discarded.
//
//   auto softplus = kiln::custom_vjp("softplus",
//       [](const Array& x) { Array y = log1p(exp(x)); return std::pair{y, std::vector{x}}; },
//       [](const std::vector<Array>& saved, const Array& g) { return g * logistic(saved[0]); });
//   Array dy = kiln::grad([&](const Array& x) { return sum(softplus(x)); })(x);
template <typename Fwd, typename Bwd>
auto custom_vjp(std::string name, Fwd fwd, Bwd bwd) {
  struct State {
    State(std::string n, Fwd f, Bwd b) : name(std::move(n)), fwd(std::move(f)), bwd(std::move(b)) {}
    std::string name;
    Fwd fwd;
    Bwd bwd;
    std::mutex mutex;
    std::map<std::string, int64_t> ids;  // one registration per argument structure
  };
  auto state = std::make_shared<State>(std::move(name), std::move(fwd), std::move(bwd));
  return [state](const auto&... args) {
    using Result = detail::ForwardResult<Fwd, decltype(args)...>;
    using Output = std::decay_t<decltype(std::declval<Result>().first)>;
    std::vector<Array> leaves = detail::flatten_args(args...);
    auto arg_template = std::make_tuple(args...);
    // One registration per argument structure (the forward and backward functions rebuild
    // arguments and cotangents from it); leaf types are handled by the primitive.
    std::string key;
    auto add_structure = [&](const auto& arg) {
      using Arg = std::decay_t<decltype(arg)>;
      if constexpr (detail::kIsPytree<Arg>) key += detail::PytreeAdapter<Arg>::structure(arg);
      key += ";";
    };
    (add_structure(args), ...);
    int64_t id;
    {
      std::lock_guard lock(state->mutex);
      auto found = state->ids.find(key);
      if (found == state->ids.end()) {
        auto output_template = std::make_shared<std::optional<Output>>();
        detail::CustomForward forward = [state, arg_template,
                                         output_template](std::span<const Array> flat) {
          const Array* next = flat.data();
          // Braced initialisation: its elements are evaluated left to right, so each
          // argument takes its own leaves (a function call's arguments, as in make_tuple,
          // may be evaluated in any order, and GCC goes right to left).
          auto rebuilt = std::apply(
              [&](const auto&... arg) {
                return std::tuple<std::decay_t<decltype(arg)>...>{
                    detail::unflatten_like(arg, next)...};
              },
              arg_template);
          Result result = std::apply(state->fwd, rebuilt);
          detail::CustomResult out{detail::flatten(result.first),
                                   std::vector<Array>(result.second.begin(), result.second.end())};
          *output_template = std::move(result.first);
          return out;
        };
        detail::CustomBackward backward = [state, arg_template, output_template](
                                              std::span<const Array> residuals,
                                              std::span<const Array> cts) {
          const Array* next = cts.data();
          Output cotangent = detail::unflatten_like(output_template->value(), next);
          std::vector<Array> saved(residuals.begin(), residuals.end());
          auto arg_cts = state->bwd(saved, cotangent);
          // One argument: its cotangent directly; several: a tuple of them.
          std::string expected = std::apply(
              [](const auto&... arg) {
                if constexpr (sizeof...(arg) == 1) {
                  return detail::structure_of(arg...);
                } else {
                  return detail::structure_of(std::tuple{arg...});
                }
              },
              arg_template);
          if (detail::structure_of(arg_cts) != expected) {
            detail::fail_structure_mismatch(
                "custom_vjp '" + state->name + "'", "backward function's result",
                detail::structure_of(arg_cts), "argument list", expected, CallSite());
          }
          return detail::flatten(arg_cts);
        };
        id = detail::register_custom_function(state->name, std::move(forward), std::move(backward));
        state->ids.emplace(key, id);
      } else {
        id = found->second;
      }
    }
    std::vector<Array> outputs = detail::call_custom_function(id, leaves, CallSite());
    if constexpr (std::is_same_v<Output, Array>) {
      return outputs.at(0);
    } else {
      static_assert(std::is_same_v<Output, std::vector<Array>>,
                    "custom_vjp: the forward output must be an Array or a std::vector<Array>");
      return outputs;
    }
  };
}

}  // namespace kiln
