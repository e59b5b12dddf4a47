// Stochastic gradient descent, plain and with (Nesterov) momentum, as torch.optim.SGD
// with dampening 0 and no weight decay: v = beta * v + g; update = -lr * v, or
// -lr * (g + beta * v) for Nesterov. State: {count: i32[], trace: <params>}.
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "optim/tree_math.h"

namespace kiln::optim {

using detail::in_dtype;

GradientTransformation sgd(LearningRate learning_rate, CallSite site) {
  detail::require_learning_rate("sgd", learning_rate, site);
  GradientTransformation t;
  t.name = "sgd";
  t.init = [](const Tree& params) { return Tree::dict({{"count", detail::zero_count(params)}}); };
  t.update = [learning_rate, site](const Tree& grads, const Tree& state, const Tree& params) {
    // sgd keeps no per-leaf state to check against; check the params when given.
    if (!params.is_none()) detail::check_grads("sgd", grads, params, "params", site);
    const Array& count = state["count"].leaf();
    Array neg_rate = -detail::rate_at("sgd", learning_rate, count, site);
    Tree updates =
        tree_map([&](const Array& g) { return in_dtype(neg_rate, g.dtype()) * g; }, grads, site);
    return std::make_pair(updates, Tree::dict({{"count", detail::next_count(count)}}));
  };
  t.learning_rate = [learning_rate, site](const Tree& state) -> std::optional<Array> {
    return detail::latest_rate("sgd", learning_rate, state["count"].leaf(), site);
  };
  return t;
}

GradientTransformation momentum(LearningRate learning_rate, double beta, bool nesterov,
                                CallSite site) {
  std::string name = nesterov ? "nesterov" : "momentum";
  detail::require_learning_rate(name, learning_rate, site);
  detail::require_unit_interval(name, "beta", beta, site);
  GradientTransformation t;
  t.name = name;
  t.init = [](const Tree& params) {
    return Tree::dict(
        {{"count", detail::zero_count(params)}, {"trace", detail::zeros_tree(params)}});
  };
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) {
    const Tree& trace = state["trace"];
    detail::check_grads(name, grads, trace, "the momentum trace (shaped like the params)", site);
    const Array& count = state["count"].leaf();
    Array neg_rate = -detail::rate_at(name, learning_rate, count, site);
    detail::Leaves g = detail::leaves_of(grads);
    std::vector<Array> v = trace.leaves();
    std::vector<Array> updates(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const Array& grad = g.arrays[i];
      v[i] = beta * v[i] + grad;
      Array direction = nesterov ? grad + beta * v[i] : v[i];
      updates[i] = in_dtype(neg_rate, grad.dtype()) * direction;
    }
    Tree new_state = Tree::dict(
        {{"count", detail::next_count(count)}, {"trace", unflatten(trace.structure(), v, site)}});
    return std::make_pair(unflatten(grads.structure(), updates, site), new_state);
  };
  t.learning_rate = [=](const Tree& state) -> std::optional<Array> {
    return detail::latest_rate(name, learning_rate, state["count"].leaf(), site);
  };
  return t;
}

GradientTransformation nesterov(LearningRate learning_rate, double beta, CallSite site) {
  return momentum(std::move(learning_rate), beta, true, site);
}

}  // namespace kiln::optim
