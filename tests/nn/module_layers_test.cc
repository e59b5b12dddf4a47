// Tests of the single layers: Dense, Conv2D, MaxPool, AvgPool, Flatten and Embedding. Values
// are checked against plain loops written here, output types against both output_type and
// what apply returns, and parameters against the documented key rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "nn/module_testing.h"
#include "support/arrays.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::same_bits;
using ::kiln::testing::values;
using testing::all_close;
using testing::f32_type;
using testing::normal_input;

// init on x's type and apply to x; checks that output_type agrees with apply.
Array init_and_apply(const Module& layer, const Array& x, Variables* out = nullptr) {
  Variables v = layer.init(random::key(7), x.aval());
  Array y = layer.apply(v, x).y;
  EXPECT_EQ(layer.output_type(x.aval()), y.aval()) << layer.kind();
  if (out != nullptr) *out = v;
  return y;
}

TEST(ModuleLayers, DenseMatchesLoop) {
  Array x = normal_input(1, {3, 4});
  Module dense = Dense(5, DenseOptions{true, lecun_normal(), normal_init(1.0)});
  Variables v;
  Array y = init_and_apply(dense, x, &v);
  EXPECT_EQ(y.aval().to_string(), "f32[3,5]");
  EXPECT_EQ(v.params.to_string(), "{bias: f32[5], kernel: f32[4,5]}");
  EXPECT_TRUE(v.state.is_none());
  std::vector<double> xs = values(x), k = values(v.params["kernel"].leaf()),
                      b = values(v.params["bias"].leaf());
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) {
      double acc = b[j];
      for (int c = 0; c < 4; ++c) acc += xs[i * 4 + c] * k[c * 5 + j];
      expected.push_back(acc);
    }
  }
  EXPECT_TRUE(all_close(y, expected));
}

TEST(ModuleLayers, DenseOverTheLastAxisOfAnyRank) {
  Array x = normal_input(2, {2, 3, 4});
  Module dense = Dense(6, DenseOptions{false, lecun_normal(), zeros_init()});
  Variables v;
  Array y = init_and_apply(dense, x, &v);
  EXPECT_EQ(y.aval().to_string(), "f32[2,3,6]");
  EXPECT_EQ(v.params.to_string(), "{kernel: f32[4,6]}");
  EXPECT_TRUE(
      all_close(y, matmul(reshape(x, {6, 4}), v.params["kernel"].leaf()).reshape({2, 3, 6})));
  // Parameters follow the input's floating type.
  Variables v64 = dense.init(random::key(0), AbstractValue({1, 4}, DType::f64));
  EXPECT_EQ(v64.params["kernel"].leaf().dtype(), DType::f64);
}

TEST(ModuleLayers, ParamsFollowTheKeyRule) {
  // Parameter j of a layer is drawn with fold_in(layer_key, j): kernel 0, bias 1.
  Array key = random::key(3);
  Module dense = Dense(4, DenseOptions{true, lecun_normal(), normal_init(1.0)});
  Variables v = dense.init(key, f32_type({1, 3}));
  EXPECT_TRUE(same_bits(v.params["kernel"].leaf(),
                        lecun_normal()(random::fold_in(key, 0), {3, 4}, DType::f32)));
  EXPECT_TRUE(same_bits(v.params["bias"].leaf(),
                        normal_init(1.0)(random::fold_in(key, 1), {4}, DType::f32)));
  // Same key, same params; another key, other params.
  EXPECT_TRUE(same_bits(dense.init(key, f32_type({1, 3})).params["kernel"].leaf(),
                        v.params["kernel"].leaf()));
  EXPECT_FALSE(same_bits(dense.init(random::key(4), f32_type({1, 3})).params["kernel"].leaf(),
                         v.params["kernel"].leaf()));
}

// Direct convolution with explicit low padding; out-of-range cells read as zero.
std::vector<double> conv_loop(const Array& x, const Array& w, const Shape& out, Dims strides,
                              Dims dilation, Dims pad_low) {
  std::vector<double> xs = values(x), ws = values(w), ys;
  int64_t H = x.dim(1), W = x.dim(2), C = x.dim(3);
  int64_t KH = w.dim(0), KW = w.dim(1), F = w.dim(3);
  for (int64_t n = 0; n < out[0]; ++n)
    for (int64_t oh = 0; oh < out[1]; ++oh)
      for (int64_t ow = 0; ow < out[2]; ++ow)
        for (int64_t f = 0; f < F; ++f) {
          double acc = 0;
          for (int64_t i = 0; i < KH; ++i)
            for (int64_t j = 0; j < KW; ++j) {
              int64_t h = oh * strides[0] + i * dilation[0] - pad_low[0];
              int64_t c = ow * strides[1] + j * dilation[1] - pad_low[1];
              if (h < 0 || h >= H || c < 0 || c >= W) continue;
              for (int64_t ci = 0; ci < C; ++ci) {
                acc += xs[((n * H + h) * W + c) * C + ci] * ws[((i * KW + j) * C + ci) * F + f];
              }
            }
          ys.push_back(acc);
        }
  return ys;
}

TEST(ModuleLayers, Conv2DMatchesLoop) {
  Array x = normal_input(4, {2, 5, 6, 3});
  Module conv = Conv2D(4, {3, 2});
  Variables v;
  Array y = init_and_apply(conv, x, &v);
  EXPECT_EQ(y.aval().to_string(), "f32[2,3,5,4]");
  EXPECT_EQ(v.params.to_string(), "{bias: f32[4], kernel: f32[3,2,3,4]}");
  EXPECT_TRUE(
      all_close(y, conv_loop(x, v.params["kernel"].leaf(), y.shape(), {1, 1}, {1, 1}, {0, 0})));
}

TEST(ModuleLayers, Conv2DStridesDilationAndSamePadding) {
  Array x = normal_input(5, {1, 7, 6, 2});
  // Strided and dilated, VALID: spans 5x3, (7-5)/2+1 = 2 rows, (6-3)/1+1 = 4 columns.
  Module strided =
      Conv2D(3, {3, 2},
             Conv2DOptions{{2, 1}, Padding::kValid, {2, 2}, false, lecun_normal(), zeros_init()});
  Variables v;
  Array y = init_and_apply(strided, x, &v);
  EXPECT_EQ(y.aval().to_string(), "f32[1,2,4,3]");
  EXPECT_EQ(v.params.to_string(), "{kernel: f32[3,2,2,3]}");
  EXPECT_TRUE(
      all_close(y, conv_loop(x, v.params["kernel"].leaf(), y.shape(), {2, 1}, {2, 2}, {0, 0})));
  // SAME with stride 2: ceil(7/2) = 4 and ceil(6/2) = 3; padding split smaller half first.
  Module same =
      Conv2D(2, {3, 3},
             Conv2DOptions{{2, 2}, Padding::kSame, {1, 1}, true, lecun_normal(), normal_init(1.0)});
  y = init_and_apply(same, x, &v);
  EXPECT_EQ(y.aval().to_string(), "f32[1,4,3,2]");
  std::vector<double> expected =
      conv_loop(x, v.params["kernel"].leaf(), y.shape(), {2, 2}, {1, 1}, {1, 0});
  std::vector<double> bias = values(v.params["bias"].leaf());
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += bias[i % 2];
  EXPECT_TRUE(all_close(y, expected));
}

TEST(ModuleLayers, Pools) {
  Array x = arange(16, DType::f32).reshape({1, 4, 4, 1});
  Array y = init_and_apply(MaxPool({2, 2}), x);
  EXPECT_EQ(y.aval().to_string(), "f32[1,2,2,1]");
  EXPECT_EQ(values(y), (std::vector<double>{5, 7, 13, 15}));
  y = init_and_apply(AvgPool({2, 2}), x);
  EXPECT_EQ(values(y), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  // Explicit strides, and SAME padding (averages count only cells inside the input).
  y = init_and_apply(AvgPool({2, 2}, {1, 2}), x);
  EXPECT_EQ(y.aval().to_string(), "f32[1,3,2,1]");
  EXPECT_EQ(values(y), (std::vector<double>{2.5, 4.5, 6.5, 8.5, 10.5, 12.5}));
  Array odd = arange(9, DType::f32).reshape({1, 3, 3, 1});
  y = init_and_apply(MaxPool({2, 2}, {}, Padding::kSame), odd);
  EXPECT_EQ(y.aval().to_string(), "f32[1,2,2,1]");
  EXPECT_EQ(values(y), (std::vector<double>{4, 5, 7, 8}));
  y = init_and_apply(AvgPool({2, 2}, {}, Padding::kSame), odd);
  EXPECT_EQ(values(y), (std::vector<double>{2, 3.5, 6.5, 8}));
  EXPECT_TRUE(MaxPool({2, 2}).init(random::key(0), odd.aval()).params.is_none());
}

TEST(ModuleLayers, Flatten) {
  Array x = normal_input(6, {2, 3, 4, 5});
  Array y = init_and_apply(Flatten(), x);
  EXPECT_EQ(y.aval().to_string(), "f32[2,60]");
  EXPECT_TRUE(same_bits(y, reshape(x, {2, 60})));
  EXPECT_EQ(Flatten().output_type(f32_type({7})).to_string(), "f32[7,1]");
}

TEST(ModuleLayers, EmbeddingLooksUpRows) {
  Module embed = Embedding(10, 3);
  Array ids = from_host<int32_t>({1, 0, 9, 4, 4, 2}, {2, 3});
  Variables v;
  Array y = init_and_apply(embed, ids, &v);
  EXPECT_EQ(y.aval().to_string(), "f32[2,3,3]");
  EXPECT_EQ(v.params.to_string(), "{embedding: f32[10,3]}");
  std::vector<double> table = values(v.params["embedding"].leaf()), expected;
  for (int id : {1, 0, 9, 4, 4, 2}) {
    for (int f = 0; f < 3; ++f) expected.push_back(table[id * 3 + f]);
  }
  EXPECT_EQ(values(y), expected);
}

TEST(ModuleLayers, ActivationLayers) {
  Array x = from_host<float>({-2, -0.5, 0, 1.5}, {2, 2});
  Array y = init_and_apply(Relu(), x);
  EXPECT_EQ(values(y), (std::vector<double>{0, 0, 0, 1.5}));
  EXPECT_EQ(Relu().kind(), "relu");
  Module gelu = Activation("gelu");
  EXPECT_EQ(gelu.kind(), "gelu");
  EXPECT_TRUE(same_bits(init_and_apply(gelu, x), nn::gelu(x)));
  EXPECT_TRUE(gelu.init(random::key(0), x.aval()).params.is_none());
}

TEST(ModuleLayers, ShapePreservingLayersKeepTheType) {
  Array x = normal_input(8, {4, 3, 6});
  for (const Module& layer : {BatchNorm(), LayerNorm(), RMSNorm(), Dropout(0.5), Residual(Dense(6)),
                              Activation("silu")}) {
    Variables v = layer.init(random::key(1), x.aval());
    Array y = layer.apply(v, x, ApplyOptions{true, random::key(2)}).y;
    EXPECT_EQ(y.aval(), x.aval()) << layer.kind();
    EXPECT_EQ(layer.output_type(x.aval()), x.aval()) << layer.kind();
  }
}

}  // namespace
}  // namespace kiln::nn
