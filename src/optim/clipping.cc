// Gradient clipping: element-wise (clip) and by the global norm over every leaf
// (clip_by_global_norm: g * min(1, max_norm / ||g||), torch.nn.utils.clip_grad_norm_
// without its 1e-6). Stateless: their state is a none tree.
#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "optim/tree_math.h"

namespace kiln::optim {
namespace {

std::optional<Array> no_rate(const Tree&) {
  return std::nullopt;
}
Tree no_state(const Tree&) {
  return Tree();
}

}  // namespace

Array global_norm(const Tree& tree, CallSite site) {
  detail::Leaves leaves = detail::leaves_of(tree);
  Array total;
  for (size_t i = 0; i < leaves.arrays.size(); ++i) {
    const Array& leaf = leaves.arrays[i];
    if (!is_floating(leaf.dtype())) {
      fail(site, fmt::format("global_norm: the leaf at '{}' is {}, expected floating-point values",
                             leaves.paths[i], leaf.aval().to_string()));
    }
    Array x = leaf.dtype() == DType::f32 ? leaf : astype(leaf, DType::f32, site);
    Array squares = sum(x * x, {}, false, site);
    total = total.defined() ? total + squares : squares;
  }
  if (!total.defined()) return zeros({}, DType::f32, nullptr, site);
  return sqrt(total, site);
}

GradientTransformation clip_by_global_norm(double max_norm, CallSite site) {
  detail::require_positive("clip_by_global_norm", "max_norm", max_norm, site);
  GradientTransformation t;
  t.name = "clip_by_global_norm";
  t.init = no_state;
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) {
    // A zero norm gives max_norm / 0 = inf and a factor of 1.
    Array norm = global_norm(grads, site);
    Array factor = minimum(max_norm / norm, ones({}, DType::f32, device_of(norm)));
    Tree updates = tree_map([&](const Array& g) { return g * detail::in_dtype(factor, g.dtype()); },
                            grads, site);
    return std::make_pair(updates, state);
  };
  t.learning_rate = no_rate;
  return t;
}

GradientTransformation clip(double max_abs, CallSite site) {
  detail::require_positive("clip", "max_abs", max_abs, site);
  GradientTransformation t;
  t.name = "clip";
  t.init = no_state;
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) {
    Tree updates = tree_map([&](const Array& g) { return kiln::clip(g, -max_abs, max_abs, site); },
                            grads, site);
    return std::make_pair(updates, state);
  };
  t.learning_rate = no_rate;
  return t;
}

}  // namespace kiln::optim
