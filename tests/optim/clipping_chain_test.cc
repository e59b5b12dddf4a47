// clip, clip_by_global_norm, global_norm, chain and apply_updates, against the same
// double-precision loops as the optimizers (five steps of changing gradients).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "optim/optim_fixture.h"

namespace kiln::testing {
namespace {

constexpr double kClippedRtol = 2e-6;
using Vec = std::vector<double>;

double norm_of(const Vec& g) {
  double total = 0;
  for (double x : g) total += x * x;
  return std::sqrt(total);
}

Vec clip_by_norm(Vec g, double max_norm) {
  double factor = std::min(1.0, max_norm / norm_of(g));
  for (double& x : g) x *= factor;
  return g;
}

TEST(GlobalNorm, IsTheNormOfEveryLeafTogether) {
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_NEAR(optim::global_norm(tree_of(grads_at(step))).item<double>(), norm_of(grads_at(step)),
                1e-6 * norm_of(grads_at(step)));
  }
  Tree t = Tree::dict({{"x", from_host<float>({3, 0}, {2})}, {"y", from_host<float>({4}, {1})}});
  EXPECT_EQ(optim::global_norm(t).item<double>(), 5.0);
  EXPECT_EQ(optim::global_norm(Tree()).item<double>(), 0.0);
}

TEST(Clip, ClampsEachElement) {
  Trajectory expected = run_reference([](const Vec&, const Vec& g, int) {
    Vec u(g.size());
    for (size_t i = 0; i < g.size(); ++i) u[i] = std::clamp(g[i], -0.6, 0.6);
    return u;
  });
  Trajectory got = run_kiln(optim::clip(0.6));
  expect_trajectories_close(got, expected, kClippedRtol);
  // Exactly the elements beyond 0.6 were clipped, and there are some.
  Vec g = grads_at(0), u = got.updates[0];
  int clipped = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    clipped += std::abs(g[i]) > 0.6;
    EXPECT_EQ(u[i], std::abs(g[i]) > 0.6 ? std::copysign(static_cast<float>(0.6), g[i]) : g[i]);
  }
  EXPECT_GT(clipped, 0);
  EXPECT_LT(clipped, kNumElements);
}

TEST(ClipByGlobalNorm, ScalesOnlyWhenTheNormIsAbove) {
  // The gradients' norms run from 4.4 to 5.7: 5.0 clips steps 1, 2 and 4, not 3 and 5.
  int clipped = 0;
  for (int step = 0; step < kSteps; ++step) clipped += norm_of(grads_at(step)) > 5.0;
  ASSERT_GT(clipped, 0);
  ASSERT_LT(clipped, kSteps);
  Trajectory expected =
      run_reference([](const Vec&, const Vec& g, int) { return clip_by_norm(g, 5.0); });
  Trajectory got = run_kiln(optim::clip_by_global_norm(5.0));
  expect_trajectories_close(got, expected, kClippedRtol);
  for (int step = 0; step < kSteps; ++step) {
    const Vec& u = got.updates[static_cast<size_t>(step)];
    if (norm_of(grads_at(step)) <= 5.0) {
      EXPECT_EQ(u, grads_at(step)) << "unclipped gradients pass through bit for bit";
    } else {
      EXPECT_NEAR(norm_of(u), 5.0, 5e-6);
    }
  }
}

TEST(ClipByGlobalNorm, ZeroGradientsStayZero) {
  Tree zero = Tree::dict({{"w", zeros({3})}});
  optim::GradientTransformation opt = optim::clip_by_global_norm(1.0);
  Tree updates = opt.update(zero, opt.init(zero), zero).first;
  EXPECT_EQ(values(updates["w"].leaf()), Vec(3, 0.0));
}

TEST(Chain, ClipsThenAppliesMomentum) {
  auto buffer = std::make_shared<Vec>(kNumElements, 0.0);
  Trajectory expected = run_reference([buffer](const Vec&, const Vec& grads, int) {
    Vec g = clip_by_norm(grads, 2.5);
    Vec u(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      (*buffer)[i] = 0.9 * (*buffer)[i] + g[i];
      u[i] = -0.05 * (*buffer)[i];
    }
    return u;
  });
  optim::GradientTransformation opt =
      optim::chain({optim::clip_by_global_norm(2.5), optim::momentum(optim::constant(0.05), 0.9)});
  EXPECT_EQ(opt.name, "chain(clip_by_global_norm, momentum)");
  expect_trajectories_close(run_kiln(opt), expected, kClippedRtol);
  EXPECT_EQ(opt.init(tree_of(initial_params())).to_string(),
            "[none, {count: i32[], trace: {a: f32[3], b: f32[2,2]}}]");
}

TEST(Chain, OfNothingIsTheIdentity) {
  Trajectory got = run_kiln(optim::chain({}));
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.updates[static_cast<size_t>(step)], grads_at(step));
  }
}

TEST(ApplyUpdates, AddsLeafByLeafInTheParamsDtype) {
  Tree params = Tree::dict({{"w", from_host<float>({1, 2}, {2})}});
  Tree updates = Tree::dict({{"w", from_host<double>({0.5, -1}, {2})}});
  Tree next = optim::apply_updates(params, updates);
  EXPECT_EQ(next["w"].leaf().aval().to_string(), "f32[2]");
  EXPECT_EQ(values(next["w"].leaf()), (Vec{1.5, 1.0}));
}

}  // namespace
}  // namespace kiln::testing
