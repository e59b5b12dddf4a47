// Tests of the containers: Sequential's parameter paths and counts for the MLP and
// CNN, child keys, state trees, nesting and Residual; the summary table; and that apply
// composes with jit (bit-identical to eager), grad (finite differences in f64) and vmap.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/jit.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "nn/module_testing.h"
#include "support/arrays.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::same_bits;
using ::kiln::testing::values;
using testing::all_close;
using ::testing::ElementsAre;
using testing::f32_type;
using ::testing::HasSubstr;
using testing::normal_input;

Module mlp() {
  return Sequential({Flatten(), Dense(512), Relu(), Dense(512), Relu(), Dense(10)});
}

Module cnn() {
  return Sequential({Conv2D(32, {3, 3}), Relu(), MaxPool({2, 2}), Conv2D(64, {3, 3}), Relu(),
                     MaxPool({2, 2}), Flatten(), Dense(128), Relu(), Dense(10)});
}

// "path f32[...]" for every leaf, in leaves_with_paths order.
std::vector<std::string> typed_paths(const Tree& tree) {
  std::vector<std::string> out;
  for (const auto& [path, leaf] : tree.leaves_with_paths()) {
    out.push_back(path + " " + leaf.aval().to_string());
  }
  return out;
}

TEST(ModuleSequential, MlpParamPathsAndCount) {
  Module model = mlp();
  AbstractValue input = f32_type({1, 28, 28, 1});
  Variables v = model.init(random::key(0), input);
  EXPECT_THAT(typed_paths(v.params),
              ElementsAre("dense_1/bias f32[512]", "dense_1/kernel f32[784,512]",
                          "dense_3/bias f32[512]", "dense_3/kernel f32[512,512]",
                          "dense_5/bias f32[10]", "dense_5/kernel f32[512,10]"));
  EXPECT_TRUE(v.state.is_none());
  EXPECT_EQ(parameter_count(v.params), 669706);
  EXPECT_EQ(model.output_type(f32_type({128, 28, 28, 1})).to_string(), "f32[128,10]");
  EXPECT_EQ(model.kind(), "sequential");
  Array logits = model.apply(v, normal_input(1, {4, 28, 28, 1})).y;
  EXPECT_EQ(logits.aval().to_string(), "f32[4,10]");
}

TEST(ModuleSequential, CnnParamPathsAndCount) {
  Module model = cnn();
  Variables v = model.init(random::key(0), f32_type({1, 28, 28, 1}));
  EXPECT_THAT(typed_paths(v.params),
              ElementsAre("conv2d_0/bias f32[32]", "conv2d_0/kernel f32[3,3,1,32]",
                          "conv2d_3/bias f32[64]", "conv2d_3/kernel f32[3,3,32,64]",
                          "dense_7/bias f32[128]", "dense_7/kernel f32[1600,128]",
                          "dense_9/bias f32[10]", "dense_9/kernel f32[128,10]"));
  EXPECT_EQ(parameter_count(v.params), 225034);
  EXPECT_EQ(model.output_type(f32_type({2, 28, 28, 1})).to_string(), "f32[2,10]");
}

TEST(ModuleSequential, ChildIKeyIsFoldInOfI) {
  Array key = random::key(11);
  Variables v = mlp().init(key, f32_type({1, 784}));
  Variables dense3 = Dense(512).init(random::fold_in(key, 3), f32_type({1, 512}));
  EXPECT_TRUE(same_bits(v.params["dense_3"]["kernel"].leaf(), dense3.params["kernel"].leaf()));
  Variables dense1 = Dense(512).init(random::fold_in(key, 1), f32_type({1, 784}));
  EXPECT_TRUE(same_bits(v.params["dense_1"]["kernel"].leaf(), dense1.params["kernel"].leaf()));
}

TEST(ModuleSequential, SummaryTable) {
  std::string table = cnn().summary(f32_type({1, 28, 28, 1}));
  EXPECT_THAT(table, HasSubstr("Sequential(10 layers) on f32[1,28,28,1]"));
  EXPECT_THAT(table, HasSubstr("path"));
  EXPECT_THAT(table, HasSubstr("conv2d_0    Conv2D(32, 3x3)  f32[1,26,26,32]"));
  EXPECT_THAT(table, HasSubstr("max_pool_5  MaxPool(2x2)"));
  EXPECT_THAT(table, HasSubstr("f32[1,1600]"));
  EXPECT_THAT(table, HasSubstr("204,928\n"));
  EXPECT_THAT(table, HasSubstr("total params: 225,034"));
  // One line per layer plus the title, header, rule and total.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 14);
  EXPECT_THAT(Dense(3).summary(f32_type({2, 4})), HasSubstr("dense  Dense(3)  f32[2,3]      15"));
}

TEST(ModuleSequential, StateTreesAndNesting) {
  Module model = Sequential({Dense(6), BatchNorm(), Relu(),
                             Sequential({Dense(6), LayerNorm(), BatchNorm(0.5)}), Dense(2)});
  Array x = normal_input(2, {5, 3});
  Variables v = model.init(random::key(1), x.aval());
  EXPECT_EQ(v.params.structure().to_string(),
            "{batch_norm_1: {bias: *, scale: *}, dense_0: {bias: *, kernel: *}, dense_4: {bias: "
            "*, kernel: *}, sequential_3: {batch_norm_2: {bias: *, scale: *}, dense_0: {bias: *, "
            "kernel: *}, layer_norm_1: {bias: *, scale: *}}}");
  EXPECT_EQ(v.state.structure().to_string(),
            "{batch_norm_1: {mean: *, var: *}, sequential_3: {batch_norm_2: {mean: *, var: *}}}");
  ApplyResult eval = model.apply(v, x);
  EXPECT_EQ(eval.y.aval().to_string(), "f32[5,2]");
  EXPECT_TRUE(
      same_bits(eval.state["batch_norm_1"]["var"].leaf(), v.state["batch_norm_1"]["var"].leaf()));
  ApplyResult train = model.apply(v, x, ApplyOptions{true, Array()});
  EXPECT_EQ(train.state.structure(), v.state.structure());
  EXPECT_FALSE(same_bits(train.state["sequential_3"]["batch_norm_2"]["mean"].leaf(),
                         v.state["sequential_3"]["batch_norm_2"]["mean"].leaf()));
  std::string table = model.summary(x.aval());
  EXPECT_THAT(table, HasSubstr("sequential_3/layer_norm_1"));
  EXPECT_THAT(table, HasSubstr("total params: " + std::to_string(parameter_count(v.params))));
}

TEST(ModuleSequential, ResidualAddsItsInput) {
  Module inner = Sequential({Dense(8), Relu(), Dense(4)});
  Module residual = Residual(inner);
  Array x = normal_input(3, {3, 4});
  Variables v = residual.init(random::key(2), x.aval());
  // Transparent: the inner module's variables, from the same key.
  EXPECT_EQ(v.params.structure(), inner.init(random::key(2), x.aval()).params.structure());
  EXPECT_TRUE(same_bits(v.params["dense_2"]["kernel"].leaf(),
                        inner.init(random::key(2), x.aval()).params["dense_2"]["kernel"].leaf()));
  Array y = residual.apply(v, x).y;
  EXPECT_TRUE(same_bits(y, x + inner.apply(v, x).y));
  EXPECT_EQ(residual.kind(), "residual");

  Module model = Sequential({Dense(4), Residual(Dense(4)), Residual(inner)});
  Variables mv = model.init(random::key(2), x.aval());
  EXPECT_EQ(mv.params.structure().to_string(),
            "{dense_0: {bias: *, kernel: *}, residual_1: {bias: *, kernel: *}, residual_2: "
            "{dense_0: {bias: *, kernel: *}, dense_2: {bias: *, kernel: *}}}");
  EXPECT_EQ(model.apply(mv, x).y.aval().to_string(), "f32[3,4]");
  EXPECT_THAT(model.summary(x.aval()), HasSubstr("residual_2/dense_2"));
}

TEST(ModuleSequential, JitApplyEqualsEagerBitForBit) {
  Module model = cnn();
  Array x = normal_input(4, {2, 28, 28, 1});
  Variables v = model.init(random::key(3), x.aval());
  auto forward = [&](const Tree& params, const Array& images) {
    return model.apply(Variables{params, Tree()}, images).y;
  };
  auto jitted = jit(forward);
  EXPECT_TRUE(same_bits(jitted(v.params, x), forward(v.params, x)));

  // With Dropout and BatchNorm in training, the key and the state as arguments.
  Module net = Sequential({Flatten(), Dense(32), BatchNorm(), Relu(), Dropout(0.5), Dense(10)});
  Variables nv = net.init(random::key(4), x.aval());
  auto train_forward = [&](const Tree& params, const Tree& state, const Array& images,
                           const Array& key) {
    ApplyResult r = net.apply(Variables{params, state}, images, ApplyOptions{true, key});
    return Tree::dict({{"y", r.y}, {"state", r.state}});
  };
  Array key = random::key(5);
  Tree eager = train_forward(nv.params, nv.state, x, key);
  Tree compiled = jit(train_forward)(nv.params, nv.state, x, key);
  std::vector<Array> a = eager.leaves(), b = compiled.leaves();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i], b[i])) << i;
}

TEST(ModuleSequential, GradThroughApplyMatchesFiniteDifferences) {
  Module model = Sequential({Dense(5), LayerNorm(), Activation("tanh"), Dense(3)});
  Array x = normal_input(5, {4, 3}, DType::f64);
  Variables v = model.init(random::key(6), x.aval());
  auto loss = [&](const Tree& params, const Array& inputs) {
    Array y = model.apply(Variables{params, Tree()}, inputs).y;
    return sum(y * y);
  };
  EXPECT_NO_THROW(check_grads(loss, std::tuple{v.params, x}));

  Module conv = Sequential(
      {Conv2D(2, {2, 2}), BatchNorm(), Activation("tanh"), AvgPool({2, 2}), Flatten(), Dense(2)});
  Array images = normal_input(7, {2, 5, 5, 1}, DType::f64);
  Variables cv = conv.init(random::key(7), images.aval());
  auto conv_loss = [&](const Tree& params, const Array& inputs) {
    Array y = conv.apply(Variables{params, cv.state}, inputs, ApplyOptions{true, Array()}).y;
    return sum(y * y);
  };
  EXPECT_NO_THROW(check_grads(conv_loss, std::tuple{cv.params, images}));
}

TEST(ModuleSequential, VmapOverExamplesEqualsTheBatchedApply) {
  Module model = Sequential({Dense(8), Relu(), Dense(3)});
  Array x = normal_input(8, {6, 4});
  Variables v = model.init(random::key(8), x.aval());
  auto one = [&](const Tree& params, const Array& example) {
    return model.apply(Variables{params, Tree()}, example).y;
  };
  Array per_example = vmap(one, {kNotMapped, 0})(v.params, x);
  EXPECT_TRUE(all_close(per_example, model.apply(v, x).y));
}

}  // namespace
}  // namespace kiln::nn
