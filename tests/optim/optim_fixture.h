// Shared by the optimizer tests: a two-leaf parameter tree ({a: f32[3], b: f32[2,2]}),
// fixed gradients that change every step, a loop that runs a transformation over them,
// and a relative comparison against a double-precision reference of the published rule.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

#include "kiln/ops.h"
#include "kiln/optim.h"
#include "support/arrays.h"

namespace kiln::testing {

inline constexpr int kNumElements = 7;  // a: 3, then b: 4 (dict keys flatten sorted)
inline constexpr int kSteps = 5;

// Values rounded to f32, so that the reference starts from exactly what kiln sees.
inline std::vector<double> as_f32(std::vector<double> v) {
  for (double& x : v) x = static_cast<float>(x);
  return v;
}

inline std::vector<double> initial_params() {
  return as_f32({0.5, -1.0, 2.0, 1.5, -0.25, 0.75, -2.0});
}

// Gradient of element i at step s: nonzero, of both signs and several magnitudes.
inline std::vector<double> grads_at(int step) {
  std::vector<double> g(kNumElements);
  for (int i = 0; i < kNumElements; ++i) {
    g[static_cast<size_t>(i)] = std::sin(1.3 * step + 0.7 * i + 0.2) * (1.0 + 0.5 * i) + 0.05;
  }
  return as_f32(g);
}

inline Tree tree_of(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  Array a = from_host<float>(std::vector<float>(f.begin(), f.begin() + 3), {3});
  Array b = from_host<float>(std::vector<float>(f.begin() + 3, f.end()), {2, 2});
  return Tree::dict({{"a", a}, {"b", b}});
}

inline std::vector<double> flat(const Tree& tree) {
  std::vector<double> out;
  for (const Array& leaf : tree.leaves()) {
    std::vector<double> v = values(leaf);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

struct Trajectory {
  std::vector<std::vector<double>> updates;  // per step
  std::vector<double> params;                // after the last step
};

// Runs `opt` for kSteps from initial_params() with grads_at(step).
inline Trajectory run_kiln(const optim::GradientTransformation& opt) {
  Trajectory out;
  Tree params = tree_of(initial_params());
  Tree state = opt.init(params);
  for (int step = 0; step < kSteps; ++step) {
    auto [updates, next] = opt.update(tree_of(grads_at(step)), state, params);
    out.updates.push_back(flat(updates));
    params = optim::apply_updates(params, updates);
    state = next;
  }
  out.params = flat(params);
  return out;
}

// The reference: given the (double) params and gradients of step `t` (1-based), returns
// the update, keeping its own state.
using ReferenceStep = std::function<std::vector<double>(const std::vector<double>& params,
                                                        const std::vector<double>& grads, int t)>;

inline Trajectory run_reference(const ReferenceStep& step) {
  Trajectory out;
  std::vector<double> params = initial_params();
  for (int s = 0; s < kSteps; ++s) {
    std::vector<double> u = step(params, grads_at(s), s + 1);
    for (size_t i = 0; i < u.size(); ++i) params[i] += u[i];
    out.updates.push_back(u);
  }
  out.params = params;
  return out;
}

// |actual - expected| <= rtol * max|expected| element by element: relative to the largest
// value of the vector rather than to each element, since an element that is a sum of terms
// of opposite signs (a momentum buffer, weight decay against the adam direction, a
// parameter after several updates) cancels, keeping the terms' f32 rounding but not their
// size.
inline void expect_close(const std::vector<double>& actual, const std::vector<double>& expected,
                         double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 0;
  for (double x : expected) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], rtol * scale) << what << " element " << i;
  }
}

inline void expect_trajectories_close(const Trajectory& kiln, const Trajectory& reference,
                                      double rtol) {
  for (int s = 0; s < kSteps; ++s) {
    expect_close(kiln.updates[static_cast<size_t>(s)], reference.updates[static_cast<size_t>(s)],
                 rtol, "update of step " + std::to_string(s + 1));
  }
  expect_close(kiln.params, reference.params, rtol, "params after the last step");
}

}  // namespace kiln::testing
