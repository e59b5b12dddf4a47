// kiln::random beyond the fixture: Random123 known answers through the threefry2x32
// primitive, the values JAX publishes (key, fold_in, split and uniform under the
// partitionable configuration), the split/fold_in symmetry, and statistical sanity of
// every sampler. Errors: random_errors_test.cc; tiling and tracing: random_determinism_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/arrays.h"

namespace kiln {
namespace {
using ::kiln::testing::u32s;

// Random123's kat_vectors for threefry2x32 with 20 rounds: (key, counter) -> output.
TEST(Threefry, MatchesRandom123KnownAnswers) {
  struct Kat {
    uint32_t key[2], counter[2], expected[2];
  };
  const Kat kats[] = {
      {{0, 0}, {0, 0}, {0x6b200159, 0x99ba4efe}},
      {{0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x1cb996fc, 0xbb002be7}},
      {{0x13198a2e, 0x03707344}, {0x243f6a88, 0x85a308d3}, {0xc4923a9c, 0x483df7a0}},
  };
  for (const Kat& kat : kats) {
    auto [y0, y1] = random::threefry2x32(
        scalar(kat.key[0], DType::u32), scalar(kat.key[1], DType::u32),
        scalar(kat.counter[0], DType::u32), scalar(kat.counter[1], DType::u32));
    EXPECT_EQ(y0.item<uint32_t>(), kat.expected[0]);
    EXPECT_EQ(y1.item<uint32_t>(), kat.expected[1]);
  }
  // Broadcast keys over many counters (the fast kernel's common layout), all identical.
  int64_t n = 50001;
  auto [y0, y1] =
      random::threefry2x32(u32s({0x13198a2e}), u32s({0x03707344}),
                           full({n}, 0x243f6a88, DType::u32), full({n}, 0x85a308d3, DType::u32));
  for (uint32_t v : y0.to_vector<uint32_t>()) ASSERT_EQ(v, 0xc4923a9cu);
  for (uint32_t v : y1.to_vector<uint32_t>()) ASSERT_EQ(v, 0x483df7a0u);
}

// jax tests/random_test.py (testPRNGValues): fold_in(key(0), 4); fold_in does not depend on
// jax_threefry_partitionable, and split(key, n)[i] == fold_in(key, i) when it is on.
TEST(RandomKeys, MatchJaxPublishedValues) {
  Array key = random::key(0);
  EXPECT_EQ(random::fold_in(key, 4).to_vector<uint32_t>(),
            (std::vector<uint32_t>{2285895361u, 433833334u}));
  EXPECT_EQ(random::key_at(random::split(key, 5), 4).to_vector<uint32_t>(),
            (std::vector<uint32_t>{2285895361u, 433833334u}));
  EXPECT_EQ(random::key(42).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 42}));
  EXPECT_EQ(random::key(0x123456789abcdef0ull).to_vector<uint32_t>(),
            (std::vector<uint32_t>{0x12345678u, 0x9abcdef0u}));
}

// Partitionable outputs printed by JAX's doctested documentation (jax/random.py and
// docs/jep/9263-typed-keys.md): uniform(key(0)), uniform(key(0), (3,)), and uniform of the
// second key of split(key(0)). numpy prints at most 8 significant digits; shorter values
// are exact.
TEST(RandomKeys, MatchJaxPublishedUniforms) {
  Array key = random::key(0);
  EXPECT_EQ(random::uniform(key).item<float>(), 0.947667f);
  std::vector<float> three = random::uniform(key, {3}).to_vector<float>();
  EXPECT_EQ(three[0], 0.947667f);
  EXPECT_EQ(three[1], 0.9785799f);
  EXPECT_NEAR(three[2], 0.33229148, 1e-8);
  Array subkey = random::key_at(random::split(key), 1);
  EXPECT_NEAR(random::uniform(subkey).item<float>(), 0.00729382, 1e-8);
}

// jax.random.uniform (_uniform) keeps the top mantissa bits of as many random bits as the
// dtype is wide, but of 8 bits when the mantissa is narrower than 8: f32 takes the top 23
// of the 32-bit draw, f16 the top 10 of its low 16 bits, and bf16 the top 7 of its low byte.
TEST(RandomKeys, UniformTakesJaxsMantissaBits) {
  Array key = random::key(77);
  int64_t n = 4096;
  std::vector<uint32_t> words = random::bits(key, {n}).to_vector<uint32_t>();
  auto expect = [&](DType dtype, uint32_t drawn_mask, int drawn, int mantissa) {
    std::vector<double> u =
        astype(random::uniform(key, {n}, dtype), DType::f64).to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      uint32_t top = (words[static_cast<size_t>(i)] & drawn_mask) >> (drawn - mantissa);
      ASSERT_EQ(u[static_cast<size_t>(i)], std::ldexp(top, -mantissa))
          << dtype_name(dtype) << " element " << i;
    }
  };
  expect(DType::f32, 0xFFFFFFFFu, 32, 23);
  expect(DType::f16, 0xFFFFu, 16, 10);
  expect(DType::bf16, 0xFFu, 8, 7);
}

TEST(RandomKeys, SplitRowsAreFoldIns) {
  Array key = random::key(72);
  Array keys = random::split(key, 7);
  EXPECT_EQ(keys.shape(), (Shape{7, 2}));
  for (int64_t i = 0; i < 7; ++i) {
    EXPECT_EQ(random::key_at(keys, i).to_vector<uint32_t>(),
              random::fold_in(key, static_cast<uint32_t>(i)).to_vector<uint32_t>());
  }
  EXPECT_EQ(random::split(key).shape(), (Shape{2, 2}));
  EXPECT_EQ(random::split(key, 0).shape(), (Shape{0, 2}));
}

struct Moments {
  double mean = 0, variance = 0;
};
Moments moments_of(const Array& x) {
  std::vector<double> v = astype(x, DType::f64).to_vector<double>();
  Moments m;
  for (double value : v) m.mean += value;
  m.mean /= static_cast<double>(v.size());
  for (double value : v) m.variance += (value - m.mean) * (value - m.mean);
  m.variance /= static_cast<double>(v.size() - 1);
  return m;
}

constexpr int64_t kDraws = 100000;

TEST(RandomStatistics, UniformMomentsAndRange) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    Array u = random::uniform(random::key(1), {kDraws}, dtype, -1, 3);
    Moments m = moments_of(u);
    // Mean 1, variance 16/12; the mean's standard error is ~0.0037.
    EXPECT_NEAR(m.mean, 1.0, 0.02) << dtype_name(dtype);
    EXPECT_NEAR(m.variance, 16.0 / 12, 0.03) << dtype_name(dtype);
    EXPECT_GE(min(u).item<double>(), -1.0);
    EXPECT_LT(max(u).item<double>(), 3.0);
  }
}

TEST(RandomStatistics, NormalMoments) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    Moments m = moments_of(random::normal(random::key(2), {kDraws}, dtype));
    EXPECT_NEAR(m.mean, 0.0, 0.02) << dtype_name(dtype);
    EXPECT_NEAR(m.variance, 1.0, 0.03) << dtype_name(dtype);
  }
}

TEST(RandomStatistics, TruncatedNormalStaysInsideAndHasTheRightMean) {
  Array x = random::truncated_normal(random::key(3), -1.0, 2.0, {kDraws});
  EXPECT_GT(min(x).item<double>(), -1.0);
  EXPECT_LT(max(x).item<double>(), 2.0);
  // Mean of N(0,1) on (-1, 2): (phi(-1) - phi(2)) / (Phi(2) - Phi(-1)).
  auto phi = [](double t) { return std::exp(-t * t / 2) / std::sqrt(2 * std::numbers::pi); };
  auto cdf = [](double t) { return 0.5 * std::erfc(-t / std::sqrt(2.0)); };
  double expected = (phi(-1) - phi(2)) / (cdf(2) - cdf(-1));
  EXPECT_NEAR(moments_of(x).mean, expected, 0.01);
  Array tail = random::truncated_normal(random::key(4), 3.0, INFINITY, {1000}, DType::f64);
  EXPECT_GT(min(tail).item<double>(), 3.0);
}

TEST(RandomStatistics, BernoulliFrequency) {
  for (double p : {0.0, 0.3, 1.0}) {
    Array b = random::bernoulli(random::key(5), p, {kDraws});
    EXPECT_EQ(b.dtype(), DType::bool_);
    double frequency = moments_of(b).mean;
    EXPECT_NEAR(frequency, p, 0.006) << p;
  }
  Array p = from_host<float>({0.1f, 0.9f}, {2});
  Array b = random::bernoulli(random::key(6), p, Shape{kDraws / 2, 2});
  Array frequency = mean(astype(b, DType::f32), {0});
  std::vector<float> f = frequency.to_vector<float>();
  EXPECT_NEAR(f[0], 0.1, 0.01);
  EXPECT_NEAR(f[1], 0.9, 0.01);
}

TEST(RandomStatistics, CategoricalFollowsSoftmax) {
  std::vector<float> logits{0.0f, 1.0f, 2.0f, -1.0f};
  Array batch = broadcast_to(from_host<float>(logits, {4}), {kDraws, 4});
  Array samples = random::categorical(random::key(7), batch);
  EXPECT_EQ(samples.shape(), (Shape{kDraws}));
  EXPECT_EQ(samples.dtype(), DType::i32);
  std::vector<int32_t> drawn = samples.to_vector<int32_t>();
  double total = 0;
  for (float l : logits) total += std::exp(l);
  for (int k = 0; k < 4; ++k) {
    double frequency = static_cast<double>(std::count(drawn.begin(), drawn.end(), k)) /
                       static_cast<double>(kDraws);
    EXPECT_NEAR(frequency, std::exp(logits[static_cast<size_t>(k)]) / total, 0.006) << k;
  }
  // Along axis 0.
  EXPECT_EQ(random::categorical(random::key(8), transpose(batch), 0).shape(), (Shape{kDraws}));
}

TEST(RandomStatistics, PermutationsArePermutations) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{100000}}) {
    std::vector<int32_t> p = random::permutation(random::key(10), n).to_vector<int32_t>();
    std::vector<int32_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int32_t> expected(static_cast<size_t>(n));
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(sorted, expected) << n;
    if (n >= 1000) {
      EXPECT_NE(p, expected) << n;
    }
  }
  // Rows of a matrix move together.
  Array x = reshape(arange(12, DType::f32), {4, 3});
  Array shuffled = random::permutation(random::key(11), x, 0);
  std::vector<float> rows = shuffled.to_vector<float>();
  for (int r = 0; r < 4; ++r) {
    float first = rows[static_cast<size_t>(3 * r)];
    EXPECT_EQ(rows[static_cast<size_t>(3 * r + 1)], first + 1);
    EXPECT_EQ(std::fmod(first, 3.0f), 0.0f);
  }
}

}  // namespace
}  // namespace kiln
