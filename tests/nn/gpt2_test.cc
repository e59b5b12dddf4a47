// GPT-2 as functions of a params tree (kiln/nn/gpt2.h) on a tiny configuration: its layout
// and initialisation, that attention is causal, that its gradient matches finite
// differences, that it learns, and its errors. bench/gpt2_step_bench.cc times GPT-2 124M.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn/gpt2.h"
#include "kiln/nn/module.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/random.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

nn::Gpt2Config tiny() {
  nn::Gpt2Config config;
  config.layers = 2;
  config.heads = 2;
  config.channels = 8;
  config.vocab_size = 11;
  config.padded_vocab_size = 16;
  config.max_context = 6;
  return config;
}

Array tokens_of(std::vector<int32_t> ids, Shape shape) {
  return from_host<int32_t>(ids, shape);
}

double stddev(const Array& x) {
  std::vector<double> v = values(x);
  double mean = 0, square = 0;
  for (double e : v) mean += e / static_cast<double>(v.size());
  for (double e : v) square += (e - mean) * (e - mean) / static_cast<double>(v.size());
  return std::sqrt(square);
}

TEST(Gpt2, ParamsHaveGpt2sLayoutAndCount) {
  nn::Gpt2Config config = tiny();
  Tree params = nn::gpt2_init(config, random::key(0));
  int64_t c = config.channels;
  int64_t per_block =
      2 * 2 * c + (c * 3 * c + 3 * c) + (c * c + c) + (c * 4 * c + 4 * c) + (4 * c * c + c);
  EXPECT_EQ(nn::parameter_count(params), config.padded_vocab_size * c + config.max_context * c +
                                             config.layers * per_block + 2 * c);
  EXPECT_EQ(params["wte"].leaf().shape(), (Shape{16, 8}));
  EXPECT_EQ(params["h"][1]["attn"]["c_attn"]["kernel"].leaf().shape(), (Shape{8, 24}));
  EXPECT_EQ(params["h"][0]["mlp"]["c_proj"]["kernel"].leaf().shape(), (Shape{32, 8}));
  EXPECT_EQ(values(params["h"][0]["ln_1"]["scale"].leaf()), std::vector<double>(8, 1.0));
  EXPECT_EQ(values(params["h"][0]["attn"]["c_attn"]["bias"].leaf()), std::vector<double>(24, 0.0));
}

TEST(Gpt2, InitialisationHasGpt2sScalesAndIsTheSameEagerAndJitted) {
  nn::Gpt2Config config = tiny();
  config.layers = 8;
  config.channels = 64;
  config.heads = 4;
  Tree params = nn::gpt2_init(config, random::key(3));
  // 16k draws each: the sample deviation is within a few percent.
  EXPECT_NEAR(stddev(params["h"][0]["mlp"]["c_fc"]["kernel"].leaf()), 0.02, 0.001);
  EXPECT_NEAR(stddev(params["h"][0]["mlp"]["c_proj"]["kernel"].leaf()), 0.02 / std::sqrt(16.0),
              0.0003);
  Tree again = jit([&](const Array& key) { return nn::gpt2_init(config, key); })(random::key(3));
  auto a = params.leaves_with_paths();
  auto b = again.leaves_with_paths();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(values(a[i].second), values(b[i].second)) << a[i].first;
  }
  EXPECT_NE(values(nn::gpt2_init(config, random::key(4))["wte"].leaf()),
            values(params["wte"].leaf()));
}

TEST(Gpt2, APositionSeesOnlyTheTokensBeforeIt) {
  nn::Gpt2Config config = tiny();
  Tree params = nn::gpt2_init(config, random::key(1));
  Array a = nn::gpt2_logits(config, params, tokens_of({1, 2, 3, 4, 5, 6}, {1, 6}));
  Array b = nn::gpt2_logits(config, params, tokens_of({1, 2, 3, 9, 0, 7}, {1, 6}));
  ASSERT_EQ(a.shape(), (Shape{1, 6, 16}));
  std::vector<double> va = values(a), vb = values(b);
  for (size_t i = 0; i < 3 * 16; ++i) EXPECT_EQ(va[i], vb[i]) << i;  // positions 0..2
  bool later_differ = false;
  for (size_t i = 3 * 16; i < va.size(); ++i) later_differ |= va[i] != vb[i];
  EXPECT_TRUE(later_differ);
}

TEST(Gpt2, GradientMatchesFiniteDifferencesInF64) {
  nn::Gpt2Config config = tiny();
  config.layers = 1;
  Tree params = tree_map([](const Array& x) { return astype(x, DType::f64); },
                         nn::gpt2_init(config, random::key(2)));
  // Larger weights than GPT-2's 0.02, so every term of the gradient is well above the
  // finite differences' noise.
  params = tree_map([](const Array& x) { return x * 20.0; }, params);
  Array tokens = tokens_of({1, 5, 2, 7, 3, 0, 4, 4}, {2, 4});
  Array targets = tokens_of({5, 2, 7, 3, 0, 4, 4, 9}, {2, 4});
  auto loss = [&](const Tree& p) { return nn::gpt2_loss(config, p, tokens, targets); };
  EXPECT_NO_THROW(check_grads(loss, std::tuple{params}));
}

TEST(Gpt2, TheLossStartsNearLogVocabularyAndFallsWhenTrained) {
  nn::Gpt2Config config = tiny();
  Tree params = nn::gpt2_init(config, random::key(0));
  Array tokens = tokens_of({1, 5, 2, 7, 3, 0, 4, 4, 8, 1, 6, 2}, {2, 6});
  Array targets = tokens_of({5, 2, 7, 3, 0, 10, 4, 8, 1, 6, 2, 9}, {2, 6});
  optim::GradientTransformation adam = optim::adamw(1e-2, 0.0);
  Tree state = adam.init(params);
  auto step = jit([&](const Tree& p, const Tree& s) {
    auto [loss, grads] =
        value_and_grad([&](const Tree& q) { return nn::gpt2_loss(config, q, tokens, targets); })(p);
    auto [updates, next] = adam.update(grads, s, p);
    return std::make_tuple(optim::apply_updates(p, updates), next, loss);
  });
  float first = 0, last = 0;
  for (int i = 0; i < 40; ++i) {
    auto [p, s, loss] = step(params, state);
    params = p;
    state = s;
    (i == 0 ? first : last) = loss.item<float>();
  }
  EXPECT_NEAR(first, std::log(16.0), 0.05);  // near-uniform predictions at init
  EXPECT_LT(last, first / 4);
}

// Rematerialization per block: the same gradients bit for bit, and a memory plan whose
// intermediates shrink as less is kept (blocks < blocks keeping their matmuls < none).
// Two sequences of 6 tokens and the tokens that follow them, for the comparisons below.
Array some_tokens() {
  return tokens_of({1, 5, 2, 7, 3, 0, 4, 4, 8, 1, 6, 2}, {2, 6});
}
Array their_targets() {
  return tokens_of({5, 2, 7, 3, 0, 10, 4, 8, 1, 6, 2, 9}, {2, 6});
}

TEST(Gpt2, RematerializedBlocksGiveTheSameGradientsInLessMemory) {
  nn::Gpt2Config config = tiny();
  config.layers = 3;
  config.channels = 16;
  Tree params = nn::gpt2_init(config, random::key(4));
  Array tokens = some_tokens(), targets = their_targets();
  std::vector<std::vector<Array>> grads;
  std::vector<int64_t> temp_bytes;
  for (nn::Gpt2Remat remat :
       {nn::Gpt2Remat::kNone, nn::Gpt2Remat::kBlocksSaveDots, nn::Gpt2Remat::kBlocks}) {
    config.remat = remat;
    auto step = jit(grad([&](const Tree& p) { return nn::gpt2_loss(config, p, tokens, targets); }));
    grads.push_back(step(params).leaves());
    temp_bytes.push_back(step.compile(params).memory_plan().temp_bytes);
  }
  for (size_t r = 1; r < grads.size(); ++r) {
    for (size_t i = 0; i < grads[0].size(); ++i) {
      EXPECT_EQ(values(grads[r][i]), values(grads[0][i])) << "policy " << r << ", leaf " << i;
    }
  }
  EXPECT_LT(temp_bytes[1], temp_bytes[0]);
  EXPECT_LT(temp_bytes[2], temp_bytes[1]);
  EXPECT_THAT(config.to_string(), HasSubstr("remat blocks"));
}

TEST(Gpt2, FlashAttentionGivesThePlainLossAndGradients) {
  nn::Gpt2Config config = tiny();
  config.layers = 2;
  config.channels = 16;
  Tree params = nn::gpt2_init(config, random::key(5));
  Array tokens = some_tokens(), targets = their_targets();
  auto loss_and_grads = [&](nn::AttentionImplementation attention) {
    config.attention = attention;
    return jit(value_and_grad(
        [&](const Tree& p) { return nn::gpt2_loss(config, p, tokens, targets); }))(params);
  };
  auto [plain_loss, plain_grads] = loss_and_grads(nn::AttentionImplementation::kPlain);
  auto [flash_loss, flash_grads] = loss_and_grads(nn::AttentionImplementation::kFlash);
  EXPECT_NEAR(flash_loss.item<double>(), plain_loss.item<double>(), 1e-6);
  std::vector<Array> plain = plain_grads.leaves(), flash = flash_grads.leaves();
  ASSERT_EQ(plain.size(), flash.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_LT(max(abs(flash[i] - plain[i])).item<double>(), 1e-5) << "leaf " << i;
  }
  EXPECT_THAT(config.to_string(), HasSubstr("flash attention"));
}

TEST(Gpt2, BadTokensAndConfigurationsAreClearErrors) {
  nn::Gpt2Config config = tiny();
  Tree params = nn::gpt2_init(config, random::key(0));
  EXPECT_TRUE(fails_with(
      [&] {
        nn::gpt2_logits(config, params, ones({1, 3}));
      },
      {"tokens must be an integer array [batch, length], got f32[1,3]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        nn::gpt2_logits(config, params, tokens_of({1, 2, 3}, {3}));
      },
      {"got i32[3]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        nn::gpt2_logits(config, params, zeros({1, 7}, DType::i32));
      },
      {"a context of 7 tokens is longer than the model's maximum, 6"}));
  EXPECT_TRUE(fails_with(
      [&] {
        nn::check_tokens(config, tokens_of({1, 2, 3, 11}, {2, 2}));
      },
      {"token 11 at [1, 1] is outside the vocabulary [0, 11)"}));
  EXPECT_TRUE(fails_with(
      [&] {
        nn::check_tokens(config, tokens_of({-1}, {1, 1}));
      },
      {"token -1 at [0, 0]"}));
  EXPECT_NO_THROW(nn::check_tokens(config, tokens_of({0, 10}, {1, 2})));
  nn::Gpt2Config odd = config;
  odd.heads = 3;
  EXPECT_TRUE(fails_with([&] { nn::gpt2_init(odd, random::key(0)); },
                         {"channels (8) must be a multiple of heads (3)"}));
  nn::Gpt2Config narrow = config;
  narrow.padded_vocab_size = 10;
  EXPECT_TRUE(fails_with([&] { nn::gpt2_init(narrow, random::key(0)); },
                         {"padded_vocab_size (10) is smaller than vocab_size (11)"}));
  nn::Gpt2Config empty = config;
  empty.layers = 0;
  EXPECT_TRUE(fails_with([&] { nn::gpt2_init(empty, random::key(0)); },
                         {"layers must be positive, got 0"}));
}

}  // namespace
}  // namespace kiln::testing
