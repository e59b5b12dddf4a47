// nn's functions of arrays (kiln/nn/functional.h) and masked softmax, worked by hand so
// that they also run under the sanitizers; tests/ops/jnp_crosscheck_test.cc compares them
// with jax.nn and Flax in the release build.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/grad.h"
#include "kiln/nn/activations.h"
#include "kiln/nn/functional.h"
#include "kiln/ops.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::testing {
namespace {

Array mask_of(std::vector<double> bits, Shape shape) {
  return astype(from_host(bits, shape), DType::bool_);
}

TEST(MaskedSoftmax, MaskedElementsGetNothingAndAFullyMaskedRowIsZeroWithAZeroGradient) {
  Array x = counting({2, 3});
  Array mask = mask_of({1, 0, 1, 0, 0, 0}, {2, 3});
  std::vector<double> p = values(nn::softmax(x, -1, mask));
  EXPECT_NEAR(p[0], 1 / (1 + std::exp(2.0)), 1e-6);
  EXPECT_EQ(p[1], 0);
  EXPECT_NEAR(p[2], std::exp(2.0) / (1 + std::exp(2.0)), 1e-6);
  EXPECT_EQ((std::vector<double>(p.begin() + 3, p.end())), (std::vector<double>{0, 0, 0}));
  std::vector<double> logp = values(nn::log_softmax(x, -1, mask));
  EXPECT_TRUE(std::isinf(logp[1]) && logp[1] < 0);
  EXPECT_NEAR(logp[2], -std::log1p(std::exp(-2.0)), 1e-6);
  // A huge masked logit neither overflows nor poisons the gradient.
  Array spiky = from_host(std::vector<double>{0, 1e30, 1, 5, 6, 7}, Shape{2, 3});
  Array weights = from_host(std::vector<double>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto loss = [&](const Array& logits) { return sum(mul(nn::softmax(logits, -1, mask), weights)); };
  for (double g : values(grad(loss)(spiky))) EXPECT_TRUE(std::isfinite(g)) << g;
  std::vector<double> g = values(grad(loss)(spiky));
  EXPECT_EQ(g[1], 0);
  EXPECT_EQ((std::vector<double>(g.begin() + 3, g.end())), (std::vector<double>{0, 0, 0}));
}

TEST(Normalization, LayerNormAndRmsNormByHand) {
  Array x = from_host(std::vector<double>{1, 2, 3, 4}, Shape{1, 4});
  // mean 2.5, variance 1.25
  std::vector<double> y = values(nn::layer_norm(x, std::nullopt, std::nullopt, 0.0));
  double s = 1 / std::sqrt(1.25);
  EXPECT_NEAR(y[0], -1.5 * s, 1e-6);
  EXPECT_NEAR(y[3], 1.5 * s, 1e-6);
  Array scale = from_host(std::vector<double>{2, 2, 2, 2}, Shape{4});
  Array bias = from_host(std::vector<double>{1, 1, 1, 1}, Shape{4});
  EXPECT_NEAR(values(nn::layer_norm(x, scale, bias, 0.0))[0], 1 - 3 * s, 1e-6);
  // rms = sqrt(30 / 4)
  EXPECT_NEAR(values(nn::rms_norm(x, std::nullopt, 0.0))[1], 2 / std::sqrt(7.5), 1e-6);
  // A mean far from zero against the spread: the two-pass variance keeps it.
  Array offset = from_host(std::vector<float>{10000.f, 10001.f}, Shape{2});
  std::vector<double> z = values(nn::standardize(offset, {-1}, 0.0));
  EXPECT_NEAR(z[0], -1, 1e-3);
  EXPECT_NEAR(z[1], 1, 1e-3);
}

TEST(Attention, OneKeyIsThatKeysValueAndCausalMaskingSeesOnlyThePast) {
  // [T=3, heads=1, H=1]: query i attends causally to keys 0..i.
  Array q = zeros({3, 1, 1});
  Array v = from_host(std::vector<float>{1, 2, 6}, Shape{3, 1, 1});
  // Equal logits: the causal mean of the values so far.
  std::vector<double> out = values(nn::dot_product_attention(q, q, v, {.is_causal = true}));
  EXPECT_NEAR(out[0], 1, 1e-6);
  EXPECT_NEAR(out[1], 1.5, 1e-6);
  EXPECT_NEAR(out[2], 3, 1e-6);
  // A query that may attend to nothing averages every value, as JAX does.
  Array nothing = astype(zeros({3, 3}), DType::bool_);
  std::vector<double> even = values(nn::dot_product_attention(q, q, v, {.mask = nothing}));
  for (double e : even) EXPECT_NEAR(e, 3, 1e-6);
}

TEST(Attention, SequenceLengthsAndSlidingWindows) {
  // [B=2, T=3, heads=1, H=1], equal logits: each query averages the values it may see.
  Array q = zeros({2, 3, 1, 1});
  Array v = from_host(std::vector<float>{1, 2, 6, 1, 2, 6}, Shape{2, 3, 1, 1});
  Array lengths = from_host<int32_t>({2, 3}, {2});
  // Example 0: keys 0..1 only, and query 2 is padding (its output zero).
  std::vector<double> padded = values(nn::dot_product_attention(
      q, q, v, {.query_seq_lengths = lengths, .key_value_seq_lengths = lengths}));
  EXPECT_THAT(padded, ::testing::Pointwise(::testing::DoubleNear(1e-6),
                                           std::vector<double>{1.5, 1.5, 0, 3, 3, 3}));
  // Window (0, 1): query i sees keys i and i + 1.
  std::vector<double> window =
      values(nn::dot_product_attention(q, q, v, {.local_window_size = std::pair{0, 1}}));
  EXPECT_THAT(window, ::testing::Pointwise(::testing::DoubleNear(1e-6),
                                           std::vector<double>{1.5, 4, 6, 1.5, 4, 6}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)nn::dot_product_attention(q, q, v,
                                        {.query_seq_lengths = astype(lengths, DType::i64)});
      },
      {"query_seq_lengths must be i32[2] (one length per example), got i64[2]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)nn::dot_product_attention(q, q, v, {.local_window_size = std::pair{-1, 0}});
      },
      {"local_window_size (-1, 0) must not be negative"}));
}

TEST(FunctionalErrors, BadArgumentsAreNamed) {
  Array x = ones({2, 4});
  EXPECT_TRUE(fails_with(
      [&] {
        (void)nn::softmax(x, -1, ones({2, 4}));
      },
      {"nn::softmax: where must be a bool mask", "f32[2,4]"}));
  EXPECT_TRUE(fails_with([&] { (void)nn::layer_norm(x, ones({3})); },
                         {"nn::layer_norm: scale must be [4]", "f32[3]"}));
  EXPECT_TRUE(fails_with([&] { (void)nn::rms_norm(astype(x, DType::i32)); },
                         {"nn::rms_norm: x must be a floating-point array"}));
  Array q = ones({1, 2, 3, 4});
  EXPECT_TRUE(fails_with(
      [&] {
        (void)nn::dot_product_attention(q, ones({1, 2, 2, 4}), q);
      },
      {"key f32[1,2,2,4] and value f32[1,2,3,4] must both be"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)nn::dot_product_attention(q, ones({1, 2, 2, 4}), ones({1, 2, 2, 4}));
      },
      {"the query's 3 heads must be a multiple of the key's 2"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)nn::dot_product_attention(ones({4, 4}), q, q);
      },
      {"query must be [batch, length, heads, head size]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)nn::dot_product_attention(q, q, q, {.mask = ones({2, 2})});
      },
      {"mask must be bool"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)nn::dot_product_attention(q, q, q, {.bias = ones({5, 2})});
      },
      {"bias f32[5,2] does not broadcast to the logits", "[1,3,2,2]"}));
}

}  // namespace
}  // namespace kiln::testing
