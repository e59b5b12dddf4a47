// Adam (Kingma & Ba, Algorithm 1) and AdamW (Loshchilov & Hutter, decoupled weight decay):
//   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
//   update = -lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * param)
// State: {count: i32[], mu: <params>, nu: <params>}. The bias corrections 1 - b^t are
// computed as -expm1(t * log(b)): in f32, 1 - pow(0.999, t) loses about four digits to
// cancellation in the first steps, while this form stays within a few ulps of the double
// value PyTorch computes on the host.
#include <cmath>

#include "kiln/ops.h"
#include "kiln/optim.h"
#include "optim/tree_math.h"

namespace kiln::optim {
namespace {

// 1 - b^t for the traced f32 step t; b = 0 gives log(0) = -inf and exactly 1, as it should.
Array bias_correction(double b, const Array& t) {
  return -expm1(t * std::log(b));
}

struct AdamConfig {
  std::string name;
  Schedule learning_rate;
  AdamOptions options;
  double weight_decay = 0;  // 0: plain adam
  DecayMask mask;           // null: decay every leaf
  CallSite site;
};

void check_options(const AdamConfig& c) {
  detail::require_learning_rate(c.name, c.learning_rate, c.site);
  detail::require_unit_interval(c.name, "b1", c.options.b1, c.site);
  detail::require_unit_interval(c.name, "b2", c.options.b2, c.site);
  detail::require_positive(c.name, "eps", c.options.eps, c.site);
  detail::require_non_negative(c.name, "weight_decay", c.weight_decay, c.site);
}

GradientTransformation make_adam(AdamConfig c) {
  check_options(c);
  GradientTransformation t;
  t.name = c.name;
  t.init = [](const Tree& params) {
    return Tree::dict({{"count", detail::zero_count(params)},
                       {"mu", detail::zeros_tree(params)},
                       {"nu", detail::zeros_tree(params)}});
  };
  t.update = [c](const Tree& grads, const Tree& state, const Tree& params) {
    const Tree& mu = state["mu"];
    detail::check_grads(c.name, grads, mu, "the optimizer state (shaped like the params)", c.site);
    bool decays = c.weight_decay > 0;
    if (decays) detail::check_grads(c.name, grads, params, "params", c.site);
    const Array& count = state["count"].leaf();
    Array next = detail::next_count(count);
    Array neg_rate = -detail::rate_at(c.name, c.learning_rate, count, c.site);
    Array step = astype(next, DType::f32);
    // m_hat / (sqrt(v_hat) + eps) as (m / c1) / (sqrt(v) / sqrt(c2) + eps), with the
    // scalar reciprocals taken once: one division per element instead of three (division
    // is the slowest vector op, and the update runs over every parameter each step).
    Array inv_correction1 = 1.0 / bias_correction(c.options.b1, step);
    Array inv_sqrt_correction2 = rsqrt(bias_correction(c.options.b2, step));

    detail::Leaves g = detail::leaves_of(grads);
    std::vector<Array> m = mu.leaves(), v = state["nu"].leaves();
    detail::Leaves p;
    if (decays) p = detail::leaves_of(params);
    std::vector<Array> updates(m.size());
    const AdamOptions& o = c.options;
    for (size_t i = 0; i < m.size(); ++i) {
      const Array& grad = g.arrays[i];
      DType dtype = grad.dtype();
      m[i] = o.b1 * m[i] + (1.0 - o.b1) * grad;
      v[i] = o.b2 * v[i] + (1.0 - o.b2) * (grad * grad);
      Array m_hat = m[i] * detail::in_dtype(inv_correction1, dtype);
      Array root_v_hat = sqrt(v[i]) * detail::in_dtype(inv_sqrt_correction2, dtype);
      Array direction = m_hat / (root_v_hat + o.eps);
      if (decays && (!c.mask || c.mask(p.paths[i], p.arrays[i]))) {
        direction = direction + c.weight_decay * p.arrays[i];
      }
      updates[i] = detail::in_dtype(neg_rate, dtype) * direction;
    }
    Tree new_state = Tree::dict({{"count", next},
                                 {"mu", unflatten(mu.structure(), m, c.site)},
                                 {"nu", unflatten(mu.structure(), v, c.site)}});
    return std::make_pair(unflatten(grads.structure(), updates, c.site), new_state);
  };
  t.learning_rate = [c](const Tree& state) -> std::optional<Array> {
    return detail::latest_rate(c.name, c.learning_rate, state["count"].leaf(), c.site);
  };
  return t;
}

}  // namespace

GradientTransformation adam(LearningRate learning_rate, AdamOptions options, CallSite site) {
  AdamConfig c;
  c.name = "adam";
  c.learning_rate = std::move(learning_rate);
  c.options = options;
  c.site = site;
  return make_adam(std::move(c));
}

GradientTransformation adamw(LearningRate learning_rate, double weight_decay, AdamOptions options,
                             DecayMask mask, CallSite site) {
  AdamConfig c;
  c.name = "adamw";
  c.learning_rate = std::move(learning_rate);
  c.options = options;
  c.weight_decay = weight_decay;
  c.mask = std::move(mask);
  c.site = site;
  return make_adam(std::move(c));
}

DecayMask decay_matrices_only() {
  return [](std::string_view, const Array& param) { return param.rank() >= 2; };
}

}  // namespace kiln::optim
