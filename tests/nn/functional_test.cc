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
#include "kiln/random.h"
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

// The largest |a - b| over every element.
double max_difference(const Array& a, const Array& b) {
  return max(abs(astype(a, DType::f64) - astype(b, DType::f64))).item<double>();
}

TEST(Attention, TheFlashImplementationComputesThePlainOnesValuesAndGradients) {
  // [B=2, T=37, heads=3, H=16]: T not a multiple of the kernel's 64-row blocks.
  Array q = random::normal(random::key(1), {2, 37, 3, 16});
  Array k = random::normal(random::key(2), {2, 37, 3, 16});
  Array v = random::normal(random::key(3), {2, 37, 3, 16});
  Array weights = random::normal(random::key(9), {2, 37, 3, 16});
  for (bool causal : {false, true}) {
    nn::AttentionOptions plain{.is_causal = causal};
    nn::AttentionOptions flash{.is_causal = causal,
                               .implementation = nn::AttentionImplementation::kFlash};
    Array expected = nn::dot_product_attention(q, k, v, plain);
    Array got = nn::dot_product_attention(q, k, v, flash);
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_LT(max_difference(got, expected), 2e-6) << "causal " << causal;
    auto loss = [&](const nn::AttentionOptions& options) {
      return grad<0, 1, 2>([&options, &weights](const Array& a, const Array& b, const Array& c) {
        return sum(nn::dot_product_attention(a, b, c, options) * weights);
      })(q, k, v);
    };
    auto [dq, dk, dv] = loss(flash);
    auto [pq, pk, pv] = loss(plain);
    EXPECT_LT(max_difference(dq, pq), 1e-4);
    EXPECT_LT(max_difference(dk, pk), 1e-4);
    EXPECT_LT(max_difference(dv, pv), 1e-4);
  }
  // Unbatched [T, heads, H], and bf16.
  Array q3 = slice(q, {0, 0, 0, 0}, {1, 37, 3, 16}).reshape({37, 3, 16});
  nn::AttentionOptions flash{.is_causal = true,
                             .implementation = nn::AttentionImplementation::kFlash};
  EXPECT_LT(max_difference(nn::dot_product_attention(q3, q3, q3, flash),
                           nn::dot_product_attention(q3, q3, q3, {.is_causal = true})),
            2e-6);
  Array qb = astype(q, DType::bf16);
  Array flash_bf16 = nn::dot_product_attention(qb, qb, qb, flash);
  EXPECT_EQ(flash_bf16.dtype(), DType::bf16);
  EXPECT_LT(max_difference(flash_bf16, nn::dot_product_attention(qb, qb, qb, {.is_causal = true})),
            0.05);
}

TEST(Attention, WhatTheFlashImplementationDoesNotTakeIsRefusedByName) {
  Array q = random::normal(random::key(4), {1, 8, 2, 4});
  auto flash = [](nn::AttentionOptions options) {
    options.implementation = nn::AttentionImplementation::kFlash;
    return options;
  };
  Array mask = astype(ones({8, 8}), DType::bool_);
  EXPECT_TRUE(fails_with([&] { nn::dot_product_attention(q, q, q, flash({.mask = mask})); },
                         {"implementation kFlash does not take a mask", "kPlain"}));
  EXPECT_TRUE(fails_with([&] { nn::dot_product_attention(q, q, q, flash({.bias = q})); },
                         {"does not take a bias"}));
  EXPECT_TRUE(fails_with([&] { nn::dot_product_attention(q, q, q, flash({.scale = 0.1})); },
                         {"a scale other than 1 / sqrt(head size 4)"}));
  Array grouped = random::normal(random::key(5), {1, 8, 1, 4});
  EXPECT_TRUE(fails_with([&] { nn::dot_product_attention(q, grouped, grouped, flash({})); },
                         {"keys of another length or head count"}));
  Array q64 = astype(q, DType::f64);
  EXPECT_TRUE(fails_with([&] { nn::dot_product_attention(q64, q64, q64, flash({})); }, {"f64"}));
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
