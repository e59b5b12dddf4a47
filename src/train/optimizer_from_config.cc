// [optim] -> a learning-rate schedule and a gradient transformation.
#include <algorithm>
#include <vector>

#include "kiln/error.h"
#include "train/builders.h"

namespace kiln::train {

optim::Schedule build_schedule(const OptimConfig& c, int64_t total_steps) {
  int64_t steps = std::max<int64_t>(total_steps, 1);
  if (c.schedule == "piecewise") {
    std::vector<double> values{c.lr};
    for (size_t k = 0; k < c.boundaries.size(); ++k) values.push_back(values.back() * c.decay_rate);
    return optim::piecewise_constant(c.boundaries, values);
  }
  if (c.schedule == "linear") return optim::linear(c.lr, c.end_lr, steps);
  if (c.schedule == "cosine") return optim::cosine_decay(c.lr, steps, c.end_lr / c.lr);
  if (c.schedule == "warmup_cosine") {
    return optim::warmup_cosine(c.lr, c.warmup_steps, std::max(steps, c.warmup_steps + 1),
                                c.end_lr);
  }
  if (c.schedule == "exponential") {
    return optim::exponential(c.lr, c.decay_rate, c.transition_steps);
  }
  return optim::constant(c.lr);
}

namespace {

optim::GradientTransformation build_rule(const OptimConfig& c, optim::Schedule lr) {
  optim::AdamOptions adam;
  adam.b1 = c.b1;
  adam.b2 = c.b2;
  adam.eps = c.eps;
  if (c.name == "sgd") return optim::sgd(lr);
  if (c.name == "momentum") return optim::momentum(lr, c.momentum);
  if (c.name == "nesterov") return optim::nesterov(lr, c.momentum);
  if (c.name == "adam") return optim::adam(lr, adam);
  if (c.name == "rmsprop") return optim::rmsprop(lr, c.momentum, c.eps);
  optim::DecayMask mask = c.decay_mask == "matrices" ? optim::decay_matrices_only() : nullptr;
  return optim::adamw(lr, c.weight_decay, adam, mask);
}

}  // namespace

optim::GradientTransformation build_optimizer(const OptimConfig& config, int64_t total_steps) {
  optim::GradientTransformation rule = build_rule(config, build_schedule(config, total_steps));
  if (config.clip_global_norm > 0) {
    return optim::chain({optim::clip_by_global_norm(config.clip_global_norm), rule});
  }
  return rule;
}

}  // namespace kiln::train
