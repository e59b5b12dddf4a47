// kiln's layers against Flax (the pinned peers, docs/peers.md): for each layer, its output
// and the gradients of sum(y * c) (c fixed) with respect to the input and every parameter,
// in f64, from the same parameters and inputs; BatchNorm in training (batch statistics,
// and the new running mean) and in evaluation (running statistics). This test writes the
// layers' specs, parameters, inputs and kiln's results to a JSON file;
// tests/tools/flax_layers_check.py builds the same layers with flax.linen and compares.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/nn/module.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/transforms.h"
#include "support/arrays.h"
#include "support/peer_check.h"

namespace kiln::nn {
namespace {

using nlohmann::json;
using testing::values;

Array wave(const Shape& shape, double scale, double phase) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = scale * std::sin(0.37 * static_cast<double>(i) + phase);
  return from_host<double>(v, shape);
}

std::vector<int64_t> dims_of(const Array& x) {
  return {x.shape().dims().begin(), x.shape().dims().end()};
}

json tree_json(const Tree& tree) {
  json out = json::object();
  for (const auto& [path, leaf] : tree.leaves_with_paths()) {
    out[path] = {{"shape", dims_of(leaf)}, {"values", values(leaf)}};
  }
  return out;
}

// The layer's output, new state and gradients of sum(y * c) for input `x`; parameters are
// kiln's own initialisation (f64), moved off their defaults where they start constant.
json case_of(json spec, const Module& layer, const Array& x, bool train) {
  Variables v = layer.init(random::key(7), x.aval());
  std::vector<std::pair<std::string, Array>> moved;
  int64_t index = 0;
  for (const auto& [path, leaf] : v.params.leaves_with_paths()) {
    // Scales and biases start at 1 and 0: perturb them so that they are tested.
    moved.emplace_back(path, leaf + wave(leaf.shape(), 0.3, 1.0 + static_cast<double>(index++)));
  }
  std::vector<Tree::Item> items;
  for (const auto& [path, leaf] : moved) items.push_back({path, leaf});
  if (!moved.empty()) v.params = Tree::dict(items);
  if (v.state.num_leaves() > 0) {
    v.state = Tree::dict(
        {{"mean", wave({x.dim(-1)}, 0.2, 0.5)}, {"var", wave({x.dim(-1)}, 0.2, 0.9) + 1.0}});
  }
  ApplyResult result = layer.apply(v, x, {.train = train});
  Array c = wave(result.y.shape(), 1.0, 2.5);
  auto loss = [&](const Tree& params, const Array& input) {
    Variables w{params, v.state};
    return sum(layer.apply(w, input, {.train = train}).y * c);
  };
  json record = {{"spec", std::move(spec)},
                 {"train", train},
                 {"x", {{"shape", dims_of(x)}, {"values", values(x)}}},
                 {"params", tree_json(v.params)},
                 {"state", tree_json(v.state)},
                 {"y", {{"shape", dims_of(result.y)}, {"values", values(result.y)}}},
                 {"new_state", tree_json(result.state)},
                 {"c", values(c)}};
  if (v.params.num_leaves() > 0) {
    auto [d_params, d_x] = grad<0, 1>(loss)(v.params, x);
    record["d_params"] = tree_json(d_params);
    record["d_x"] = values(d_x);
  } else {
    record["d_x"] = values(grad<1>(loss)(v.params, x));
  }
  return record;
}

TEST(FlaxLayers, OutputsAndGradientsMatchFlax) {
  Array rows = wave({5, 7}, 1.5, 0.1);
  Array images = wave({2, 7, 6, 3}, 1.2, 0.4);
  json cases = json::array();
  cases.push_back(case_of({{"kind", "dense"}, {"features", 4}}, Dense(4), rows, false));
  Conv2DOptions same{.strides = {1, 1}, .padding = Padding::kSame};
  Conv2DOptions strided{.strides = {2, 1}, .padding = Padding::kValid};
  cases.push_back(case_of({{"kind", "conv"},
                           {"features", 4},
                           {"kernel", {3, 3}},
                           {"strides", {1, 1}},
                           {"padding", "SAME"}},
                          Conv2D(4, {3, 3}, same), images, false));
  cases.push_back(case_of({{"kind", "conv"},
                           {"features", 2},
                           {"kernel", {2, 3}},
                           {"strides", {2, 1}},
                           {"padding", "VALID"}},
                          Conv2D(2, {2, 3}, strided), images, false));
  cases.push_back(
      case_of({{"kind", "max_pool"}, {"window", {2, 2}}, {"strides", {2, 2}}, {"padding", "VALID"}},
              MaxPool({2, 2}), images, false));
  cases.push_back(
      case_of({{"kind", "avg_pool"}, {"window", {3, 3}}, {"strides", {1, 1}}, {"padding", "SAME"}},
              AvgPool({3, 3}, {1, 1}, Padding::kSame), images, false));
  cases.push_back(case_of({{"kind", "layer_norm"}, {"epsilon", 1e-5}}, LayerNorm(), rows, false));
  cases.push_back(case_of({{"kind", "rms_norm"}, {"epsilon", 1e-5}}, RMSNorm(), rows, false));
  for (bool train : {true, false}) {
    cases.push_back(case_of({{"kind", "batch_norm"}, {"epsilon", 1e-5}, {"momentum", 0.9}},
                            BatchNorm(0.9), images, train));
  }
  kiln::testing::PeerReport peer =
      kiln::testing::run_peer_check("flax_layers_check.py", json{{"cases", cases}});
  const std::string& report = peer.text;
  EXPECT_EQ(peer.status, 0) << report;
  EXPECT_THAT(report, ::testing::HasSubstr(fmt::format("{} passed, 0 failed", cases.size())))
      << report;
  std::cout << report;
}

// Dropout given the same key, in f32 (JAX's default width, where Flax's keep probability is
// an f32 as kiln's is): the outputs and the gradient must be equal bit for bit. Embedding:
// the lookup and the gradient of the table, with repeated indices, in f64.
TEST(FlaxLayers, DropoutAndEmbeddingMatchFlax) {
  json dropout = json::array();
  for (double rate : {0.1, 0.5, 0.9}) {
    for (uint32_t seed : {0u, 42u}) {
      Array x = wave({3, 5, 7}, 2.0, rate).astype(DType::f32);
      Array key = random::key(seed);
      Module layer = Dropout(rate);
      Variables none = layer.init(key, x.aval());
      auto apply = [&](const Array& input) {
        return layer.apply(none, input, {.train = true, .key = key}).y;
      };
      Array y = apply(x);
      Array c = wave(x.shape(), 1.0, 0.3).astype(DType::f32);
      Array d_x = grad([&](const Array& input) { return sum(apply(input) * c); })(x);
      dropout.push_back({{"rate", rate},
                         {"seed", seed},
                         {"x", {{"shape", dims_of(x)}, {"values", values(x)}}},
                         {"c", values(c)},
                         {"y", values(y)},
                         {"d_x", values(d_x)}});
    }
  }
  std::vector<int32_t> indices = {3, 0, 3, 5, 1, 3, 0, 4};  // repeats: the gradient adds
  Module embed = Embedding(6, 4);
  Array ids = from_host<int32_t>(indices, {2, 4});
  Variables v = embed.init(random::key(3), ids.aval());
  Tree params =
      Tree::dict({{"embedding", v.params.leaves_with_paths()[0].second.astype(DType::f64)}});
  Array y = embed.apply({params, v.state}, ids).y;
  Array c = wave(y.shape(), 1.0, 0.7);
  Tree d_params = grad([&](const Tree& p) {
    return sum(embed.apply({p, v.state}, ids).y * c);
  })(params);
  json embedding = {{"indices", indices},
                    {"indices_shape", {2, 4}},
                    {"params", tree_json(params)},
                    {"c", values(c)},
                    {"y", {{"shape", dims_of(y)}, {"values", values(y)}}},
                    {"d_params", tree_json(d_params)}};
  kiln::testing::PeerReport peer = kiln::testing::run_peer_check(
      "flax_layers_check.py",
      json{{"cases", json::array()}, {"dropout", dropout}, {"embedding", embedding}});
  EXPECT_EQ(peer.status, 0) << peer.text;
  EXPECT_THAT(peer.text,
              ::testing::HasSubstr(fmt::format("{} passed, 0 failed", dropout.size() + 1)))
      << peer.text;
  std::cout << peer.text;
}

}  // namespace
}  // namespace kiln::nn
