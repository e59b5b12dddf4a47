// kiln's losses against optax.losses (the pinned peers, docs/peers.md): each loss and its
// gradient with respect to the first argument, in f64, on fixed inputs that include large
// logits, exact targets 0 and 1, and errors on both sides of Huber's delta. This test
// writes the inputs and kiln's results to a JSON file; tests/tools/optax_losses_check.py
// computes the same with Optax and jax.grad and compares.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/nn/losses.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "support/arrays.h"
#include "support/peer_check.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::values;
using nlohmann::json;

// Deterministic values of several magnitudes and both signs.
std::vector<double> wave(size_t n, double scale, double phase) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.9 * static_cast<double>(i) + phase);
  return v;
}

Array f64(const std::vector<double>& v, Shape shape) {
  return from_host<double>(v, std::move(shape));
}

json case_of(const std::string& loss, json params, const std::vector<double>& first,
             const Shape& shape, const std::vector<double>& second,
             const std::function<Array(const Array&)>& fn) {
  auto [value, gradient] = value_and_grad(fn)(f64(first, shape));
  std::vector<int64_t> dims(shape.dims().begin(), shape.dims().end());
  return {{"loss", loss},
          {"params", std::move(params)},
          {"first", first},
          {"shape", dims},
          {"second", second},
          {"value", value.item<double>()},
          {"grad", values(gradient)}};
}

TEST(OptaxLosses, LossesAndTheirGradientsMatchOptax) {
  Shape logits_shape{6, 5};
  std::vector<double> logits = wave(30, 4.0, 0.3);
  logits[7] = 60.0;  // a large logit: log_softmax must stay exact
  std::vector<double> labels = {0, 4, 2, 1, 3, 2};
  Array label_array = astype(f64(labels, {6}), DType::i32);
  std::vector<double> targets = wave(30, 0.5, 1.1);
  for (double& t : targets) t += 0.5;  // in [0, 1]
  targets[0] = 0.0;
  targets[1] = 1.0;
  std::vector<double> predictions = wave(30, 3.0, 0.7);
  std::vector<double> wanted = wave(30, 1.0, 2.0);
  Array target_array = f64(targets, logits_shape), wanted_array = f64(wanted, logits_shape);
  json cases = json::array();
  cases.push_back(case_of("softmax_cross_entropy", json::object(), logits, logits_shape, labels,
                          [&](const Array& x) { return softmax_cross_entropy(x, label_array); }));
  cases.push_back(case_of("softmax_cross_entropy", {{"label_smoothing", 0.1}}, logits, logits_shape,
                          labels, [&](const Array& x) {
                            return softmax_cross_entropy(x, label_array, {.label_smoothing = 0.1});
                          }));
  cases.push_back(
      case_of("sigmoid_binary_cross_entropy", json::object(), logits, logits_shape, targets,
              [&](const Array& x) { return binary_cross_entropy_with_logits(x, target_array); }));
  cases.push_back(case_of("squared_error", json::object(), predictions, logits_shape, wanted,
                          [&](const Array& x) { return mse(x, wanted_array); }));
  for (double delta : {1.0, 0.3}) {
    cases.push_back(case_of("huber", {{"delta", delta}}, predictions, logits_shape, wanted,
                            [&](const Array& x) { return huber(x, wanted_array, delta); }));
  }
  kiln::testing::PeerReport peer =
      kiln::testing::run_peer_check("optax_losses_check.py", json{{"cases", cases}});
  const std::string& report = peer.text;
  EXPECT_EQ(peer.status, 0) << report;
  EXPECT_THAT(report, ::testing::HasSubstr(fmt::format("{} passed, 0 failed", cases.size())))
      << report;
  std::cout << report;
}

}  // namespace
}  // namespace kiln::nn
