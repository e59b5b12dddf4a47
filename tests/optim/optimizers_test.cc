// sgd, momentum, nesterov, adam, adamw and rmsprop against double-precision loops that
// implement the published update rules (PyTorch's pseudo-code; Kingma & Ba; Loshchilov &
// Hutter) for five steps of changing gradients. kiln computes in f32 (hyperparameters
// rounded to f32, one rounding per op), so updates agree to a few f32 ulps: relative 2e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "optim/optim_fixture.h"
#include "support/errors.h"

namespace kiln::testing {
namespace {

constexpr double kTrajectoryRtol = 2e-6;
using Vec = std::vector<double>;

TEST(Sgd, MatchesTheRuleWithAScheduledLearningRate) {
  // lr at step t (1-based) is the linear schedule at t - 1: 0.1 -> 0.02 over 4 steps.
  auto lr = [](int t) { return 0.1 + (0.02 - 0.1) * std::min(t - 1, 4) / 4.0; };
  Trajectory expected = run_reference([&](const Vec&, const Vec& g, int t) {
    Vec u(g.size());
    for (size_t i = 0; i < g.size(); ++i) u[i] = -lr(t) * g[i];
    return u;
  });
  expect_trajectories_close(run_kiln(optim::sgd(optim::linear(0.1, 0.02, 4))), expected,
                            kTrajectoryRtol);
}

// torch.optim.SGD, dampening 0: b = beta * b + g (b = g at the first step, the same thing
// from b = 0); nesterov: g + beta * b, else b; p -= lr * that.
ReferenceStep sgd_momentum_reference(double lr, double beta, bool nesterov) {
  auto buffer = std::make_shared<Vec>(kNumElements, 0.0);
  return [=](const Vec&, const Vec& g, int) {
    Vec u(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      (*buffer)[i] = beta * (*buffer)[i] + g[i];
      u[i] = -lr * (nesterov ? g[i] + beta * (*buffer)[i] : (*buffer)[i]);
    }
    return u;
  };
}

TEST(Momentum, MatchesTorchSgdWithMomentum) {
  expect_trajectories_close(run_kiln(optim::momentum(optim::constant(0.05), 0.9)),
                            run_reference(sgd_momentum_reference(0.05, 0.9, false)),
                            kTrajectoryRtol);
}

TEST(Momentum, NesterovMatchesTorchSgdWithNesterov) {
  Trajectory expected = run_reference(sgd_momentum_reference(0.05, 0.8, true));
  expect_trajectories_close(run_kiln(optim::nesterov(optim::constant(0.05), 0.8)), expected,
                            kTrajectoryRtol);
  expect_trajectories_close(run_kiln(optim::momentum(optim::constant(0.05), 0.8, true)), expected,
                            kTrajectoryRtol);
  // And it is not plain momentum.
  Trajectory plain = run_reference(sgd_momentum_reference(0.05, 0.8, false));
  EXPECT_GT(std::abs(plain.updates[1][0] - expected.updates[1][0]), 1e-3);
}

// Kingma & Ba, Algorithm 1, plus AdamW's decoupled decay (Loshchilov & Hutter, and
// torch.optim.AdamW: p -= lr * wd * p, then the Adam step; the same as one update of
// -lr * (adam + wd * p)). `decayed[i]` says whether element i is decayed.
ReferenceStep adam_reference(double lr, double b1, double b2, double eps, double wd,
                             std::vector<bool> decayed) {
  auto m = std::make_shared<Vec>(kNumElements, 0.0);
  auto v = std::make_shared<Vec>(kNumElements, 0.0);
  return [=](const Vec& p, const Vec& g, int t) {
    Vec u(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      (*m)[i] = b1 * (*m)[i] + (1 - b1) * g[i];
      (*v)[i] = b2 * (*v)[i] + (1 - b2) * g[i] * g[i];
      double m_hat = (*m)[i] / (1 - std::pow(b1, t));
      double v_hat = (*v)[i] / (1 - std::pow(b2, t));
      u[i] = -lr * (m_hat / (std::sqrt(v_hat) + eps) + (decayed[i] ? wd * p[i] : 0.0));
    }
    return u;
  };
}

TEST(Adam, MatchesKingmaAndBa) {
  std::vector<bool> none(kNumElements, false);
  expect_trajectories_close(run_kiln(optim::adam(optim::constant(0.01))),
                            run_reference(adam_reference(0.01, 0.9, 0.999, 1e-8, 0, none)),
                            kTrajectoryRtol);
  optim::AdamOptions options;
  options.b1 = 0.5;
  options.b2 = 0.9;
  options.eps = 1e-3;
  expect_trajectories_close(run_kiln(optim::adam(optim::constant(0.2), options)),
                            run_reference(adam_reference(0.2, 0.5, 0.9, 1e-3, 0, none)),
                            kTrajectoryRtol);
}

TEST(Adam, FirstStepByHand) {
  // Step 1: m = (1 - b1) g, v = (1 - b2) g^2, so m_hat = g and v_hat = g^2 and the update
  // is -lr * g / (|g| + eps), eps outside the root. With lr = 0.1, eps = 1e-8:
  //   g = 0.5:   -0.1 * 0.5 / 0.50000001     = -0.099999998
  //   g = -2:    -0.1 * -2 / 2.00000001      = +0.0999999995
  //   g = 1e-3:  -0.1 * 1e-3 / 0.00100001    = -0.0999990000  (eps inside the root would
  //              give -0.1 * 1e-3 / sqrt(1.01e-6) = -0.0995037)
  Tree params = Tree::dict({{"w", zeros({3})}});
  optim::GradientTransformation opt = optim::adam(optim::constant(0.1));
  Tree grads = Tree::dict({{"w", from_host<float>({0.5f, -2.0f, 1e-3f}, {3})}});
  auto [updates, state] = opt.update(grads, opt.init(params), params);
  std::vector<double> u = values(updates["w"].leaf());
  EXPECT_NEAR(u[0], -0.099999998, 3e-8);
  EXPECT_NEAR(u[1], 0.0999999995, 3e-8);
  EXPECT_NEAR(u[2], -0.0999990000, 3e-8);
  EXPECT_EQ(state["count"].leaf().item<int>(), 1);
}

TEST(AdamW, DecaysEveryLeafByDefault) {
  std::vector<bool> all(kNumElements, true);
  expect_trajectories_close(run_kiln(optim::adamw(optim::constant(0.01), 0.1)),
                            run_reference(adam_reference(0.01, 0.9, 0.999, 1e-8, 0.1, all)),
                            kTrajectoryRtol);
}

TEST(AdamW, MaskDecaysOnlyMatrices) {
  // a (f32[3]) is not decayed, b (f32[2,2]) is.
  std::vector<bool> matrices = {false, false, false, true, true, true, true};
  optim::GradientTransformation opt =
      optim::adamw(optim::constant(0.01), 0.5, {}, optim::decay_matrices_only());
  Trajectory got = run_kiln(opt);
  expect_trajectories_close(
      got, run_reference(adam_reference(0.01, 0.9, 0.999, 1e-8, 0.5, matrices)), kTrajectoryRtol);
  // The masked-out leaf moves exactly as plain adam moves it.
  Trajectory plain = run_kiln(optim::adam(optim::constant(0.01)));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got.params[i], plain.params[i]) << i;
  EXPECT_NE(got.params[3], plain.params[3]);
}

TEST(AdamW, MaskSeesPaths) {
  std::vector<std::string> seen;
  optim::DecayMask only_b = [&](std::string_view path, const Array&) {
    seen.emplace_back(path);
    return path == "b";
  };
  std::vector<bool> b_only = {false, false, false, true, true, true, true};
  expect_trajectories_close(run_kiln(optim::adamw(optim::constant(0.01), 0.5, {}, only_b)),
                            run_reference(adam_reference(0.01, 0.9, 0.999, 1e-8, 0.5, b_only)),
                            kTrajectoryRtol);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[0], "a");
  EXPECT_EQ(seen[1], "b");
}

// torch.optim.RMSprop, alpha = decay, not centered, no momentum:
// v = alpha v + (1 - alpha) g^2; p -= lr * g / (sqrt(v) + eps).
// A plain number is a constant learning rate, as in Optax (optim::adamw(1e-3)); a lambda of
// the step is a schedule (issue 44).
TEST(LearningRate, ANumberIsAConstantScheduleAndALambdaASchedule) {
  auto same_bits = [](const optim::GradientTransformation& a,
                      const optim::GradientTransformation& b) {
    Trajectory first = run_kiln(a), second = run_kiln(b);
    EXPECT_EQ(first.updates, second.updates);
    EXPECT_EQ(first.params, second.params);
  };
  same_bits(optim::adamw(1e-3), optim::adamw(optim::constant(1e-3)));
  same_bits(optim::sgd(0.1), optim::sgd(optim::constant(0.1)));
  same_bits(optim::momentum(0.05, 0.8), optim::momentum(optim::constant(0.05), 0.8));
  same_bits(optim::rmsprop(1e-2), optim::rmsprop(optim::constant(1e-2)));
  same_bits(optim::sgd([](const Array& step) { return 0.1 / (1.0 + astype(step, DType::f32)); }),
            optim::sgd(optim::Schedule(
                [](const Array& step) { return 0.1 / (1.0 + astype(step, DType::f32)); })));
  EXPECT_TRUE(fails_with([] { optim::adamw(-1e-3); },
                         {"adamw: learning_rate must be finite and >= 0", "gives -0.001"}));
  EXPECT_TRUE(
      fails_with([] { optim::sgd(std::nan("")); }, {"sgd: learning_rate must be finite and >= 0"}));
}

TEST(Rmsprop, MatchesTorchRmsprop) {
  for (double eps : {1e-8, 0.1}) {
    auto v = std::make_shared<Vec>(kNumElements, 0.0);
    Trajectory expected = run_reference([&, v](const Vec&, const Vec& g, int) {
      Vec u(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        (*v)[i] = 0.9 * (*v)[i] + (1 - 0.9) * g[i] * g[i];
        u[i] = -0.01 * g[i] / (std::sqrt((*v)[i]) + eps);
      }
      return u;
    });
    expect_trajectories_close(run_kiln(optim::rmsprop(optim::constant(0.01), 0.9, eps)), expected,
                              kTrajectoryRtol);
  }
}

TEST(OptimizerState, HoldsTheCountAndTreesShapedLikeParams) {
  Tree params = tree_of(initial_params());
  Tree state = optim::adam(optim::constant(0.1)).init(params);
  EXPECT_EQ(state.to_string(),
            "{count: i32[], mu: {a: f32[3], b: f32[2,2]}, nu: {a: f32[3], b: f32[2,2]}}");
  EXPECT_EQ(optim::sgd(optim::constant(0.1)).init(params).to_string(), "{count: i32[]}");
  EXPECT_EQ(optim::momentum(optim::constant(0.1)).init(params).to_string(),
            "{count: i32[], trace: {a: f32[3], b: f32[2,2]}}");
  EXPECT_EQ(optim::rmsprop(optim::constant(0.1)).init(params).to_string(),
            "{count: i32[], nu: {a: f32[3], b: f32[2,2]}}");
}

}  // namespace
}  // namespace kiln::testing
