// Composition of gradient transformations (chain) and applying updates to parameters.
// chain's state is a list holding each member's state in order; its learning rate is the
// first member's that has one (the clipping transformations have none).
#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/optim.h"
#include "optim/tree_math.h"

namespace kiln::optim {

GradientTransformation chain(std::vector<GradientTransformation> transformations, CallSite site) {
  std::string name = "chain(";
  for (size_t i = 0; i < transformations.size(); ++i) {
    const GradientTransformation& member = transformations[i];
    if (!member.init || !member.update) {
      fail(site, fmt::format("chain: transformation {} ('{}') has no init or update function", i,
                             member.name));
    }
    name += (i == 0 ? "" : ", ") + member.name;
  }
  name += ")";
  auto members =
      std::make_shared<const std::vector<GradientTransformation>>(std::move(transformations));
  GradientTransformation t;
  t.name = name;
  t.init = [members](const Tree& params) {
    std::vector<Tree> states;
    for (const GradientTransformation& member : *members) states.push_back(member.init(params));
    return Tree::list(std::move(states));
  };
  t.update = [members, name, site](const Tree& grads, const Tree& state, const Tree& params) {
    if (!state.is_list() || state.size() != members->size()) {
      fail(site,
           fmt::format("{}: expected a state list of {} member states, got {}", name,
                       members->size(), state.to_string()),
           "create the state with this chain's init(params)");
    }
    Tree updates = grads;
    std::vector<Tree> states;
    for (size_t i = 0; i < members->size(); ++i) {
      auto [next_updates, next_state] = (*members)[i].update(updates, state[i], params);
      updates = std::move(next_updates);
      states.push_back(std::move(next_state));
    }
    return std::make_pair(updates, Tree::list(std::move(states)));
  };
  t.learning_rate = [members](const Tree& state) -> std::optional<Array> {
    for (size_t i = 0; i < members->size(); ++i) {
      const GradientTransformation& member = (*members)[i];
      if (!member.learning_rate) continue;
      if (std::optional<Array> rate = member.learning_rate(state[i])) return rate;
    }
    return std::nullopt;
  };
  return t;
}

Tree apply_updates(const Tree& params, const Tree& updates, CallSite site) {
  check_same_structure(params, updates, "apply_updates: params vs updates", site);
  detail::Leaves u = detail::leaves_of(updates);
  std::vector<Array> p = params.leaves();
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].shape() != u.arrays[i].shape()) {
      fail(site, fmt::format("apply_updates: the update at '{}' is {}, but the parameter is {}",
                             u.paths[i], u.arrays[i].aval().to_string(), p[i].aval().to_string()));
    }
    Array sum = p[i] + u.arrays[i];
    p[i] = sum.dtype() == p[i].dtype() ? sum : astype(sum, p[i].dtype(), site);
  }
  return unflatten(params.structure(), p, site);
}

}  // namespace kiln::optim
