// The errors kiln::random raises for bad keys and bad arguments. Every one names the op and
// what it got, and carries a HINT line (rejects() checks both), since these are mistakes
// users make: passing several keys where one is expected, reversed bounds, p outside [0, 1].
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <string_view>

#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::u32s;

// `fn` throws a kiln::Error containing every one of `parts` and a HINT line.
::testing::AssertionResult rejects(const std::function<void()>& fn,
                                   std::initializer_list<std::string_view> parts) {
  ::testing::AssertionResult named = testing::fails_with(fn, parts);
  if (!named) return named;
  return testing::fails_with(fn, {"\nHINT: "});
}

TEST(RandomErrors, KeysAreChecked) {
  Array not_a_key = from_host<float>({1, 2}, {2});
  EXPECT_TRUE(rejects([&] { random::uniform(not_a_key, {3}); },
                      {"uniform: expects a key of type u32[2], got f32[2]",
                       "HINT: make keys with kiln::random::key(seed)"}));
  Array keys = random::split(random::key(0), 3);
  EXPECT_TRUE(rejects([&] { random::normal(keys, {3}); },
                      {"normal: expects a key of type u32[2], got u32[3,2]", "key_at"}));
  // Each sampler and key function checks its key.
  Array i32_key = from_host<int32_t>({0, 1}, {2});
  Array three_words = u32s({1, 2, 3});
  Array one_word = scalar(7, DType::u32);
  EXPECT_TRUE(rejects([&] { random::split(i32_key); }, {"split", "got i32[2]"}));
  EXPECT_TRUE(rejects([&] { random::fold_in(three_words, 1); }, {"fold_in", "got u32[3]"}));
  EXPECT_TRUE(rejects([&] { random::bits(one_word, {2}); }, {"bits", "got u32[]"}));
  EXPECT_TRUE(rejects([&] { random::truncated_normal(i32_key, -1, 1, {2}); },
                      {"truncated_normal", "u32[2]"}));
  EXPECT_TRUE(rejects([&] { random::bernoulli(three_words, 0.5, {2}); }, {"bernoulli", "u32[3]"}));
  EXPECT_TRUE(rejects([&] { random::bernoulli(three_words, ones({2})); }, {"bernoulli", "u32[3]"}));
  EXPECT_TRUE(
      rejects([&] { random::categorical(i32_key, zeros({3})); }, {"categorical", "i32[2]"}));
  EXPECT_TRUE(rejects([&] { random::permutation(keys, 4); }, {"permutation", "u32[3,2]"}));
  EXPECT_TRUE(rejects([&] { random::permutation(keys, zeros({4})); }, {"permutation", "u32[3,2]"}));
  EXPECT_TRUE(rejects([&] { random::split(Array(), 2); }, {"split", "empty Array"}));
  EXPECT_TRUE(rejects([&] { random::uniform(Array()); }, {"uniform", "empty Array"}));
  // split and key_at.
  EXPECT_TRUE(rejects([&] { random::split(random::key(0), -1); }, {"split", ">= 0, got -1"}));
  EXPECT_TRUE(rejects([&] { random::key_at(keys, 3); }, {"key_at", "index 3 is out of range"}));
  EXPECT_TRUE(rejects([&] { random::key_at(keys, -1); }, {"key_at", "out of range"}));
  EXPECT_TRUE(rejects([&] { random::key_at(random::key(0), 0); }, {"key_at", "u32[n,2]"}));
  EXPECT_TRUE(rejects([&] { random::key_at(Array(), 0); }, {"key_at", "empty Array"}));
}

TEST(RandomErrors, ShapesAndDTypesAreChecked) {
  Array key = random::key(0);
  EXPECT_TRUE(rejects([&] { random::bits(key, {3}, DType::i32); }, {"bits", "u32 or u8, got i32"}));
  EXPECT_TRUE(rejects([&] { random::uniform(key, {3}, DType::i32); }, {"uniform", "float"}));
  EXPECT_TRUE(rejects([&] { random::normal(key, {3}, DType::u8); }, {"normal", "float"}));
  EXPECT_TRUE(rejects([&] { random::truncated_normal(key, -1, 1, {3}, DType::bool_); },
                      {"truncated_normal", "float"}));
  for (const Shape& bad : {Shape{-1}, Shape{2, -3}}) {
    EXPECT_TRUE(rejects([&] { random::bits(key, bad); }, {"bits", "negative size"}));
    EXPECT_TRUE(rejects([&] { random::uniform(key, bad); }, {"uniform", "negative size"}));
    EXPECT_TRUE(rejects([&] { random::normal(key, bad); }, {"normal", "negative size"}));
    EXPECT_TRUE(rejects([&] { random::truncated_normal(key, -1, 1, bad); },
                        {"truncated_normal", "negative size"}));
    EXPECT_TRUE(rejects([&] { random::bernoulli(key, 0.5, bad); }, {"bernoulli", "negative size"}));
  }
}

TEST(RandomErrors, BoundsAreChecked) {
  Array key = random::key(0);
  EXPECT_TRUE(rejects([&] { random::uniform(key, {3}, DType::f32, 2, 1); },
                      {"uniform", "minval < maxval", "swap"}));
  EXPECT_TRUE(rejects([&] { random::uniform(key, {3}, DType::f32, 1, 1); },
                      {"uniform", "minval=1 maxval=1"}));
  EXPECT_TRUE(
      rejects([&] { random::uniform(key, {3}, DType::f32, NAN, 1); }, {"uniform", "minval=nan"}));
  EXPECT_TRUE(
      rejects([&] { random::uniform(key, {3}, DType::f32, 0, INFINITY); }, {"uniform", "finite"}));
  // Bounds that collapse, or a range that overflows, once rounded to the dtype.
  EXPECT_TRUE(rejects([&] { random::uniform(key, {3}, DType::f16, 1, 1.0001); },
                      {"uniform", "not a valid range in f16"}));
  EXPECT_TRUE(rejects([&] { random::uniform(key, {3}, DType::f16, -6e4, 6e4); },
                      {"uniform", "not a valid range in f16: maxval - minval overflows it"}));
  EXPECT_TRUE(rejects([&] { random::uniform(key, {3}, DType::f32, -3e38, 3e38); },
                      {"uniform", "overflows", "f32 or f64"}));
  EXPECT_TRUE(rejects([&] { random::truncated_normal(key, 1, -1, {3}); },
                      {"truncated_normal", "lower < upper"}));
  EXPECT_TRUE(rejects([&] { random::truncated_normal(key, 0.5, 0.5, {3}); },
                      {"truncated_normal", "lower < upper"}));
  EXPECT_TRUE(rejects([&] { random::truncated_normal(key, NAN, 1, {3}); },
                      {"truncated_normal", "lower=nan"}));
  EXPECT_TRUE(
      rejects([&] { random::truncated_normal(key, 1, 1.001, {3}, DType::bf16); },
              {"truncated_normal", "lower < upper (in bf16)", "both round to 1", "wider dtype"}));
  EXPECT_TRUE(rejects([&] { random::truncated_normal(key, INFINITY, INFINITY, {3}); },
                      {"truncated_normal", "lower < upper"}));
}

TEST(RandomErrors, RandintDTypesAreChecked) {
  Array key = random::key(0);
  EXPECT_TRUE(rejects([&] { random::randint(key, {3}, 0, 10, DType::i64); },
                      {"randint: dtype must be i32, u32 or u8, got i64", "draw i32 and convert"}));
  EXPECT_TRUE(rejects([&] { random::randint(key, {3}, 0, 10, DType::f32); },
                      {"randint: dtype must be i32, u32 or u8, got f32"}));
  EXPECT_TRUE(rejects([&] { random::randint(key, {-1}, 0, 10); }, {"randint"}));
  // In range, and an empty range gives minval.
  for (int32_t v : random::randint(key, {1000}, -3, 4).to_vector<int32_t>()) {
    EXPECT_TRUE(v >= -3 && v < 4) << v;
  }
  for (int32_t v : random::randint(key, {5}, 9, 2).to_vector<int32_t>()) EXPECT_EQ(v, 9);
}

TEST(RandomErrors, ProbabilitiesAreChecked) {
  Array key = random::key(0);
  for (double p : {1.5, -0.25, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
    EXPECT_TRUE(
        rejects([&] { random::bernoulli(key, p, {3}); }, {"bernoulli: p must be in [0, 1]"}))
        << p;
  }
  Array p = from_host<float>({0.5f, 0.5f}, {2});
  EXPECT_TRUE(rejects([&] { random::bernoulli(key, p, Shape{3}); },
                      {"bernoulli: p of shape [2] does not broadcast to the shape [3]"}));
  // p may broadcast to `shape`, never the other way round.
  EXPECT_TRUE(rejects(
      [&] {
        random::bernoulli(key, ones({2, 3}), Shape{3});
      },
      {"bernoulli", "does not broadcast"}));
  EXPECT_TRUE(rejects([&] { random::bernoulli(key, astype(p, DType::i32)); },
                      {"bernoulli", "float dtype", "i32[2]"}));
  EXPECT_TRUE(rejects([&] { random::bernoulli(key, Array()); }, {"bernoulli", "empty Array"}));
  EXPECT_TRUE(
      rejects([&] { random::bernoulli(key, p, Shape{-2}); }, {"bernoulli", "negative size"}));
}

TEST(RandomErrors, CategoricalAndPermutationArgumentsAreChecked) {
  Array key = random::key(0);
  Array logits = zeros({2, 3});
  EXPECT_TRUE(rejects([&] { random::categorical(key, logits, 2); },
                      {"categorical", "axis 2 is out of range"}));
  EXPECT_TRUE(rejects([&] { random::categorical(key, logits, -3); },
                      {"categorical", "axis -3 is out of range"}));
  EXPECT_TRUE(rejects(
      [&] {
        random::categorical(key, zeros({3, 0}));
      },
      {"categorical", "no categories along axis -1"}));
  EXPECT_TRUE(rejects(
      [&] {
        random::categorical(key, zeros({0, 3}), 0);
      },
      {"categorical", "no categories along axis 0"}));
  EXPECT_TRUE(rejects([&] { random::categorical(key, zeros({3}, DType::i32)); },
                      {"categorical", "float dtype"}));
  EXPECT_TRUE(rejects([&] { random::categorical(key, scalar(1.0)); },
                      {"categorical", "at least one axis"}));
  EXPECT_TRUE(rejects([&] { random::categorical(key, Array()); }, {"categorical", "empty Array"}));
  EXPECT_TRUE(rejects([&] { random::permutation(key, -2); }, {"permutation", ">= 0, got -2"}));
  EXPECT_TRUE(rejects([&] { random::permutation(key, scalar(3.0)); },
                      {"permutation", "at least one axis", "permutation(key, n)"}));
  EXPECT_TRUE(rejects(
      [&] {
        random::permutation(key, zeros({2, 3}), 2);
      },
      {"permutation", "axis 2 is out of range"}));
  EXPECT_TRUE(rejects([&] { random::permutation(key, Array()); }, {"permutation", "empty Array"}));
}

TEST(RandomErrors, ThreefryOperandsAreChecked) {
  EXPECT_TRUE(rejects(
      [&] {
        random::threefry2x32(scalar(1, DType::i32), scalar(1, DType::i32), scalar(1, DType::i32),
                             scalar(1, DType::i32));
      },
      {"threefry2x32: operands must all be u32"}));
  EXPECT_TRUE(testing::fails_with(
      [&] {
        random::threefry2x32(u32s({1, 2}), u32s({1}), u32s({1, 2, 3}), u32s({1}));
      },
      {"threefry2x32", "cannot be broadcast"}));
  EXPECT_TRUE(rejects([&] { random::threefry2x32(u32s({1}), Array(), u32s({1}), u32s({1})); },
                      {"threefry2x32", "empty Array"}));
}

}  // namespace
}  // namespace kiln
