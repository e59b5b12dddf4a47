// Megatron-style tensor-parallel Dense layers (DenseOptions::parallel) inside shard_map,
// against the same model applied to whole params on one device: the loss, and the
// gradient of every param (blocks of the split ones), within f32 rounding (the row-split
// layer adds its partial products in another order than one matmul does). The ctest entry
// gives this binary 4 logical devices.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/grad.h"
#include "kiln/sharding.h"
#include "kiln/tree.h"
#include "nn/module_testing.h"

namespace kiln::nn::testing {
namespace {

Module column(int64_t features) {
  return Dense(features, DenseOptions{.parallel = TensorParallel::kColumn});
}
Module row(int64_t features) {
  return Dense(features, DenseOptions{.parallel = TensorParallel::kRow});
}

// Where a param lives on the `model` axis: a column-split layer's kernel by columns and its
// bias, a row-split layer's kernel by rows; everything else replicated.
PartitionSpec spec_of(const std::string& path, const std::vector<std::string>& columns,
                      const std::vector<std::string>& rows) {
  for (const std::string& layer : columns) {
    if (path == layer + "/kernel") return PartitionSpec{{}, {"model"}};
    if (path == layer + "/bias") return PartitionSpec{{"model"}};
  }
  for (const std::string& layer : rows) {
    if (path == layer + "/kernel") return PartitionSpec{{"model"}, {}};
  }
  return PartitionSpec{};
}

bool replicated(const PartitionSpec& spec) {
  return std::all_of(spec.dims.begin(), spec.dims.end(),
                     [](const std::vector<std::string>& axes) { return axes.empty(); });
}

struct LossAndGrads {
  Array loss;
  std::vector<Array> grads;  // in the order of the params' leaves
};

Array loss_of(const Module& model, const Tree& params, const Array& x) {
  Array y = model.apply(Variables{params, Tree()}, x).y;
  return sum(y * y) + sum(tanh(y));
}

LossAndGrads whole(const Module& model, const Tree& params, const Array& x) {
  auto [loss, grads] = value_and_grad([&](const Tree& p) { return loss_of(model, p, x); })(params);
  return {loss, grads.leaves()};
}

// The loss and gradients with the layers split over a mesh of `devices` on axis `model`:
// each device differentiates its copy of the loss divided by the axis size, and the
// gradients of replicated params are psummed over the axis (DenseOptions::parallel).
LossAndGrads split(const Module& model, const Tree& params, const Array& x, int64_t devices,
                   const std::vector<std::string>& columns, const std::vector<std::string>& rows) {
  TreeDef def = params.structure();
  std::vector<PartitionSpec> specs;
  for (const auto& [path, leaf] : params.leaves_with_paths()) {
    specs.push_back(spec_of(path, columns, rows));
  }
  const auto n = static_cast<double>(devices);
  SpmdFunction body = [&](const std::vector<Array>& in) {
    Tree p = unflatten(def, std::span(in).subspan(0, in.size() - 1));
    auto [loss, grads] =
        value_and_grad([&](const Tree& q) { return loss_of(model, q, in.back()) / n; })(p);
    std::vector<Array> out = {loss * n};
    std::vector<Array> leaves = grads.leaves();
    for (size_t i = 0; i < leaves.size(); ++i) {
      out.push_back(replicated(specs[i]) ? psum(leaves[i], "model") : leaves[i]);
    }
    return out;
  };
  std::vector<Array> args = params.leaves();
  args.push_back(x);
  std::vector<PartitionSpec> in_specs = specs;
  in_specs.push_back(PartitionSpec{});
  std::vector<PartitionSpec> out_specs = {PartitionSpec{}};
  out_specs.insert(out_specs.end(), specs.begin(), specs.end());
  std::vector<Array> out = shard_map(body, Mesh({{"model", devices}}), in_specs, out_specs)(args);
  return {out[0], std::vector<Array>(out.begin() + 1, out.end())};
}

void expect_same(const LossAndGrads& actual, const LossAndGrads& expected, const Tree& params) {
  EXPECT_TRUE(all_close(actual.loss, kiln::testing::values(expected.loss), 1e-5, 1e-5));
  std::vector<std::pair<std::string, Array>> named = params.leaves_with_paths();
  ASSERT_EQ(actual.grads.size(), expected.grads.size());
  for (size_t i = 0; i < actual.grads.size(); ++i) {
    EXPECT_EQ(actual.grads[i].shape(), expected.grads[i].shape()) << named[i].first;
    EXPECT_TRUE(all_close(actual.grads[i], kiln::testing::values(expected.grads[i]), 1e-4, 1e-5))
        << named[i].first;
  }
}

TEST(TensorParallelDense, AColumnThenARowSplitPairGivesTheWholeModelsLossAndGradients) {
  // dense_0 column, dense_2 row, dense_3 replicated after them.
  Module model = Sequential({column(8), Relu(), row(6), Dense(3)});
  Variables v = model.init(random::key(1), f32_type({4, 5}));
  Array x = normal_input(2, {4, 5});
  LossAndGrads expected = whole(model, v.params, x);
  for (int64_t devices : {1, 2, 4}) {
    SCOPED_TRACE(devices);
    expect_same(split(model, v.params, x, devices, {"dense_0"}, {"dense_2"}), expected, v.params);
  }
}

TEST(TensorParallelDense, AReplicatedLayerBeforeTheSplitOnesGetsEveryDevicesShareOfItsGradient) {
  // dense_0's output feeds the column-split layer on every device, each with its block of
  // the kernel: its gradient is the sum of the devices' partial ones.
  Module model = Sequential({Dense(5), Activation("tanh"), column(8), Activation("gelu"), row(4)});
  Variables v = model.init(random::key(3), f32_type({6, 3}));
  Array x = normal_input(4, {6, 3});
  LossAndGrads expected = whole(model, v.params, x);
  for (int64_t devices : {2, 4}) {
    SCOPED_TRACE(devices);
    expect_same(split(model, v.params, x, devices, {"dense_2"}, {"dense_4"}), expected, v.params);
  }
}

TEST(TensorParallelDense, OutsideShardMapItIsAnOrdinaryDense) {
  Module plain = Sequential({Dense(8), Relu(), Dense(6)});
  Module split_model = Sequential({column(8), Relu(), row(6)});
  Variables v = plain.init(random::key(5), f32_type({3, 4}));
  Variables w = split_model.init(random::key(5), f32_type({3, 4}));
  Array x = normal_input(6, {3, 4});
  EXPECT_EQ(kiln::testing::values(plain.apply(v, x).y),
            kiln::testing::values(split_model.apply(w, x).y));
  EXPECT_NE(split_model.summary(f32_type({3, 4})).find("column-split over model"),
            std::string::npos);
}

TEST(TensorParallelDense, FeaturesThatDoNotSplitOverTheAxisAreAnErrorNamingTheLayer) {
  Module model = Sequential({column(7), Relu(), row(6)});
  Variables v = model.init(random::key(7), f32_type({2, 4}));
  Array x = normal_input(8, {2, 4});
  // Every param replicated, so that shard_map has nothing to refuse and the layer sees
  // its whole kernel on a mesh axis of 2.
  try {
    split(model, v.params, x, 2, {}, {});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("dense_0: Dense(7, column-split over model): 7 "
                        "features do not split evenly over the 2 devices"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace kiln::nn::testing
