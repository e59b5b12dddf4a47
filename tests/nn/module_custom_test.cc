// nn::custom_module: a layer of the user's own, from init and apply functions. It gets
// Sequential's names and keys, shows in the summary with its parameter count, transforms
// under jit (the same bits), grad (finite differences) and vmap, and its errors name the
// layer's path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/vmap.h"
#include "nn/module_testing.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;
using testing::all_close;
using testing::f32_type;
using ::testing::HasSubstr;
using testing::normal_input;

Array apply_dense(const Tree& layer, const Array& x) {
  return matmul(x, layer["kernel"].leaf()) + layer["bias"].leaf();
}

// x + relu(x @ w1) @ w2 over the last axis: a residual MLP block, the worked example of
// docs/training.md.
Module residual_mlp(int64_t hidden, bool say_output_type = true) {
  ModuleFunctions f;
  f.name = "residual_mlp";
  f.description = "ResidualMlp(" + std::to_string(hidden) + ")";
  f.init = [hidden](const Array& key, const AbstractValue& input) {
    int64_t c = input.shape[input.shape.rank() - 1];
    Array w1 = random::normal(random::fold_in(key, 0), {c, hidden}) * 0.3;
    Array w2 = random::normal(random::fold_in(key, 1), {hidden, c}) * 0.3;
    return Variables{Tree::dict({{"w1", w1}, {"w2", w2}}), Tree()};
  };
  f.apply = [](const Variables& v, const Array& x, const ApplyOptions&) {
    Array h = relu(matmul(x, v.params["w1"].leaf()));
    return ApplyResult{x + matmul(h, v.params["w2"].leaf()), v.state};
  };
  if (say_output_type) f.output_type = [](const AbstractValue& input) { return input; };
  return custom_module(f);
}

TEST(CustomModule, ComposesInSequentialWithItsNamesKeysAndSummary) {
  Module model = Sequential({Dense(6), residual_mlp(4), Relu(), Dense(3)});
  Variables v = model.init(random::key(7), f32_type({1, 5}));
  std::vector<std::string> paths;
  for (const auto& [path, leaf] : v.params.leaves_with_paths()) paths.push_back(path);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"dense_0/bias", "dense_0/kernel", "dense_3/bias",
                                      "dense_3/kernel", "residual_mlp_1/w1", "residual_mlp_1/w2"}));
  // Child 1's key is fold_in(key, 1), as for kiln's own layers.
  Variables alone = residual_mlp(4).init(random::fold_in(random::key(7), 1), f32_type({1, 6}));
  EXPECT_TRUE(same_bits(v.params["residual_mlp_1"]["w1"].leaf(), alone.params["w1"].leaf()));

  Array x = normal_input(1, {2, 5});
  Array hidden = apply_dense(v.params["dense_0"], x);
  const Tree& block = v.params["residual_mlp_1"];
  Array expected = hidden + matmul(relu(matmul(hidden, block["w1"].leaf())), block["w2"].leaf());
  expected = apply_dense(v.params["dense_3"], relu(expected));
  EXPECT_TRUE(all_close(model.apply(v, x).y, expected));

  std::string summary = model.summary(f32_type({1, 5}));
  EXPECT_THAT(summary, HasSubstr("residual_mlp_1"));
  EXPECT_THAT(summary, HasSubstr("ResidualMlp(4)"));
  EXPECT_THAT(summary, HasSubstr("48"));  // 6 x 4 + 4 x 6
}

TEST(CustomModule, TransformsLikeABuiltInLayer) {
  for (bool say_output_type : {true, false}) {
    Module model = Sequential({residual_mlp(3, say_output_type), Dense(2)});
    EXPECT_EQ(model.output_type(f32_type({4, 5})).shape, Shape({4, 2}));
    Variables v = model.init(random::key(2), f32_type({1, 5}));
    Array x = normal_input(3, {4, 5});
    Array eager = model.apply(v, x).y;
    auto jitted = jit([&](const Tree& p, const Array& in) {
      return model.apply({p, v.state}, in).y;
    });
    EXPECT_TRUE(same_bits(jitted(v.params, x), eager));
    auto per_example = vmap([&](const Array& row) {
      return model.apply(v, reshape(row, {1, 5})).y;
    });
    EXPECT_TRUE(all_close(reshape(per_example(x), {4, 2}), eager));
  }
  // The gradient through the user's functions, against finite differences in f64.
  Module block = residual_mlp(3);
  Variables v = block.init(random::key(4), AbstractValue({1, 4}, DType::f64));
  Array x = astype(normal_input(5, {2, 4}), DType::f64);
  Tree params = tree_map([](const Array& p) { return astype(p, DType::f64); }, v.params);
  auto loss = [&](const Tree& p) { return sum(block.apply({p, Tree()}, x).y); };
  EXPECT_NO_THROW(check_grads(loss, std::tuple{params}));
}

TEST(CustomModule, AKeyOfItsOwnWhenItDrawsRandomNumbers) {
  ModuleFunctions noise;
  noise.name = "noise";
  noise.uses_key = true;
  noise.init = [](const Array&, const AbstractValue&) { return Variables{}; };
  noise.apply = [](const Variables& v, const Array& x, const ApplyOptions& options) {
    if (!options.train) return ApplyResult{x, v.state};
    return ApplyResult{x + random::normal(options.key, x.shape()), v.state};
  };
  Module model = Sequential({Dense(3), custom_module(noise), custom_module(noise)});
  Variables v = model.init(random::key(0), f32_type({1, 3}));
  Array x = normal_input(1, {2, 3});
  Array key = random::key(9);
  Array y = model.apply(v, x, {.train = true, .key = key}).y;
  Array dense = apply_dense(v.params["dense_0"], x);
  Array expected = dense + random::normal(random::fold_in(key, 1), {2, 3}) +
                   random::normal(random::fold_in(key, 2), {2, 3});
  EXPECT_TRUE(all_close(y, expected));
  EXPECT_TRUE(all_close(model.apply(v, x).y, dense));  // evaluation: no noise
}

TEST(CustomModule, ErrorsNameTheLayer) {
  ModuleFunctions f;
  f.name = "Bad Name";
  f.init = [](const Array&, const AbstractValue&) { return Variables{}; };
  f.apply = [](const Variables& v, const Array& x, const ApplyOptions&) {
    return ApplyResult{x, v.state};
  };
  EXPECT_TRUE(fails_with([&] { custom_module(f); }, {"'Bad Name'", "lower-case"}));
  f.name = "ok";
  f.apply = nullptr;
  EXPECT_TRUE(fails_with([&] { custom_module(f); }, {"'ok'", "apply is an empty function"}));

  // A shape error inside the user's apply names where the layer sits.
  Module model = Sequential({Dense(4), residual_mlp(3)});
  Variables v = model.init(random::key(0), f32_type({1, 2}));
  Variables wrong = v;
  wrong.params =
      Tree::dict({{"dense_0", v.params["dense_0"]},
                  {"residual_mlp_1", Tree::dict({{"w1", zeros({5, 3})}, {"w2", zeros({3, 4})}})}});
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(wrong, normal_input(0, {2, 2}));
      },
      {"residual_mlp_1: ResidualMlp(3): "}));
  ModuleFunctions empty_output = f;
  empty_output.apply = [](const Variables& v, const Array&, const ApplyOptions&) {
    return ApplyResult{Array(), v.state};
  };
  EXPECT_TRUE(fails_with([&] { custom_module(empty_output).apply({}, zeros({1})); },
                         {"ok: apply returned no output"}));
}

}  // namespace
}  // namespace kiln::nn
