// vmap: a function of one example run on a batch, as jax.vmap. The function is written
// for one example; vmap(f) takes arguments with an extra (batch) axis and returns results
// with one, computing every example at once through each primitive's batching rule (so
// there is no loop over examples). It composes with grad, make_program and itself:
//
//   auto loss = [](const Tree& params, const Array& x, const Array& y) { ... };
//   // per-example gradients: params shared, x and y mapped along axis 0
//   Tree per_example = kiln::vmap(kiln::grad(loss), {kiln::kNotMapped, 0, 0})(params, xs, ys);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/transforms.h"

namespace kiln {

// Which axis of an argument (or result) carries the batch; kNotMapped: none (the same
// value for every example).
using AxisSpec = std::optional<int64_t>;
inline constexpr std::nullopt_t kNotMapped = std::nullopt;

namespace detail {

struct BatchedOutputs {
  std::vector<Array> values;
  std::vector<int64_t> dims;  // batch axis of each value, or -1 when not batched
  int64_t size = 0;
};
// Runs fn with inputs[i] mapped along in_axes[i] (kNotMapped: not at all). `input_names`
// name the inputs in errors.
BatchedOutputs vmap_flat(const FlatFunction& fn, std::span<const Array> inputs,
                         std::span<const std::optional<int64_t>> in_axes,
                         std::span<const std::string> input_names, CallSite site);
// A result moved so that its batch is on `out_axis` (repeated there when it was not
// batched); kNotMapped requires an unbatched result.
Array place_batch_axis(const Array& value, int64_t dim, std::optional<int64_t> out_axis,
                       int64_t size, const std::string& name, CallSite site);
[[noreturn]] void fail_axes_count(std::string_view which, size_t given, size_t expected,
                                  std::string_view what, CallSite site);
[[noreturn]] void fail_static_mapped(size_t argnum, CallSite site);

// Leaves per top-level element of a result: one entry per element of a pair or tuple,
// else a single entry.
template <typename T>
std::vector<size_t> top_level_leaf_counts(const T& value) {
  if constexpr (requires { std::tuple_size<T>::value; }) {
    std::vector<size_t> counts;
    std::apply([&](const auto&... item) { (counts.push_back(flatten(item).size()), ...); }, value);
    return counts;
  } else {
    return {flatten(value).size()};
  }
}

template <typename F>
class Vmap {
 public:
  Vmap(F f, std::vector<AxisSpec> in_axes, std::vector<AxisSpec> out_axes, CallSite site)
      : f_(std::move(f)),
        in_axes_(std::move(in_axes)),
        out_axes_(std::move(out_axes)),
        site_(site) {}

  template <typename... Args>
  auto operator()(const Args&... args) const {
    if (!in_axes_.empty() && in_axes_.size() != sizeof...(Args)) {
      fail_axes_count("in_axes", in_axes_.size(), sizeof...(Args), "arguments", site_);
    }
    FlatCall<F, Args...> call(f_, args...);
    std::vector<Array> leaves;
    std::vector<AxisSpec> leaf_axes;
    std::vector<std::string> names;
    size_t argnum = 0;
    auto add_argument = [&](const auto& arg) {
      using Arg = std::decay_t<decltype(arg)>;
      AxisSpec axis = in_axes_.empty() ? AxisSpec(0) : in_axes_[argnum];
      if constexpr (kIsPytree<Arg>) {
        std::vector<Array> own = flatten(arg);
        for (size_t j = 0; j < own.size(); ++j) {
          leaves.push_back(own[j]);
          leaf_axes.push_back(axis);
          names.push_back(own.size() == 1 && structure_of(arg) == "*"
                              ? "argument " + std::to_string(argnum)
                              : "argument " + std::to_string(argnum) + " (leaf " +
                                    std::to_string(j) + ")");
        }
      } else if (!in_axes_.empty() && axis) {
        fail_static_mapped(argnum, site_);
      }
      ++argnum;
    };
    (add_argument(args), ...);
    BatchedOutputs batched = vmap_flat(call.function(), leaves, leaf_axes, names, site_);
    auto result_like = call.rebuild_result(batched.values);
    std::vector<size_t> counts = top_level_leaf_counts(result_like);
    if (out_axes_.size() > 1 && out_axes_.size() != counts.size()) {
      fail_axes_count("out_axes", out_axes_.size(), counts.size(), "results", site_);
    }
    std::vector<Array> placed;
    size_t element = 0, left_in_element = counts.empty() ? 0 : counts[0];
    for (size_t i = 0; i < batched.values.size(); ++i) {
      while (left_in_element == 0) left_in_element = counts[++element];
      AxisSpec axis = out_axes_.empty()       ? AxisSpec(0)
                      : out_axes_.size() == 1 ? out_axes_[0]
                                              : out_axes_[element];
      placed.push_back(place_batch_axis(batched.values[i], batched.dims[i], axis, batched.size,
                                        "result " + std::to_string(i), site_));
      --left_in_element;
    }
    return call.rebuild_result(placed);
  }

 private:
  F f_;
  std::vector<AxisSpec> in_axes_;
  std::vector<AxisSpec> out_axes_;
  CallSite site_;
};

}  // namespace detail

// f mapped over a batch. in_axes: one entry per argument (the axis of every array in
// that argument that carries the batch, or kNotMapped), or empty for axis 0 of every
// Array/Tree argument (static arguments are never mapped). out_axes: where each result
// gets the batch: empty for axis 0, one entry for all results, or one per element of a
// pair/tuple result.
template <typename F>
auto vmap(F f, std::vector<AxisSpec> in_axes = {}, std::vector<AxisSpec> out_axes = {},
          CallSite site = {}) {
  return detail::Vmap<F>(std::move(f), std::move(in_axes), std::move(out_axes), site);
}

}  // namespace kiln
