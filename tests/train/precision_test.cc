// Mixed precision (train/precision.h, docs/precision.md): with model.compute_dtype = "bf16"
// the layers compute in bf16 while the params, the optimizer and the loss stay f32, on one
// device and in the chunked step; the policy is recorded in run.json.
#include "train/precision.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/safetensors.h"
#include "support/errors.h"
#include "train/config.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using run_test::quiet;
using run_test::read_json;

TEST(ApplyIn, ComputesInTheDtypeAndHandsBackF32AndTheStatesOwnDtypes) {
  nn::Module model = nn::Sequential({nn::Dense(8), nn::BatchNorm(), nn::Relu(), nn::Dense(3)});
  Array x = random::normal(random::key(1), {4, 5});
  nn::Variables variables = model.init(random::key(2), x.aval());
  nn::ApplyOptions train;
  train.train = true;
  nn::ApplyResult low = apply_in(DType::bf16, model, variables, x, train);
  nn::ApplyResult full = apply_in(DType::f32, model, variables, x, train);
  EXPECT_EQ(low.y.dtype(), DType::f32);
  for (const Array& leaf : low.state.leaves()) EXPECT_EQ(leaf.dtype(), DType::f32);
  // bf16 arithmetic: close to the f32 result (8 bits of mantissa), not equal to it.
  std::vector<float> a = low.y.to_vector<float>(), b = full.y.to_vector<float>();
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 0.05 * (1 + std::abs(b[i])));
    differs = differs || a[i] != b[i];
  }
  EXPECT_TRUE(differs) << "the bf16 policy computed in f32";
  // The gradient reaches the f32 params through the casts.
  auto loss = [&](const Tree& params) {
    return sum(apply_in(DType::bf16, model, {params, variables.state}, x).y);
  };
  Tree grads = grad(loss)(variables.params);
  for (const Array& leaf : grads.leaves()) EXPECT_EQ(leaf.dtype(), DType::f32);
  EXPECT_GT(sum(abs(grads["dense_0"]["kernel"].leaf())).item<float>(), 0);
}

TEST(MixedPrecisionTraining, Bf16ComputeTrainsF32ParamsAndIsRecorded) {
  fs::path runs = run_test::fresh_dir("precision", "bf16");
  std::vector<std::string> base = {"data.train_limit=1024", "data.test_limit=500",
                                   "train.epochs=1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> all = base;
    all.insert(all.end(), extra.begin(), extra.end());
    return run_test::mlp_example(runs, all);
  };
  TrainSummary f32 = train(with({}), quiet());
  TrainSummary bf16 = train(with({"model.compute_dtype=\"bf16\""}), quiet());
  // Another computation, the same learning: both learn (well above 10% chance), near each
  // other.
  EXPECT_NE(bf16.params_sha256, f32.params_sha256);
  EXPECT_GT(bf16.test_accuracy, 0.5);
  EXPECT_NEAR(bf16.test_accuracy, f32.test_accuracy, 0.05);
  for (const auto& [name, leaf] : load_safetensors(bf16.run_dir / "params.safetensors").arrays) {
    EXPECT_EQ(leaf.dtype(), DType::f32) << name;
  }
  nlohmann::json info = read_json(bf16.run_dir / "run.json");
  EXPECT_EQ(info["precision"]["compute"], "bf16");
  EXPECT_EQ(info["precision"]["params"], "f32");
  // The chunked step (a mesh of one device) computes in bf16 too.
  TrainSummary chunked =
      train(with({"model.compute_dtype=\"bf16\"", "mesh.data=1", "mesh.chunks=2"}), quiet());
  TrainSummary chunked_f32 = train(with({"mesh.data=1", "mesh.chunks=2"}), quiet());
  EXPECT_NE(chunked.params_sha256, chunked_f32.params_sha256);
  EXPECT_NEAR(chunked.test_accuracy, chunked_f32.test_accuracy, 0.05);
  // Accumulation in bf16 and in f16 with its loss scaling: K micro-batches are the batch of
  // K x batch_size rows in K chunks, bit for bit, as in f32.
  for (const char* dtype : {"bf16", "f16"}) {
    std::string policy = fmt::format("model.compute_dtype=\"{}\"", dtype);
    TrainSummary micro =
        train(with({policy, "train.batch_size=32", "train.accumulate=4"}), quiet());
    TrainSummary whole = train(with({policy, "mesh.data=1", "mesh.chunks=4"}), quiet());
    EXPECT_EQ(micro.params_sha256, whole.params_sha256) << dtype;
    EXPECT_GT(micro.test_accuracy, 0.5) << dtype;
  }
  // f16 only with loss scaling (loss_scale_test.cc trains it).
  EXPECT_TRUE(kiln::testing::fails_with(
      [&] {
        with({"model.compute_dtype=\"f16\"", "train.loss_scale=\"none\""});
      },
      {"model.compute_dtype = \"f16\" with train.loss_scale = \"none\"", "\"dynamic\""}));
  fs::remove_all(runs);
}

}  // namespace
}  // namespace kiln::train

namespace kiln::train {
namespace {

// A model whose layers say their own dtypes: `dtypes[i]` for layer i ("" for the model's).
TrainConfig per_layer(const fs::path& runs, const std::string& model_dtype,
                      const std::vector<std::string>& dtypes) {
  std::vector<std::string> types = {"flatten", "dense", "layer_norm", "relu", "dense"};
  std::string text = fmt::format(
      "[experiment]\nname = \"policy\"\nruns_dir = \"{}\"\n[data]\ndataset = "
      "\"fashion_mnist\"\ndir = \"/usr/share/datasets/fashion-mnist\"\ntrain_limit = 1024\n"
      "test_limit = 500\n[model]\ncompute_dtype = \"{}\"\n",
      runs.string(), model_dtype);
  for (size_t i = 0; i < types.size(); ++i) {
    text += fmt::format("[[model.layers]]\ntype = \"{}\"\n", types[i]);
    if (types[i] == "dense") text += fmt::format("features = {}\n", i == 1 ? 64 : 10);
    if (!dtypes[i].empty()) text += fmt::format("compute_dtype = \"{}\"\n", dtypes[i]);
  }
  text += "[train]\nepochs = 1\n";
  return parse_config(text, "policy.toml");
}

TEST(PrecisionPolicy, EveryLayerInBf16IsTheModelInBf16BitForBit) {
  fs::path runs = run_test::fresh_dir("precision", "per_layer");
  TrainSummary model_wide = train(per_layer(runs, "bf16", {"", "", "", "", ""}), quiet());
  TrainSummary layer_by_layer =
      train(per_layer(runs, "f32", {"bf16", "bf16", "bf16", "bf16", "bf16"}), quiet());
  EXPECT_EQ(layer_by_layer.params_sha256, model_wide.params_sha256);
  // A layer norm kept in f32 inside the bf16 model is another computation, recorded.
  TrainSummary norm_f32 = train(per_layer(runs, "bf16", {"", "", "f32", "", ""}), quiet());
  EXPECT_NE(norm_f32.params_sha256, model_wide.params_sha256);
  TrainSummary all_f32 = train(per_layer(runs, "f32", {"", "", "", "", ""}), quiet());
  EXPECT_NE(norm_f32.params_sha256, all_f32.params_sha256);
  EXPECT_GT(norm_f32.test_accuracy, 0.5);
  nlohmann::json precision = read_json(norm_f32.run_dir / "run.json")["precision"];
  EXPECT_EQ(precision["compute"], "bf16");
  EXPECT_EQ(precision["layers"]["layer_norm_2"], "f32");
  // config.toml writes the field where it is set, and only there.
  std::string text = run_test::read_text(norm_f32.run_dir / "config.toml");
  EXPECT_EQ(text.find("compute_dtype = \"f32\""), text.rfind("compute_dtype = \"f32\""));
  EXPECT_NE(text.find("type = \"layer_norm\"\ncompute_dtype = \"f32\""), std::string::npos) << text;
}

TEST(PrecisionPolicy, AnF16LayerScalesTheLossAndBadDtypesAreRefused) {
  fs::path runs = run_test::fresh_dir("precision", "per_layer_errors");
  TrainConfig f16_layer = per_layer(runs, "f32", {"", "f16", "", "", ""});
  EXPECT_EQ(resolved_loss_scale(f16_layer), "dynamic");
  TrainConfig no_scaling = f16_layer;
  no_scaling.train.loss_scale = "none";
  EXPECT_TRUE(kiln::testing::fails_with(
      [&] { parse_config(to_toml(no_scaling), "policy.toml"); },
      {"a layer's compute_dtype = \"f16\" with train.loss_scale = \"none\""}));
  EXPECT_TRUE(kiln::testing::fails_with(
      [&] {
        per_layer(runs, "f32", {"", "f64", "", "", ""});
      },
      {"compute_dtype", "f64"}));
}

}  // namespace
}  // namespace kiln::train
