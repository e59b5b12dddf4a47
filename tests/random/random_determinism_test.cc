// What kiln::random promises beyond matching the fixture: a draw depends only on the key,
// the shape and the dtype (never on the thread count, the kernels' chunking, or the
// interpreter), and keys are ordinary arrays that trace into programs and pass through
// grad. CTest runs this binary with 1 and 3 compute threads and with the reference kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/transforms.h"
#include "transforms/eval.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::vector<T> first(const Array& x, int64_t n) {
  std::vector<T> all = x.to_vector<T>();
  return {all.begin(), all.begin() + n};
}

// Partitionable bits: element i depends only on (key, i), so hashing any tile of the
// counters gives the matching tile of the whole.
TEST(RandomTiling, TilesOfTheCountersGiveTilesOfTheBits) {
  Array key = random::key(9);
  int64_t n = 100003;
  Array whole = random::bits(key, {n});
  Array k0 = slice(key, {0}, {1}), k1 = slice(key, {1}, {2});
  std::vector<uint32_t> tiled;
  for (auto [start, stop] : {std::pair<int64_t, int64_t>{0, 40000}, {40000, 40001}, {40001, n}}) {
    Array counters = arange(static_cast<double>(start), static_cast<double>(stop), 1, DType::u32);
    auto [a, b] = random::threefry2x32(k0, k1, scalar(0, DType::u32), counters);
    for (uint32_t v : bitwise_xor(a, b).to_vector<uint32_t>()) tiled.push_back(v);
  }
  EXPECT_EQ(whole.to_vector<uint32_t>(), tiled);
  EXPECT_EQ(random::bits(key, {n}).to_vector<uint32_t>(), whole.to_vector<uint32_t>());
}

// What that means for callers: element i of a draw is a function of the key and i, its
// row-major index in the requested shape. A draw is the leading part of any longer draw
// with the same row-major order (more elements, more leading rows, another rank), for
// every sampler that maps bits elementwise.
TEST(RandomTiling, ADrawIsThePrefixOfALongerDraw) {
  Array key = random::key(2024);
  Array big = random::bits(key, {1000, 7});
  for (int64_t n : {0, 1, 13, 4096, 4097, 7000}) {
    EXPECT_EQ(random::bits(key, {n}).to_vector<uint32_t>(), first<uint32_t>(big, n)) << n;
  }
  EXPECT_EQ(random::bits(key, {3, 7}).to_vector<uint32_t>(), first<uint32_t>(big, 21));
  EXPECT_EQ(random::bits(key, {3, 7}, DType::u8).to_vector<uint8_t>(),
            first<uint8_t>(astype(big, DType::u8), 21));
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    Array u = random::uniform(key, {50, 200}, dtype, -1, 3);
    EXPECT_EQ(astype(random::uniform(key, {4099}, dtype, -1, 3), DType::f64).to_vector<double>(),
              first<double>(astype(u, DType::f64), 4099))
        << dtype_name(dtype);
  }
  EXPECT_EQ(random::normal(key, {5000}).to_vector<float>(),
            first<float>(random::normal(key, {100, 100}), 5000));
  EXPECT_EQ(random::truncated_normal(key, -1, 2, {2, 5}).to_vector<float>(),
            first<float>(random::truncated_normal(key, -1, 2, {3, 5}), 10));
  EXPECT_EQ(random::bernoulli(key, 0.3, {777}).to_vector<bool>(),
            first<bool>(random::bernoulli(key, 0.3, {10000}), 777));
  // A column slice is not a smaller draw: its elements have other row-major indices.
  EXPECT_NE(random::bits(key, {3, 5}).to_vector<uint32_t>(),
            slice(random::bits(key, {3, 7}), {0, 0}, {3, 5}).to_vector<uint32_t>());
}

// The same key gives the same numbers, and draws do not consume anything.
TEST(RandomTiling, KeysAreValuesNotState) {
  Array key = random::key(5);
  Array a = random::normal(key, {1000});
  random::uniform(key, {123});
  random::split(key, 4);
  EXPECT_EQ(random::normal(key, {1000}).to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(random::normal(random::key(5), {1000}).to_vector<float>(), a.to_vector<float>());
  EXPECT_NE(random::normal(random::fold_in(key, 0), {1000}).to_vector<float>(),
            a.to_vector<float>());
}

// A function drawing from a key passed as an argument traces into a program whose input is
// the key, with threefry2x32 equations; running that program on a key gives the eager draws.
TEST(RandomTracing, KeysAreProgramInputs) {
  auto draw = [](const Array& key) {
    Array keys = random::split(key, 3);
    Array noise = random::normal(random::key_at(keys, 0), {4});
    Array mask = random::bernoulli(random::fold_in(random::key_at(keys, 1), 7), 0.5, {2, 3});
    Array order = random::permutation(random::key_at(keys, 2), 10);
    Array picks = random::categorical(key, zeros({5, 3}));
    return std::vector<Array>{noise, mask, order, picks};
  };
  Array key = random::key(42);
  TracedProgram traced = make_program(draw, key);
  std::string text = traced.to_string();
  EXPECT_THAT(text, HasSubstr("{ lambda ; a:u32[2]. let"));
  EXPECT_THAT(text, HasSubstr("threefry2x32"));
  EXPECT_THAT(text, HasSubstr("erf_inv"));
  EXPECT_THAT(text, HasSubstr("sort"));
  ASSERT_EQ(traced.program->inputs.size(), 1u);
  ASSERT_EQ(traced.program->outputs.size(), 4u);
  for (Array run_key : {key, random::key(7)}) {
    std::vector<Array> traced_out =
        eval_program(*traced.program, std::vector<Array>{run_key}, CallSite());
    std::vector<Array> eager = draw(run_key);
    EXPECT_EQ(traced_out[0].to_vector<float>(), eager[0].to_vector<float>());
    EXPECT_EQ(traced_out[1].to_vector<bool>(), eager[1].to_vector<bool>());
    EXPECT_EQ(traced_out[2].to_vector<int32_t>(), eager[2].to_vector<int32_t>());
    EXPECT_EQ(traced_out[3].to_vector<int32_t>(), eager[3].to_vector<int32_t>());
  }
}

// A key is an ordinary (non-differentiable) argument: dropout's mask passes through grad.
TEST(RandomTracing, DropoutUnderGrad) {
  auto loss = [](const Array& x, const Array& key) {
    Array keep = astype(random::bernoulli(key, 0.75, x.shape()), DType::f32);
    return sum(x * keep / 0.75);
  };
  Array x = ones({64});
  Array key = random::key(3);
  Array dx = grad(loss)(x, key);
  std::vector<bool> mask = random::bernoulli(key, 0.75, {64}).to_vector<bool>();
  std::vector<float> got = dx.to_vector<float>();
  for (size_t i = 0; i < mask.size(); ++i) {
    EXPECT_EQ(got[i], mask[i] ? 1.0f / 0.75f : 0.0f) << i;
  }
}

}  // namespace
}  // namespace kiln
