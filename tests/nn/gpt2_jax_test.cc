// kiln's GPT-2 train step against the same math in JAX and Optax (tests/tools/
// gpt2_jax_check.py): 20 AdamW steps in f32 from the same initial parameters and tokens,
// each step's loss within 1e-4 of JAX's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn/gpt2.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/random.h"
#include "support/arrays.h"
#include "support/peer_check.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

std::vector<int64_t> dims_of(const Array& x) {
  return {x.shape().dims().begin(), x.shape().dims().end()};
}

TEST(Gpt2, TwentyStepsMatchJax) {
  nn::Gpt2Config config;
  config.layers = 2;
  config.heads = 2;
  config.channels = 16;
  config.vocab_size = 30;
  config.padded_vocab_size = 32;
  config.max_context = 16;
  constexpr int64_t kBatch = 2, kLength = 8, kSteps = 20;
  constexpr double kLearningRate = 3e-3;
  // Weights 5 times GPT-2's (0.1 instead of 0.02), so that every part of the model shapes
  // the loss: at GPT-2's scale the activations are so small that GELU's tanh form and its
  // exact form give losses 1e-7 apart, and the check could not tell them apart (at this
  // scale, measured: kiln within 7e-6 of JAX; with JAX's exact GELU, 3.5e-3).
  Tree params =
      tree_map([](const Array& x) { return x * 5.0f; }, nn::gpt2_init(config, random::key(7)));
  json record_params = json::object();
  for (const auto& [path, leaf] : params.leaves_with_paths()) {
    record_params[path] = {{"shape", dims_of(leaf)}, {"values", values(leaf)}};
  }

  optim::GradientTransformation adamw = optim::adamw(kLearningRate, 0.0);
  Tree state = adamw.init(params);
  auto step = jit([&](const Tree& p, const Tree& s, const Array& tokens, const Array& targets) {
    auto [loss, grads] =
        value_and_grad([&](const Tree& q) { return nn::gpt2_loss(config, q, tokens, targets); })(p);
    auto [updates, next] = adamw.update(grads, s, p);
    return std::make_tuple(optim::apply_updates(p, updates), next, loss);
  });
  json steps = json::array();
  for (int64_t i = 0; i < kSteps; ++i) {
    // A window of a random token stream, and the same window shifted by one.
    Array stream = random::randint(random::fold_in(random::key(8), static_cast<uint32_t>(i)),
                                   Shape{kBatch, kLength + 1}, 0, config.vocab_size, DType::i32);
    Array tokens = slice(stream, {0, 0}, {kBatch, kLength});
    Array targets = slice(stream, {0, 1}, {kBatch, kLength + 1});
    auto [p, s, loss] = step(params, state, tokens, targets);
    params = p;
    state = s;
    steps.push_back({{"shape", {kBatch, kLength}},
                     {"tokens", tokens.to_vector<int32_t>()},
                     {"targets", targets.to_vector<int32_t>()},
                     {"kiln_loss", loss.item<float>()}});
  }
  json record = {{"config",
                  {{"layers", config.layers},
                   {"heads", config.heads},
                   {"channels", config.channels},
                   {"vocab_size", config.vocab_size},
                   {"padded_vocab_size", config.padded_vocab_size}}},
                 {"params", record_params},
                 {"adamw",
                  {{"learning_rate", kLearningRate},
                   {"b1", 0.9},
                   {"b2", 0.999},
                   {"eps", 1e-8},
                   {"weight_decay", 0.0}}},
                 {"steps", steps}};
  PeerReport peer = run_peer_check("gpt2_jax_check.py", record);
  EXPECT_EQ(peer.status, 0) << peer.text;
  EXPECT_THAT(peer.text, ::testing::HasSubstr(fmt::format("{} steps, 0 differ", kSteps)))
      << peer.text;
  std::cout << peer.text;
}

}  // namespace
}  // namespace kiln::testing
