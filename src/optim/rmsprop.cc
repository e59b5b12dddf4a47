// RMSprop as torch.optim.RMSprop (no momentum, not centered, eps outside the root):
//   v = decay * v + (1 - decay) * g^2;  update = -lr * g / (sqrt(v) + eps)
// State: {count: i32[], nu: <params>}. (optax.rmsprop puts eps inside the root instead.)
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "optim/tree_math.h"

namespace kiln::optim {

GradientTransformation rmsprop(LearningRate learning_rate, double decay, double eps,
                               CallSite site) {
  detail::require_learning_rate("rmsprop", learning_rate, site);
  detail::require_unit_interval("rmsprop", "decay", decay, site);
  detail::require_positive("rmsprop", "eps", eps, site);
  GradientTransformation t;
  t.name = "rmsprop";
  t.init = [](const Tree& params) {
    return Tree::dict({{"count", detail::zero_count(params)}, {"nu", detail::zeros_tree(params)}});
  };
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) {
    const Tree& nu = state["nu"];
    detail::check_grads("rmsprop", grads, nu, "the optimizer state (shaped like the params)", site);
    const Array& count = state["count"].leaf();
    Array neg_rate = -detail::rate_at("rmsprop", learning_rate, count, site);
    detail::Leaves g = detail::leaves_of(grads);
    std::vector<Array> v = nu.leaves();
    std::vector<Array> updates(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const Array& grad = g.arrays[i];
      v[i] = decay * v[i] + (1.0 - decay) * (grad * grad);
      updates[i] = detail::in_dtype(neg_rate, grad.dtype()) * (grad / (sqrt(v[i]) + eps));
    }
    Tree new_state = Tree::dict(
        {{"count", detail::next_count(count)}, {"nu", unflatten(nu.structure(), v, site)}});
    return std::make_pair(unflatten(grads.structure(), updates, site), new_state);
  };
  t.learning_rate = [=](const Tree& state) -> std::optional<Array> {
    return detail::latest_rate("rmsprop", learning_rate, state["count"].leaf(), site);
  };
  return t;
}

}  // namespace kiln::optim
