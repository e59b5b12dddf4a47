// A whole train step (value_and_grad, optimizer update, apply_updates) jitted: the same
// bits as the eager step, step after step, from one compilation, since the step count is
// an i32 array in the state and the schedule is evaluated on it inside the program.
#include <gtest/gtest.h>

#include <tuple>

#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/random.h"
#include "kiln/transforms.h"
#include "support/arrays.h"

namespace kiln::testing {
namespace {

Array loss_fn(const Tree& params, const Array& x, const Array& y) {
  Array hidden = tanh(matmul(x, params["w1"].leaf()) + params["b1"].leaf());
  Array err = matmul(hidden, params["w2"].leaf()) - y;
  return mean(err * err);
}

void expect_same_bits(const Tree& a, const Tree& b, const std::string& what) {
  ASSERT_EQ(a.to_string(), b.to_string()) << what;
  std::vector<std::pair<std::string, Array>> x = a.leaves_with_paths();
  std::vector<Array> y = b.leaves();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(same_bits(x[i].second, y[i])) << what << " at " << x[i].first;
  }
}

void check_jit_matches_eager(const optim::GradientTransformation& opt) {
  SCOPED_TRACE(opt.name);
  Tree params = Tree::dict({{"w1", random::normal(random::key(0), {4, 8}) * 0.5f},
                            {"b1", zeros({8})},
                            {"w2", random::normal(random::key(1), {8, 2}) * 0.5f}});
  Array x = random::normal(random::key(2), {16, 4});
  Array y = random::normal(random::key(3), {16, 2});
  auto step = [&](const Tree& p, const Tree& state, const Array& xs, const Array& ys) {
    auto [loss, grads] = value_and_grad(loss_fn)(p, xs, ys);
    auto [updates, next_state] = opt.update(grads, state, p);
    return std::make_tuple(optim::apply_updates(p, updates), next_state, loss);
  };
  auto jitted = jit(step, JitOptions().named("train_step"));

  Tree eager_params = params, jit_params = params;
  Tree eager_state = opt.init(params), jit_state = opt.init(params);
  for (int i = 0; i < 5; ++i) {
    auto [p1, s1, l1] = step(eager_params, eager_state, x, y);
    auto [p2, s2, l2] = jitted(jit_params, jit_state, x, y);
    std::string what = "step " + std::to_string(i + 1);
    EXPECT_TRUE(same_bits(l1, l2)) << what << " loss";
    expect_same_bits(p1, p2, what + " params");
    expect_same_bits(s1, s2, what + " state");
    eager_params = p1, eager_state = s1, jit_params = p2, jit_state = s2;
  }
  // The parameters moved, and the step compiled once for five calls.
  EXPECT_FALSE(same_bits(jit_params["w1"].leaf(), params["w1"].leaf()));
  EXPECT_EQ(jitted.stats().calls, 5);
  EXPECT_EQ(jitted.stats().compiles, 1);
}

TEST(JitTrainStep, AdamWWithWarmupCosineAndClipping) {
  check_jit_matches_eager(optim::chain(
      {optim::clip_by_global_norm(1.0),
       optim::adamw(optim::warmup_cosine(0.05, 2, 10), 0.01, {}, optim::decay_matrices_only())}));
}

TEST(JitTrainStep, OtherOptimizers) {
  check_jit_matches_eager(optim::sgd(optim::exponential(0.1, 0.5, 2)));
  check_jit_matches_eager(optim::nesterov(optim::piecewise_constant({2, 4}, {0.1, 0.05, 0.01})));
  check_jit_matches_eager(optim::rmsprop(optim::cosine_decay(0.01, 4)));
  check_jit_matches_eager(optim::chain({optim::clip(0.1), optim::adam(optim::linear(0.1, 0, 3))}));
}

}  // namespace
}  // namespace kiln::testing
