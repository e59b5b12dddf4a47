// Rematerialization (gradient checkpointing), as jax.checkpoint: checkpoint(f, policy) is
// f, except that the backward pass of a gradient recomputes f's intermediate values from
// f's inputs instead of keeping them alive from the forward pass. The policy says which
// intermediates are worth keeping anyway; everything else is recomputed. Gradients are the
// same; peak memory drops to the inputs and the saved values of each checkpointed block.
//
//   auto block = [](const Array& x, const Array& w) { return tanh(matmul(x, w)); };
//   auto remat_block = kiln::checkpoint(block, kiln::save_dot_outputs());
//   Array g = kiln::grad([&](const Array& w) { return sum(remat_block(x, w)); })(w);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/transforms.h"

namespace kiln {

// Which of the checkpointed function's intermediate values the forward pass keeps for the
// backward pass. Inputs are always kept; what is not kept is recomputed.
struct CheckpointPolicy {
  enum class Kind { kSaveNothing, kSaveDotOutputs, kSaveNamed };
  Kind kind = Kind::kSaveNothing;
  std::vector<std::string> names;  // kSaveNamed: the checkpoint_name marks to keep
  // "save_nothing", "save_dot_outputs", "save_named(a,b)": how programs name the policy.
  std::string to_string() const;
};

// Keeps nothing but the inputs: the whole function is recomputed in the backward pass.
inline CheckpointPolicy save_nothing() {
  return CheckpointPolicy{};
}
// Keeps the results of dot_general (matmuls, the expensive part) and recomputes the rest
// (elementwise ops, reductions...) from them (jax.checkpoint_policies.dots_saveable).
inline CheckpointPolicy save_dot_outputs() {
  return CheckpointPolicy{CheckpointPolicy::Kind::kSaveDotOutputs, {}};
}
// Keeps the values marked with checkpoint_name(x, name) for one of `names`
// (jax.checkpoint_policies.save_only_these_names). Naming a mark that the function never
// makes is an error when the checkpointed function is called.
CheckpointPolicy save_named(std::vector<std::string> names, CallSite site = {});

// x, marked `name` for a save_named policy (an identity everywhere else; free).
Array checkpoint_name(const Array& x, std::string_view name, CallSite site = {});

namespace detail {

// fn(inputs) computed so that its gradient recomputes fn's intermediate values.
std::vector<Array> checkpoint_flat(const CheckpointPolicy& policy, const FlatFunction& fn,
                                   std::span<const Array> inputs, CallSite site);

template <typename F>
class Checkpoint {
 public:
  Checkpoint(F f, CheckpointPolicy policy, CallSite site)
      : f_(std::move(f)), policy_(std::move(policy)), site_(site) {}

  template <typename... Args>
  auto operator()(const Args&... args) const {
    FlatCall<F, Args...> call(f_, args...);
    std::vector<Array> leaves = call.leaves();
    std::vector<Array> outputs = checkpoint_flat(policy_, call.function(), leaves, site_);
    return call.rebuild_result(outputs);
  }

 private:
  F f_;
  CheckpointPolicy policy_;
  CallSite site_;
};

}  // namespace detail

// f with rematerialization under `policy`: same arguments (Arrays, Trees and other pytrees
// are traced; other arguments are static), same results, same gradients. It composes with
// grad (including grad of grad), vmap and make_program; values f closes over are handled
// like arguments, so gradients reach them.
template <typename F>
auto checkpoint(F f, CheckpointPolicy policy = save_nothing(), CallSite site = {}) {
  return detail::Checkpoint<F>(std::move(f), std::move(policy), site);
}

}  // namespace kiln
