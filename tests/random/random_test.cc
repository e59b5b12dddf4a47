// kiln::random beyond the fixture: Random123 known answers through the threefry2x32
// primitive, JAX's published key values, the split/fold_in symmetry, independence from
// how the counters are tiled, statistical sanity of every sampler, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::fails_with;

Array u32s(std::vector<uint32_t> values) {
  Shape shape{static_cast<int64_t>(values.size())};
  return from_host<uint32_t>(values, shape);
}

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

// Partitionable bits: element i depends only on (key, i), so hashing any tile of the
// counters gives the matching tile of the whole; and the same key gives the same bits.
TEST(RandomBits, DoNotDependOnTiling) {
  Array key = random::key(9);
  int64_t n = 100003;
  Array whole = random::bits(key, {n});
  Array k0 = slice(key, {0}, {1}), k1 = slice(key, {1}, {2});
  std::vector<uint32_t> tiled;
  for (int64_t start : {int64_t{0}, int64_t{40000}, int64_t{40001}}) {
    int64_t stop = start == 0 ? 40000 : (start == 40000 ? 40001 : n);
    Array counters = arange(static_cast<double>(start), static_cast<double>(stop), 1, DType::u32);
    auto [a, b] = random::threefry2x32(k0, k1, scalar(0, DType::u32), counters);
    for (uint32_t v : bitwise_xor(a, b).to_vector<uint32_t>()) tiled.push_back(v);
  }
  EXPECT_EQ(whole.to_vector<uint32_t>(), tiled);
  EXPECT_EQ(reshape(random::bits(key, {7, 3}), {21}).to_vector<uint32_t>(),
            random::bits(key, {21}).to_vector<uint32_t>());
  EXPECT_EQ(random::bits(key, {n}).to_vector<uint32_t>(), whole.to_vector<uint32_t>());
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

TEST(RandomErrors, KeysAreChecked) {
  Array not_a_key = from_host<float>({1, 2}, {2});
  EXPECT_TRUE(fails_with([&] { random::uniform(not_a_key, {3}); },
                         {"uniform: expects a key of type u32[2], got f32[2]",
                          "HINT: make keys with kiln::random::key(seed)"}));
  Array keys = random::split(random::key(0), 3);
  EXPECT_TRUE(fails_with([&] { random::normal(keys, {3}); },
                         {"normal: expects a key of type u32[2], got u32[3,2]", "key_at"}));
  EXPECT_TRUE(fails_with([&] { random::split(Array(), 2); }, {"split", "empty Array"}));
  EXPECT_TRUE(fails_with([&] { random::split(random::key(0), -1); }, {"split", ">= 0"}));
  EXPECT_TRUE(fails_with([&] { random::key_at(keys, 3); }, {"key_at", "out of range"}));
  EXPECT_TRUE(fails_with([&] { random::key_at(random::key(0), 0); }, {"key_at", "u32[n,2]"}));
}

TEST(RandomErrors, ArgumentsAreChecked) {
  Array key = random::key(0);
  EXPECT_TRUE(fails_with([&] { random::bits(key, {3}, DType::i32); }, {"bits", "u32 or u8"}));
  EXPECT_TRUE(fails_with([&] { random::uniform(key, {3}, DType::i32); }, {"uniform", "float"}));
  EXPECT_TRUE(fails_with([&] { random::uniform(key, {3}, DType::f32, 2, 1); },
                         {"uniform", "minval < maxval", "swap"}));
  EXPECT_TRUE(fails_with([&] { random::uniform(key, {-1}); }, {"uniform", "negative size"}));
  EXPECT_TRUE(fails_with([&] { random::uniform(key, {3}, DType::f16, 1, 1.0001); },
                         {"uniform", "not a valid range in f16"}));
  EXPECT_TRUE(fails_with([&] { random::normal(key, {3}, DType::u8); }, {"normal", "float"}));
  EXPECT_TRUE(fails_with([&] { random::truncated_normal(key, 1, -1, {3}); },
                         {"truncated_normal", "lower < upper"}));
  EXPECT_TRUE(fails_with([&] { random::bernoulli(key, 1.5, {3}); }, {"bernoulli", "[0, 1]"}));
  EXPECT_TRUE(fails_with([&] { random::bernoulli(key, NAN, {3}); }, {"bernoulli", "[0, 1]"}));
  Array p = from_host<float>({0.5f, 0.5f}, {2});
  EXPECT_TRUE(fails_with([&] { random::bernoulli(key, p, Shape{3}); }, {"bernoulli", "broadcast"}));
  EXPECT_TRUE(fails_with([&] { random::bernoulli(key, astype(p, DType::i32)); },
                         {"bernoulli", "float dtype"}));
  Array logits = zeros({2, 3});
  EXPECT_TRUE(fails_with([&] { random::categorical(key, logits, 2); },
                         {"categorical", "axis 2 is out of range"}));
  EXPECT_TRUE(fails_with(
      [&] {
        random::categorical(key, zeros({3, 0}));
      },
      {"categorical", "no categories"}));
  EXPECT_TRUE(fails_with([&] { random::categorical(key, zeros({3}, DType::i32)); },
                         {"categorical", "float dtype"}));
  EXPECT_TRUE(fails_with([&] { random::permutation(key, -2); }, {"permutation", ">= 0"}));
  EXPECT_TRUE(fails_with([&] { random::permutation(key, scalar(3.0)); },
                         {"permutation", "at least one axis", "permutation(key, n)"}));
  EXPECT_TRUE(fails_with(
      [&] {
        random::threefry2x32(scalar(1, DType::i32), scalar(1, DType::i32), scalar(1, DType::i32),
                             scalar(1, DType::i32));
      },
      {"threefry2x32: operands must all be u32"}));
  EXPECT_TRUE(fails_with(
      [&] {
        random::threefry2x32(u32s({1, 2}), u32s({1}), u32s({1, 2, 3}), u32s({1}));
      },
      {"threefry2x32", "cannot be broadcast"}));
}

}  // namespace
}  // namespace kiln
