// `kiln train` with mesh.model (tensor-parallel dense layers, ctest train_data_parallel's 4
// logical devices): the same bits on any data-axis size for a fixed model-axis size, the
// same learning as the unsplit model within f32 rounding, the split params' blocks where the
// layout says, and what cannot work refused naming the layer or key.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/safetensors.h"
#include "support/arrays.h"
#include "support/source_tree.h"
#include "train/config.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using run_test::quiet;
using run_test::read_json;
using ::testing::HasSubstr;

// The tensor-parallel MLP example on 1024 training and 500 test images, one epoch of 8
// steps.
TrainConfig small_tp_mlp(const fs::path& runs, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {"data.train_limit=1024", "data.test_limit=500",
                                        "train.epochs=1",
                                        fmt::format("experiment.runs_dir=\"{}\"", runs.string())};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return load_config(
      kiln::testing::source_dir() / "examples/fashion_mnist_mlp_tensor_parallel.toml", overrides);
}

std::string load_error(const std::string& text) {
  fs::path runs = run_test::fresh_dir("tp", "bad");
  fs::create_directories(runs);
  fs::path path = runs / "bad.toml";
  std::ofstream(path) << text;
  try {
    load_config(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

double largest_difference(const fs::path& a, const fs::path& b) {
  SafetensorsFile x = load_safetensors(a / "params.safetensors");
  SafetensorsFile y = load_safetensors(b / "params.safetensors");
  EXPECT_EQ(x.arrays.size(), y.arrays.size());
  double largest = 0;
  for (size_t i = 0; i < x.arrays.size() && i < y.arrays.size(); ++i) {
    std::vector<double> u = kiln::testing::values(x.arrays[i].second);
    std::vector<double> v = kiln::testing::values(y.arrays[i].second);
    for (size_t j = 0; j < u.size(); ++j) largest = std::max(largest, std::abs(u[j] - v[j]));
  }
  return largest;
}

class TensorParallelTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(devices().size(), 4u) << "run with KILN_CPU_DEVICES=4 (ctest train_data_parallel)";
  }
};

TEST_F(TensorParallelTraining, SameBitsOnAnyDataSizeAndTheUnsplitModelsLearning) {
  fs::path runs = run_test::fresh_dir("tp", "same");
  TrainSummary tensor = train(small_tp_mlp(runs), quiet());
  TrainSummary data_by_tensor = train(small_tp_mlp(runs, {"mesh.data=2"}), quiet());
  EXPECT_EQ(tensor.steps, 8);
  EXPECT_EQ(data_by_tensor.params_sha256, tensor.params_sha256);
  EXPECT_EQ(data_by_tensor.test_accuracy, tensor.test_accuracy);
  // mesh.model = 1: no model axis, the split layers are ordinary dense layers.
  TrainSummary unsplit = train(small_tp_mlp(runs, {"mesh.model=1"}), quiet());
  EXPECT_NEAR(unsplit.test_accuracy, tensor.test_accuracy, 0.02);
  // Eight AdamW steps of lr 1e-3 move each weight by up to 8e-3; rounding differences of
  // the row-split layer's sum stay far below that.
  double difference = largest_difference(unsplit.run_dir, tensor.run_dir);
  EXPECT_LT(difference, 1e-4);
  // The split kernels are blocks over `model`, replicated over `data`; the logits layer is
  // whole on all four devices.
  nlohmann::json timing = read_json(data_by_tensor.run_dir / "run.json")["timing"];
  EXPECT_EQ(timing["misplaced_params"], 0);
  std::vector<std::string> shapes;
  for (const auto& entry : timing["placement"]) {
    shapes.push_back(entry["param"].get<std::string>() + " " + entry["shape"].get<std::string>());
    EXPECT_EQ(entry["devices"], "cpu:0,cpu:1,cpu:2,cpu:3");
  }
  EXPECT_THAT(shapes, ::testing::ElementsAre(
                          "dense_1/bias f32[512]{model}", "dense_1/kernel f32[784,512]{_,model}",
                          "dense_3/bias f32[512]{_}", "dense_3/kernel f32[512,512]{model,_}",
                          "dense_5/bias f32[10]{_}", "dense_5/kernel f32[512,10]{_,_}"));
  // Each device holds half of the split layers' params and their AdamW moments.
  nlohmann::json whole = read_json(unsplit.run_dir / "run.json")["timing"];
  EXPECT_LT(timing["state_bytes_per_device"].get<int64_t>(),
            whole["state_bytes_per_device"].get<int64_t>() * 6 / 10);
  fs::remove_all(runs);
}

TEST_F(TensorParallelTraining, ARunResumesOnAnotherDataSizeWithTheSameBits) {
  fs::path runs = run_test::fresh_dir("tp", "resume");
  TrainSummary straight = train(small_tp_mlp(runs, {"mesh.data=2", "train.savepoint_every=4",
                                                    "train.savepoint_keep_every=4"}),
                                quiet());
  // Killed after the savepoint of step 4, which holds the split params and moments whole.
  fs::path copy = run_test::killed_copy(straight.run_dir, runs / "killed", 4);
  ResumeOptions on_one;
  on_one.overrides = {"mesh.data=1"};
  TrainSummary resumed = resume(copy, on_one, quiet());
  EXPECT_EQ(resumed.resumed_from_step, 4);
  EXPECT_EQ(resumed.params_sha256, straight.params_sha256);
  fs::remove_all(runs);
}

TEST_F(TensorParallelTraining, WhatCannotWorkIsRefusedNamingTheLayerOrKey) {
  const std::string head =
      "[data]\ntrain_limit = 256\n[mesh]\ndata = 1\nmodel = 2\n"
      "[[model.layers]]\ntype = \"flatten\"\n";
  auto dense = [](int features, const char* parallel) {
    return fmt::format("[[model.layers]]\ntype = \"dense\"\nfeatures = {}\nparallel = \"{}\"\n",
                       features, parallel);
  };
  const std::string relu = "[[model.layers]]\ntype = \"relu\"\n";
  EXPECT_THAT(load_error(head + dense(64, "column") + relu),
              HasSubstr("model.layers[1] (dense, line 8): parallel = \"column\" has no "
                        "row-split dense layer after it"));
  EXPECT_THAT(load_error(head + dense(64, "column") + relu + dense(10, "none")),
              HasSubstr("model.layers[3] (dense, line 14) sits between the column-split "
                        "model.layers[1] (dense, line 8) and its row-split layer"));
  EXPECT_THAT(load_error(head + dense(64, "row") + dense(10, "none")),
              HasSubstr("model.layers[1] (dense, line 8): parallel = \"row\" needs a "
                        "column-split dense layer before it"));
  EXPECT_THAT(load_error(head + dense(63, "column") + dense(10, "row")),
              HasSubstr("63 features do not split over mesh.model = 2"));
  EXPECT_THAT(load_error(head + dense(64, "column") +
                         "[[model.layers]]\ntype = \"dropout\"\nrate = 0.1\n" + dense(10, "row")),
              HasSubstr("model.layers[2] (dropout, line 12) sits between the column-split"));
  EXPECT_THAT(load_error(head + dense(10, "none")), HasSubstr("no layer is split over it"));
  EXPECT_THAT(load_error("[mesh]\nmodel = 2\n[[model.layers]]\ntype = \"flatten\"\n" +
                         dense(64, "column") + dense(10, "row")),
              HasSubstr("mesh.model = 2 needs a mesh: mesh.data is 0"));
  EXPECT_THAT(load_error("[mesh]\ndata = 1\nmodel = 2\nshard_params = true\n"
                         "[[model.layers]]\ntype = \"flatten\"\n" +
                         dense(64, "column") + dense(10, "row")),
              HasSubstr("FSDP over the data axis of a tensor-parallel mesh is not built yet"));
  EXPECT_THAT(load_error("[[model.layers]]\ntype = \"conv2d\"\nfeatures = 4\nkernel_size = [3, "
                         "3]\nparallel = \"column\"\n"),
              HasSubstr("parallel"));
  // More devices than the process has.
  fs::path runs = run_test::fresh_dir("tp", "devices");
  std::string too_many;
  try {
    train(small_tp_mlp(runs, {"mesh.data=4", "mesh.chunks=4"}), quiet());
  } catch (const Error& error) {
    too_many = error.what();
  }
  EXPECT_THAT(too_many, HasSubstr("mesh.data = 4 x mesh.model = 2 needs 8 devices"));
  EXPECT_FALSE(fs::exists(runs)) << "a refused run leaves nothing on disk";
}

}  // namespace
}  // namespace kiln::train
