// Transformations of ordinary C++ functions: tracing into programs and reverse-mode
// differentiation, in the spirit of JAX. A function may take and return Arrays, Trees,
// std::vectors of Arrays and pairs/tuples of these ("pytrees"); any other argument is
// static: it is passed through unchanged and is part of what was traced.
//
//   auto loss = [](const kiln::Array& w, const kiln::Array& x) { return kiln::sum(w * x); };
//   kiln::Array dw = kiln::grad(loss)(w, x);                  // d loss / d w
//   auto [value, dw2] = kiln::value_and_grad(loss)(w, x);
//   std::cout << kiln::make_program(loss, w, x);              // prints the traced program
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/tree.h"

namespace kiln {

class Program;

// Names the equations traced while it lives ("mlp/dense1" when nested); the names appear
// in printed programs, errors and (later) profiles.
//   { auto scope = kiln::named_scope("dense1"); y = matmul(x, w) + b; }
class NamedScope {
 public:
  explicit NamedScope(std::string_view name);
  ~NamedScope();
  NamedScope(const NamedScope&) = delete;
  NamedScope& operator=(const NamedScope&) = delete;

 private:
  size_t previous_length_;
};
inline NamedScope named_scope(std::string_view name) {
  return NamedScope(name);
}

// The value unchanged, but no gradient flows through it.
Array stop_gradient(const Array& x, CallSite site = {});

// ----- pytrees: how arguments and results become flat lists of Arrays -------------------
namespace detail {

template <typename T>
struct PytreeAdapter {
  static constexpr bool kIsPytree = false;
};

template <>
struct PytreeAdapter<Array> {
  static constexpr bool kIsPytree = true;
  static void flatten(const Array& value, std::vector<Array>& leaves) { leaves.push_back(value); }
  static Array unflatten(const Array&, const Array*& next) { return *next++; }
  static std::string structure(const Array&) { return "*"; }
};

template <>
struct PytreeAdapter<std::vector<Array>> {
  static constexpr bool kIsPytree = true;
  static void flatten(const std::vector<Array>& value, std::vector<Array>& leaves) {
    leaves.insert(leaves.end(), value.begin(), value.end());
  }
  static std::vector<Array> unflatten(const std::vector<Array>& like, const Array*& next) {
    std::vector<Array> out(next, next + like.size());
    next += like.size();
    return out;
  }
  static std::string structure(const std::vector<Array>& value) {
    std::string text = "[";
    for (size_t i = 0; i < value.size(); ++i) text += i == 0 ? "*" : ", *";
    return text + "]";
  }
};

template <>
struct PytreeAdapter<Tree> {
  static constexpr bool kIsPytree = true;
  static void flatten(const Tree& value, std::vector<Array>& leaves) {
    std::vector<Array> own = value.leaves();
    leaves.insert(leaves.end(), own.begin(), own.end());
  }
  static Tree unflatten(const Tree& like, const Array*& next) {
    auto count = static_cast<size_t>(like.num_leaves());
    Tree out = kiln::unflatten(like.structure(), std::span<const Array>(next, count));
    next += count;
    return out;
  }
  static std::string structure(const Tree& value) { return value.structure().to_string(); }
};

template <typename... T>
struct PytreeAdapter<std::tuple<T...>> {
  static constexpr bool kIsPytree = (PytreeAdapter<std::decay_t<T>>::kIsPytree && ...);
  static void flatten(const std::tuple<T...>& value, std::vector<Array>& leaves) {
    std::apply(
        [&](const auto&... item) { (PytreeAdapter<std::decay_t<T>>::flatten(item, leaves), ...); },
        value);
  }
  static std::tuple<T...> unflatten(const std::tuple<T...>& like, const Array*& next) {
    return std::apply(
        [&](const auto&... item) {
          return std::tuple<T...>{PytreeAdapter<std::decay_t<T>>::unflatten(item, next)...};
        },
        like);
  }
  static std::string structure(const std::tuple<T...>& value) {
    std::string text;
    std::apply(
        [&](const auto&... item) {
          ((text += (text.empty() ? "" : ", ") + PytreeAdapter<std::decay_t<T>>::structure(item)),
           ...);
        },
        value);
    return "(" + text + ")";
  }
};

template <typename A, typename B>
struct PytreeAdapter<std::pair<A, B>> {
  static constexpr bool kIsPytree =
      PytreeAdapter<std::decay_t<A>>::kIsPytree && PytreeAdapter<std::decay_t<B>>::kIsPytree;
  static void flatten(const std::pair<A, B>& value, std::vector<Array>& leaves) {
    PytreeAdapter<std::decay_t<A>>::flatten(value.first, leaves);
    PytreeAdapter<std::decay_t<B>>::flatten(value.second, leaves);
  }
  static std::pair<A, B> unflatten(const std::pair<A, B>& like, const Array*& next) {
    A first = PytreeAdapter<std::decay_t<A>>::unflatten(like.first, next);
    B second = PytreeAdapter<std::decay_t<B>>::unflatten(like.second, next);
    return {std::move(first), std::move(second)};
  }
  static std::string structure(const std::pair<A, B>& value) {
    return "(" + PytreeAdapter<std::decay_t<A>>::structure(value.first) + ", " +
           PytreeAdapter<std::decay_t<B>>::structure(value.second) + ")";
  }
};

template <typename T>
inline constexpr bool kIsPytree = PytreeAdapter<std::decay_t<T>>::kIsPytree;

// "*" for an Array, "[*, *]" for a vector, "{b: *, w: *}" for a Tree, "(*, [*])" for a
// pair or tuple: what must agree between a value and its cotangent.
template <typename T>
std::string structure_of(const T& value) {
  return PytreeAdapter<std::decay_t<T>>::structure(value);
}

// Raises "<what>: the <role> has structure S, but the <expected_role> has structure E".
void fail_structure_mismatch(std::string_view what, std::string_view role, const std::string& found,
                             std::string_view expected_role, const std::string& expected,
                             CallSite site);

template <typename T>
void flatten_into(const T& value, std::vector<Array>& leaves) {
  if constexpr (kIsPytree<T>) PytreeAdapter<std::decay_t<T>>::flatten(value, leaves);
}

template <typename T>
std::vector<Array> flatten(const T& value) {
  std::vector<Array> leaves;
  flatten_into(value, leaves);
  return leaves;
}

// A value shaped like `like` built from leaves (static values are returned as they are).
template <typename T>
std::decay_t<T> unflatten_like(const T& like, const Array*& next) {
  if constexpr (kIsPytree<T>) {
    return PytreeAdapter<std::decay_t<T>>::unflatten(like, next);
  } else {
    return like;
  }
}

template <typename T>
int64_t leaf_count(const T& value) {
  std::vector<Array> leaves;
  flatten_into(value, leaves);
  return static_cast<int64_t>(leaves.size());
}

// A function of flat leaves, as the transformations see every function.
using FlatFunction = std::function<std::vector<Array>(std::span<const Array>)>;

}  // namespace detail

// ----- programs ---------------------------------------------------------------------------

// A traced function's program.
struct TracedProgram {
  std::shared_ptr<const Program> program;
  std::string to_string() const;
};
std::ostream& operator<<(std::ostream& out, const TracedProgram& traced);

namespace detail {

TracedProgram trace_flat(const FlatFunction& fn, std::span<const AbstractValue> input_types,
                         CallSite site);

template <typename... Args>
std::vector<Array> flatten_args(const Args&... args) {
  std::vector<Array> leaves;
  (flatten_into(args, leaves), ...);
  return leaves;
}

// f(args...) seen as a function of the leaves of its pytree arguments. Remembers the last
// result so that flat results can be given the result's structure again.
template <typename F, typename... Args>
class FlatCall {
 public:
  using Result = std::decay_t<std::invoke_result_t<const F&, const std::decay_t<Args>&...>>;
  static_assert(kIsPytree<Result>,
                "a transformed function must return an Array, a Tree, a std::vector<Array>, or "
                "a pair/tuple of these");

  FlatCall(F f, const Args&... args) : f_(std::move(f)), args_(args...) {}

  FlatFunction function() const {
    return [f = f_, args = args_, last = last_](std::span<const Array> leaves) {
      const Array* next = leaves.data();
      auto rebuilt = std::apply(
          [&](const auto&... arg) {
            return std::tuple<std::decay_t<Args>...>{unflatten_like(arg, next)...};
          },
          args);
      Result result = std::apply(f, rebuilt);
      std::vector<Array> out = flatten(result);
      *last = std::move(result);
      return out;
    };
  }
  std::vector<Array> leaves() const {
    return std::apply([](const auto&... arg) { return flatten_args(arg...); }, args_);
  }
  // Leaf range [begin, end) of argument `argnum`.
  std::pair<size_t, size_t> leaf_range(size_t argnum) const {
    size_t begin = 0, index = 0, found_begin = 0, found_end = 0;
    std::apply(
        [&](const auto&... arg) {
          auto visit = [&](const auto& value) {
            size_t count = static_cast<size_t>(flatten(value).size());
            if (index == argnum) found_begin = begin, found_end = begin + count;
            begin += count;
            ++index;
          };
          (visit(arg), ...);
        },
        args_);
    return {found_begin, found_end};
  }
  Result rebuild_result(std::span<const Array> leaves) const {
    const Array* next = leaves.data();
    return unflatten_like(last_->value(), next);
  }
  const std::tuple<std::decay_t<Args>...>& args() const { return args_; }

 private:
  F f_;
  std::tuple<std::decay_t<Args>...> args_;
  std::shared_ptr<std::optional<Result>> last_ = std::make_shared<std::optional<Result>>();
};

}  // namespace detail

// Traces f(args...) into a program: Array and Tree arguments become the program's inputs
// (only their types matter); other arguments are static.
template <typename F, typename... Args>
TracedProgram make_program(F f, const Args&... args) {
  detail::FlatCall<F, Args...> call(std::move(f), args...);
  std::vector<AbstractValue> types;
  for (const Array& leaf : call.leaves()) types.push_back(leaf.aval());
  return detail::trace_flat(call.function(), types, CallSite());
}

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

}  // namespace kiln

// ----- gradient checking ------------------------------------------------------------------
namespace kiln {

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

int64_t register_custom_function(std::string name, CustomForward forward, CustomBackward backward);
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
