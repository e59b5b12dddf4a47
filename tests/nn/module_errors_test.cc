// The errors modules raise for inputs and parameters that do not fit: each names the layer's
// path, the layer, and both what it expected and what it got, at init (through
// output_type) and at apply (against the params given); plus bad layer configurations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "nn/module_testing.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::error_of;
using ::kiln::testing::fails_with;
using testing::f32_type;
using ::testing::HasSubstr;
using testing::normal_input;

Array key0() {
  return random::key(0);
}

TEST(ModuleErrors, DenseFedTheWrongSizeNamesBothSizesAndThePath) {
  Module model = Sequential({Flatten(), Dense(512), Relu(), Dense(10)});
  Variables v = model.init(key0(), f32_type({1, 784}));
  // dense_3's kernel made for 256 inputs, fed the 512 of dense_1.
  Tree small = Dense(10).init(key0(), f32_type({1, 256})).params;
  Variables wrong{v.params.with("dense_3", small), Tree()};
  Array x = normal_input(1, {128, 784});
  EXPECT_TRUE(fails_with([&] { model.apply(wrong, x); },
                         {"dense_3: Dense(10) expects inputs whose last axis is 256, got "
                          "f32[128,512]",
                          "HINT"}));
  // At the root, without a path.
  std::string message = error_of([&] { Dense(10).apply(Variables{small, Tree()}, x); });
  EXPECT_THAT(message,
              HasSubstr("Dense(10) expects inputs whose last axis is 256, got f32[128,784]"));
  // The error points at this file, where apply was called.
  EXPECT_THAT(message, HasSubstr("module_errors_test.cc"));
}

TEST(ModuleErrors, ParamsWithTheWrongShapeOrKeys) {
  Module model = Sequential({Flatten(), Dense(512)});
  Variables v = model.init(key0(), f32_type({1, 28, 28}));
  Array x = normal_input(2, {2, 28, 28});
  Tree bad_kernel = Tree::dict({{"kernel", zeros({784, 256})}, {"bias", zeros({512})}});
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(Variables{Tree::dict({{"dense_1", bad_kernel}}), Tree()}, x);
      },
      {"dense_1/kernel: expected f32[784,512], got f32[784,256]"}));
  Tree bad_bias = Tree::dict({{"kernel", zeros({784, 512})}, {"bias", zeros({10})}});
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(Variables{Tree::dict({{"dense_1", bad_bias}}), Tree()}, x);
      },
      {"dense_1/bias: expected f32[512], got f32[10]"}));
  Tree no_bias = Tree::dict({{"kernel", zeros({784, 512})}});
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(Variables{Tree::dict({{"dense_1", no_bias}}), Tree()}, x);
      },
      {"dense_1: Dense(512) expects params {bias, kernel}, got a dict with keys "
       "{kernel}"}));
  // A layer's params missing altogether, and an entry for a layer that does not exist.
  EXPECT_TRUE(fails_with([&] { model.apply(Variables{}, x); },
                         {"dense_1: Dense(512) expects params {bias, kernel}, got none"}));
  Tree extra = v.params.with("dense_9", no_bias);
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(Variables{extra, Tree()}, x);
      },
      {"has no layer named 'dense_9'", "flatten_0, dense_1"}));
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(Variables{Tree(zeros({3})), Tree()}, x);
      },
      {"expects params as a dict keyed by its layers' names"}));
  // Params given to a layer that has none.
  EXPECT_TRUE(fails_with([&] { Flatten().apply(v, x); }, {"Flatten has no params, got a dict"}));
}

TEST(ModuleErrors, ConvAndPoolInputs) {
  Module model = Sequential({Conv2D(32, {3, 3}), Relu(), MaxPool({2, 2})});
  EXPECT_TRUE(fails_with(
      [&] {
        model.init(key0(), f32_type({1, 784}));
      },
      {"conv2d_0: Conv2D(32, 3x3) expects NHWC inputs of rank 4", "f32[1,784]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        model.output_type(f32_type({1, 28, 28}));
      },
      {"conv2d_0", "got f32[1,28,28]", "HINT: add the channel axis"}));
  EXPECT_TRUE(fails_with(
      [&] {
        model.init(key0(), f32_type({1, 2, 5, 1}));
      },
      {"conv2d_0: Conv2D(32, 3x3) needs inputs of at least 3x3", "f32[1,2,5,1]"}));
  // Pools shrink the input until the window no longer fits.
  Module pools = Sequential({MaxPool({2, 2}), MaxPool({2, 2}), AvgPool({2, 2})});
  EXPECT_TRUE(fails_with(
      [&] {
        pools.init(key0(), f32_type({1, 4, 4, 1}));
      },
      {"avg_pool_2: AvgPool(2x2): the 2x2 window is larger than the 1x1", "f32[1,1,1,1]"}));
  // Channels differ from the kernel's.
  Variables v = model.init(key0(), f32_type({1, 8, 8, 3}));
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(v, normal_input(3, {1, 8, 8, 1}));
      },
      {"conv2d_0: Conv2D(32, 3x3) expects inputs with 3 channels", "got f32[1,8,8,1]"}));
}

TEST(ModuleErrors, InputTypes) {
  EXPECT_TRUE(fails_with(
      [&] {
        Dense(4).init(key0(), AbstractValue({2, 3}, DType::i32));
      },
      {"Dense(4) expects floating-point inputs, got i32[2,3]"}));
  EXPECT_TRUE(fails_with([&] { Dense(4).init(key0(), f32_type({})); },
                         {"Dense(4) expects inputs of rank >= 1, got f32[]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        Embedding(10, 4).output_type(f32_type({2, 3}));
      },
      {"Embedding(10, 4) expects integer indices, got f32[2,3]"}));
  EXPECT_TRUE(fails_with([&] { Flatten().output_type(f32_type({})); },
                         {"Flatten expects inputs with a batch axis, got f32[]"}));
}

TEST(ModuleErrors, ResidualWhoseInnerChangesTheType) {
  Module model = Sequential({Dense(16), Residual(Sequential({Dense(8), Relu()}))});
  EXPECT_TRUE(fails_with(
      [&] {
        model.init(key0(), f32_type({4, 3}));
      },
      {"residual_1: Residual needs its inner module to keep the input type "
       "f32[4,16], but Sequential(2 layers) gives f32[4,8]"}));
}

TEST(ModuleErrors, BatchNormStateAndBatchSize) {
  Module model = Sequential({Dense(4), BatchNorm()});
  Array x = normal_input(4, {3, 2});
  Variables v = model.init(key0(), x.aval());
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(Variables{v.params, Tree()}, x);
      },
      {"batch_norm_1: BatchNorm(momentum 0.9, eps 1e-05) expects state "
       "{mean, var}, got none"}));
  Tree short_state =
      v.state.with("batch_norm_1", Tree::dict({{"mean", zeros({3})}, {"var", ones({4})}}));
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(Variables{v.params, short_state}, x);
      },
      {"batch_norm_1/mean: expected f32[4], got f32[3]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        model.apply(v, normal_input(5, {1, 2}), ApplyOptions{true, Array()});
      },
      {"batch_norm_1", "needs more than one value per feature", "f32[1,4]"}));
  EXPECT_NO_THROW(model.apply(v, normal_input(5, {1, 2})));
}

// Constructor errors name the line that built the layer (the test's own lines here).
TEST(ModuleErrors, BadConfigurations) {
  EXPECT_TRUE(fails_with([] { Dense(0); },
                         {"Dense: features must be positive, got 0", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with([] { Conv2D(8, {3}); }, {"Conv2D: kernel_size must be two positive sizes",
                                                  "got [3]", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with(
      [] {
        Conv2D(8, {3, 3},
               Conv2DOptions{{0, 1}, Padding::kValid, {1, 1}, true, lecun_normal(), zeros_init()});
      },
      {"Conv2D: strides must be two positive sizes", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with(
      [] {
        MaxPool({2, 2, 2});
      },
      {"MaxPool: window must be two positive", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with(
      [] {
        AvgPool({2, 2}, {0, 1});
      },
      {"AvgPool: strides", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with([] { BatchNorm(1.5); }, {"BatchNorm: momentum must be in [0, 1], got 1.5",
                                                  "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with(
      [] {
        LayerNorm(NormOptions{0, true, true});
      },
      {"LayerNorm: epsilon must be positive, got 0", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with([] { Embedding(0, 3); },
                         {"Embedding: num_embeddings and features", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with([] { Activation("rleu"); }, {"rleu", "relu", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with(
      [] {
        Dense(3, DenseOptions{true, Initializer(), zeros_init()});
      },
      {"Dense: kernel_init is an empty Initializer", "module_errors_test.cc"}));
  EXPECT_TRUE(fails_with(
      [] {
        Module m = Dense(3);
        m.init(Array(), f32_type({1, 2}));
      },
      {"dense.init: the key is an empty Array", "module_errors_test.cc"}));
}

}  // namespace
}  // namespace kiln::nn
