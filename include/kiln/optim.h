// kiln::optim: optimizers as gradient transformations over Trees, in the style of Optax.
// A transformation is a pair of ordinary functions, so an optimizer update traces into the
// same program as the forward and backward pass and the whole train step jits as one:
//
//   optim::GradientTransformation opt = optim::adamw(optim::warmup_cosine(1e-3, 100, 5000));
//   optim::GradientTransformation plain = optim::adamw(1e-3);  // a constant rate, as in Optax
//   Tree opt_state = opt.init(params);
//   auto step = jit([&](const Tree& params, const Tree& opt_state, const Array& x, const Array& y)
//   {
//     auto [loss, grads] = value_and_grad(loss_fn)(params, x, y);
//     auto [updates, new_state] = opt.update(grads, opt_state, params);
//     return std::make_tuple(optim::apply_updates(params, updates), new_state, loss);
//   });
//
// Updates are what to add to the parameters (already negated and scaled by the learning
// rate). State trees hold the step count as an i32 scalar, so a schedule is evaluated on
// the traced count and changing learning rate never recompiles.
//
// Constructors check their arguments (a negative learning rate or weight decay, eps <= 0,
// betas outside [0, 1), unsorted boundaries) and report errors at the caller's line;
// `update` checks that the gradients match the state (structure, shapes, dtypes) and names
// the first path where they differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/error.h"
#include "kiln/tree.h"

namespace kiln::optim {

// ----- schedules -------------------------------------------------------------------------
// A learning rate as a function of the step count (an i32 scalar Array, possibly traced),
// returning an f32 scalar. Step 0 is the first update.
using Schedule = std::function<Array(const Array& step)>;

Schedule constant(double value, CallSite site = {});
// From init to end linearly over `steps`, then end.
Schedule linear(double init, double end, int64_t steps, CallSite site = {});
// init * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha).
Schedule cosine_decay(double init, int64_t decay_steps, double alpha = 0.0, CallSite site = {});
// Linear 0 -> peak over warmup_steps, then cosine from peak to end_value by decay_steps
// (counted from step 0, as optax.warmup_cosine_decay_schedule).
Schedule warmup_cosine(double peak, int64_t warmup_steps, int64_t decay_steps,
                       double end_value = 0.0, CallSite site = {});
// values[i] while step < boundaries[i]; values.size() == boundaries.size() + 1.
Schedule piecewise_constant(std::vector<int64_t> boundaries, std::vector<double> values,
                            CallSite site = {});
// init * rate^(step / transition_steps), floored exponent when staircase.
Schedule exponential(double init, double rate, int64_t transition_steps, bool staircase = false,
                     CallSite site = {});

// The value of a schedule at a concrete step (for logs and tests).
double schedule_value(const Schedule& schedule, int64_t step, CallSite site = {});

// What an optimizer takes as its learning rate: a number, a constant rate
// (optim::adamw(1e-3), as Optax takes one), or any schedule, including a lambda of the
// step. It is the schedule itself, so the optimizers use it as one, and check it as one
// (a negative or non-finite rate is refused naming the optimizer).
class LearningRate : public Schedule {
 public:
  LearningRate(double value);  // implicit on purpose, as above
  LearningRate(Schedule schedule) : Schedule(std::move(schedule)) {}
  LearningRate(std::nullptr_t) : Schedule(nullptr) {}  // refused by the optimizer, by name
  template <typename F>
  requires(std::is_invocable_r_v<Array, const F&, const Array&> &&
           !std::is_convertible_v<F, double> && !std::is_same_v<std::decay_t<F>, Schedule>)
      LearningRate(F schedule)
      : Schedule(std::move(schedule)) {}
};

// ----- transformations -------------------------------------------------------------------
struct GradientTransformation {
  std::string name;
  std::function<Tree(const Tree& params)> init;
  // (updates, new state). `params` is needed by weight decay; others ignore it.
  std::function<std::pair<Tree, Tree>(const Tree& grads, const Tree& state, const Tree& params)>
      update;
  // The learning rate the most recent update used (the schedule at count - 1; at count 0,
  // the rate the first update will use), read from the state; nullopt for
  // transformations without one. chain asks its members in order.
  std::function<std::optional<Array>(const Tree& state)> learning_rate;
};

// params + updates, leaf by leaf (the structures must match).
Tree apply_updates(const Tree& params, const Tree& updates, CallSite site = {});

GradientTransformation sgd(LearningRate learning_rate, CallSite site = {});
// v = beta * v + g; update = -lr * v, or -lr * (g + beta * v) when nesterov
// (torch.optim.SGD's momentum and nesterov, dampening 0).
GradientTransformation momentum(LearningRate learning_rate, double beta = 0.9,
                                bool nesterov = false, CallSite site = {});
GradientTransformation nesterov(LearningRate learning_rate, double beta = 0.9, CallSite site = {});

struct AdamOptions {
  double b1 = 0.9;
  double b2 = 0.999;
  double eps = 1e-8;
};
// Kingma & Ba, with bias correction: m_hat / (sqrt(v_hat) + eps).
GradientTransformation adam(LearningRate learning_rate, AdamOptions options = {},
                            CallSite site = {});
// Loshchilov & Hutter: adam's update minus lr * weight_decay * param, the decay applied
// only to the leaves for which `mask(path, param)` is true. The mask is called while
// tracing, so it should look at the path and the param's type, not its values. The default
// (null) decays every leaf, as torch.optim.AdamW.
using DecayMask = std::function<bool(std::string_view path, const Array& param)>;
GradientTransformation adamw(LearningRate learning_rate, double weight_decay = 0.01,
                             AdamOptions options = {}, DecayMask mask = nullptr,
                             CallSite site = {});
// Decay only leaves of rank >= 2 (kernels, not biases or norm scales): a common mask.
DecayMask decay_matrices_only();

// v = decay * v + (1 - decay) * g^2; update = -lr * g / (sqrt(v) + eps)
// (torch.optim.RMSprop, alpha = decay, no momentum, not centered).
GradientTransformation rmsprop(LearningRate learning_rate, double decay = 0.99, double eps = 1e-8,
                               CallSite site = {});

// Scales all gradients by min(1, max_norm / global_norm), global_norm over every leaf.
GradientTransformation clip_by_global_norm(double max_norm, CallSite site = {});
// Clamps each gradient element to [-max_abs, max_abs].
GradientTransformation clip(double max_abs, CallSite site = {});
// Applies the transformations in order; the state is a list of their states.
GradientTransformation chain(std::vector<GradientTransformation> transformations,
                             CallSite site = {});

// sqrt of the sum of squares of every leaf (an f32 scalar).
Array global_norm(const Tree& tree, CallSite site = {});

}  // namespace kiln::optim
