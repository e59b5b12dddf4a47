// Structured control flow on traced values, as JAX's lax.scan, lax.cond, lax.switch,
// lax.while_loop and lax.fori_loop. Each traces its functions once into sub-programs held
// by a primitive (scan, cond, while_loop), so the loop or branch is part of the program:
// it prints nested, differentiates (scan, cond, fori_loop with static bounds) and batches
// under vmap. Carries, operands and results are pytrees (Array, Tree, std::vector<Array>,
// pairs and tuples of these). Functions may use arrays they capture (even values of an
// enclosing grad or vmap): those become operands of the primitive.
//
//   auto [total, partial_sums] = kiln::scan(
//       [](const Array& c, const Array& x) { return std::pair{c + x, c + x}; }, zeros({}), xs);
//   Array y = kiln::cond(x.sum() > 0, [](const Array& v) { return v * 2; },
//                        [](const Array& v) { return -v; }, x);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/ops.h"
#include "kiln/transforms.h"

namespace kiln {

struct ScanOptions {
  // The number of steps; needed when xs has no leaves, else it must equal the leading
  // axis of every xs leaf.
  std::optional<int64_t> length = std::nullopt;
  bool reverse = false;  // run steps length-1, ..., 0 (ys stay indexed by step)
  int64_t unroll = 1;    // steps per loop iteration; results are identical for every value
  // How the gradient gets each step's forward values. false: the forward pass keeps the
  // results of the step's costly ops (products, transcendentals) for the backward pass, as
  // JAX's scan does: memory grows with length times those results. true: it keeps only
  // the carry and runs each step's forward again in the backward pass (less memory, more
  // compute). Results are identical either way; checkpoint inside the body picks per value.
  bool recompute = false;
};

namespace detail {

std::vector<Array> scan_flat(const FlatFunction& body, std::span<const Array> init,
                             std::span<const Array> xs, const ScanOptions& options, CallSite site);
std::vector<Array> switch_flat(const Array& index, std::span<const FlatFunction> branches,
                               std::span<const Array> operands, CallSite site);
// A bool or integer scalar predicate as a branch index (false/0 -> 0, else 1).
Array predicate_index(const Array& pred, CallSite site);
Array switch_index(const Array& index, CallSite site);
std::vector<Array> while_flat(const FlatFunction& cond, const FlatFunction& body,
                              std::span<const Array> init, CallSite site);

template <typename T>
void check_same_structure(std::string_view what, const T& got, const T& expected,
                          std::string_view expected_role, CallSite site) {
  if (structure_of(got) != structure_of(expected)) {
    fail_structure_mismatch(what, "returned carry", structure_of(got), expected_role,
                            structure_of(expected), site);
  }
}

// Calls f(operands...) on flat leaves rebuilt like `operands`; remembers the result's
// structure in *result_like.
template <typename F, typename Result, typename... Ops>
FlatFunction flat_branch(const F& f, std::shared_ptr<std::optional<Result>> result_like,
                         const std::tuple<Ops...>& operands) {
  return [&f, result_like, &operands](std::span<const Array> leaves) {
    const Array* next = leaves.data();
    auto rebuilt = std::apply(
        [&](const auto&... op) { return std::tuple<Ops...>{unflatten_like(op, next)...}; },
        operands);
    Result result = std::apply(f, rebuilt);
    std::vector<Array> out = flatten(result);
    *result_like = std::move(result);
    return out;
  };
}

}  // namespace detail

// Loops f over the leading axis of xs, threading a carry: for each step t,
//   (carry, y_t) = f(carry, x_t)
// and returns (final carry, ys) where ys stacks the y_t on a new leading axis. f returns
// a std::pair (carry, y); the carry must keep its structure, shapes and dtypes. To loop
// without xs pass std::vector<Array>{} and ScanOptions{.length = n}; y may be
// std::vector<Array>{} too. Differentiable (its VJP is a scan the other way) and
// batchable.
template <typename F, typename Carry, typename Xs>
auto scan(F f, const Carry& init, const Xs& xs, ScanOptions options = {}, CallSite site = {}) {
  static_assert(detail::kIsPytree<Carry> && detail::kIsPytree<Xs>,
                "scan: init and xs must be Arrays, Trees, std::vector<Array>s or pairs/tuples of "
                "these");
  using Result = std::decay_t<std::invoke_result_t<const F&, const Carry&, const Xs&>>;
  using Y = std::decay_t<typename Result::second_type>;
  static_assert(detail::kIsPytree<Y>, "scan: f must return std::pair(carry, y) with a pytree y");
  std::optional<Y> y_like;
  detail::FlatFunction body = [&](std::span<const Array> leaves) {
    const Array* next = leaves.data();
    Carry carry = detail::unflatten_like(init, next);
    Xs x = detail::unflatten_like(xs, next);
    Result result = f(carry, x);
    Carry new_carry = result.first;
    detail::check_same_structure("scan", new_carry, init, "initial carry", site);
    std::vector<Array> out = detail::flatten(new_carry);
    detail::flatten_into(result.second, out);
    y_like = std::move(result.second);
    return out;
  };
  std::vector<Array> out =
      detail::scan_flat(body, detail::flatten(init), detail::flatten(xs), options, site);
  const Array* next = out.data();
  Carry carry = detail::unflatten_like(init, next);
  Y ys = detail::unflatten_like(*y_like, next);
  return std::pair<Carry, Y>{std::move(carry), std::move(ys)};
}

// switch_(index, branches, operands...): branches[index](operands...), with index an
// integer scalar clamped to [0, branches.size() - 1] (as lax.switch). Every branch must
// return the same structure and types. Only the chosen branch runs (under vmap with a
// batched index, all run and each example takes its own).
template <typename F, typename... Ops>
auto switch_(Operand index, const std::vector<F>& branches, const Ops&... operands) {
  using Result = std::decay_t<std::invoke_result_t<const F&, const Ops&...>>;
  static_assert(detail::kIsPytree<Result>,
                "switch_: branches must return an Array, a Tree, a std::vector<Array> or "
                "pairs/tuples of these");
  std::tuple<Ops...> ops{operands...};
  std::vector<std::shared_ptr<std::optional<Result>>> results;
  std::vector<detail::FlatFunction> flat;
  for (const F& branch : branches) {
    results.push_back(std::make_shared<std::optional<Result>>());
    flat.push_back(detail::flat_branch(branch, results.back(), ops));
  }
  std::vector<Array> leaves = detail::flatten_args(operands...);
  std::vector<Array> out =
      detail::switch_flat(detail::switch_index(index.array, index.site), flat, leaves, index.site);
  for (size_t b = 1; b < results.size(); ++b) {
    if (detail::structure_of(**results[b]) != detail::structure_of(**results[0])) {
      detail::fail_structure_mismatch("switch_", "result of branch " + std::to_string(b),
                                      detail::structure_of(**results[b]), "result of branch 0",
                                      detail::structure_of(**results[0]), index.site);
    }
  }
  const Array* next = out.data();
  return detail::unflatten_like(**results[0], next);
}

// cond(pred, true_fn, false_fn, operands...): true_fn(operands...) when the scalar pred
// (bool, or an integer: nonzero) holds, else false_fn(operands...). Both must return the
// same structure and types. A cond with two branches, false first, as in JAX.
template <typename TrueF, typename FalseF, typename... Ops>
auto cond(Operand pred, TrueF true_fn, FalseF false_fn, const Ops&... operands) {
  using Result = std::decay_t<std::invoke_result_t<const TrueF&, const Ops&...>>;
  static_assert(detail::kIsPytree<Result>,
                "cond: branches must return an Array, a Tree, a std::vector<Array> or "
                "pairs/tuples of these");
  using Fn = std::function<Result(const Ops&...)>;
  std::vector<Fn> branches{Fn(std::move(false_fn)), Fn(std::move(true_fn))};
  Array index = detail::predicate_index(pred.array, pred.site);
  return switch_(Operand(index, pred.site), branches, operands...);
}

// Runs body_fn while cond_fn(carry) holds and returns the final carry. cond_fn returns a
// bool scalar Array; body_fn returns a carry with init's structure, shapes and dtypes.
// Not reverse-differentiable (use scan or fori_loop with static bounds); batchable (a
// batched predicate runs until every example is done).
template <typename CondF, typename BodyF, typename Carry>
Carry while_loop(CondF cond_fn, BodyF body_fn, const Carry& init, CallSite site = {}) {
  static_assert(detail::kIsPytree<Carry>,
                "while_loop: the carry must be an Array, a Tree, a std::vector<Array> or "
                "pairs/tuples of these");
  detail::FlatFunction cond = [&](std::span<const Array> leaves) {
    const Array* next = leaves.data();
    Array pred = cond_fn(detail::unflatten_like(init, next));
    return std::vector<Array>{pred};
  };
  detail::FlatFunction body = [&](std::span<const Array> leaves) {
    const Array* next = leaves.data();
    Carry new_carry = body_fn(detail::unflatten_like(init, next));
    detail::check_same_structure("while_loop", new_carry, init, "initial carry", site);
    return detail::flatten(new_carry);
  };
  std::vector<Array> out = detail::while_flat(cond, body, detail::flatten(init), site);
  const Array* next = out.data();
  return detail::unflatten_like(init, next);
}

// for i in [lower, upper): carry = body_fn(i, carry), with i an i32 scalar Array. With
// integer bounds this is a scan of upper - lower steps, so it is differentiable; with
// Array bounds (known only when it runs) it is a while_loop.
template <typename BodyF, typename Carry>
Carry fori_loop(int64_t lower, int64_t upper, BodyF body_fn, const Carry& init,
                CallSite site = {}) {
  auto step = [&](const std::pair<Array, Carry>& state, const std::vector<Array>&) {
    Carry next = body_fn(state.first, state.second);
    return std::pair{std::pair<Array, Carry>{state.first + 1, std::move(next)},
                     std::vector<Array>{}};
  };
  std::pair<Array, Carry> start{scalar(static_cast<double>(lower), DType::i32, nullptr, site),
                                init};
  ScanOptions options{.length = std::max<int64_t>(upper - lower, 0)};
  return scan(step, start, std::vector<Array>{}, options, site).first.second;
}

template <typename BodyF, typename Carry>
Carry fori_loop(const Array& lower, const Array& upper, BodyF body_fn, const Carry& init,
                CallSite site = {}) {
  using State = std::pair<std::pair<Array, Array>, Carry>;
  State start{{astype(lower, DType::i32, site), astype(upper, DType::i32, site)}, init};
  auto cond_fn = [](const State& s) { return s.first.first < s.first.second; };
  auto body = [&](const State& s) {
    return State{{s.first.first + 1, s.first.second}, body_fn(s.first.first, s.second)};
  };
  return while_loop(cond_fn, body, start, site).second;
}

}  // namespace kiln
