// `kiln train` with [mesh] (data parallel over 4 logical CPU devices, ctest
// train_data_parallel): the same config gives bit-identical weights on 1, 2 and 4 devices,
// with dropout, batch norm and a padded last batch too; a run resumes on another mesh size
// and ends with the same bits; what cannot work is refused, naming the key.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/error.h"
#include "train/config.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using run_test::quiet;
using run_test::read_json;
using ::testing::HasSubstr;

// The MLP example on 1024 training and 500 test images, one epoch of 8 steps.
TrainConfig one_epoch_mlp(const fs::path& runs, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {"data.train_limit=1024", "data.test_limit=500",
                                        "train.epochs=1"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return run_test::mlp_example(runs, overrides);
}

// A model with dropout and batch norm (randomness and model state in the step).
fs::path write_regularized_config(const fs::path& runs) {
  fs::path path = runs / "regularized.toml";
  fs::create_directories(runs);
  std::ofstream(path) << "[experiment]\nname = \"regularized\"\nruns_dir = \"" << runs.string()
                      << "\"\n[data]\ntrain_limit = 1000\ntest_limit = 300\n"
                         "[train]\nepochs = 1\nbatch_size = 64\ndrop_remainder = true\n"
                         "[[model.layers]]\ntype = \"flatten\"\n"
                         "[[model.layers]]\ntype = \"dense\"\nfeatures = 32\n"
                         "[[model.layers]]\ntype = \"batch_norm\"\n"
                         "[[model.layers]]\ntype = \"relu\"\n"
                         "[[model.layers]]\ntype = \"dropout\"\nrate = 0.3\n"
                         "[[model.layers]]\ntype = \"dense\"\nfeatures = 10\n";
  return path;
}

std::string error_of(const TrainConfig& config) {
  try {
    train(config, quiet());
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

std::string load_error(const fs::path& runs, std::vector<std::string> extra) {
  try {
    one_epoch_mlp(runs, std::move(extra));
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

class DataParallelTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(devices().size(), 4u) << "run with KILN_CPU_DEVICES=4 (ctest train_data_parallel)";
  }
};

TEST_F(DataParallelTraining, SameWeightsOnOneTwoAndFourDevices) {
  fs::path runs = run_test::fresh_dir("dp", "same");
  std::vector<TrainSummary> summaries;
  for (int data : {1, 2, 4}) {
    summaries.push_back(train(one_epoch_mlp(runs, {fmt::format("mesh.data={}", data)}), quiet()));
  }
  EXPECT_EQ(summaries[0].steps, 8);
  for (size_t i = 1; i < summaries.size(); ++i) {
    EXPECT_EQ(summaries[i].params_sha256, summaries[0].params_sha256) << "mesh size " << (1 << i);
    EXPECT_EQ(summaries[i].test_accuracy, summaries[0].test_accuracy);
  }
  // The same training as on one device without a mesh, rounded differently (the loss is a
  // sum over chunks, divided once): other bits, the same learning.
  TrainSummary single = train(one_epoch_mlp(runs), quiet());
  EXPECT_NE(single.params_sha256, summaries[0].params_sha256);
  EXPECT_NEAR(single.test_accuracy, summaries[0].test_accuracy, 0.03);
  // Another chunk count adds in another order: the comparison above can fail.
  TrainSummary eight = train(one_epoch_mlp(runs, {"mesh.data=2", "mesh.chunks=8"}), quiet());
  EXPECT_NE(eight.params_sha256, summaries[0].params_sha256);
  // Each parameter lives whole on each of the mesh's devices, and the step compiles once.
  nlohmann::json info = read_json(summaries[2].run_dir / "run.json");
  EXPECT_EQ(info["timing"]["misplaced_params"], 0);
  EXPECT_EQ(info["timing"]["placement"][0]["devices"], "cpu:0,cpu:1,cpu:2,cpu:3");
  EXPECT_EQ(info["jit"]["compiles"], 1);
  // The roofline sees the kernels of the shard_map's segments, each run on every device.
  const nlohmann::json& top = info["roofline"]["top"];
  ASSERT_FALSE(top.empty());
  EXPECT_THAT(top[0]["name"].get<std::string>(), ::testing::StartsWith("shard_map segment "));
  EXPECT_EQ(top[0]["calls_per_step"], 4.0);
  EXPECT_GT(info["roofline"]["flops"].get<double>(), 0);
  fs::remove_all(runs);
}

// f16 with dynamic loss scaling (issue 47): the overflow decision is the whole mesh's (the
// gradients are summed before it), so every mesh size skips the same steps and ends with the
// same scale and bits, params split over the devices (FSDP) or not. Each chunk differentiates
// its summed loss, so the first steps overflow the default 2^15 and back off.
TEST_F(DataParallelTraining, F16LossScalingGivesTheSameBitsOnEveryMeshSize) {
  fs::path runs = run_test::fresh_dir("dp", "f16");
  std::vector<TrainSummary> summaries;
  for (std::string data : {"1", "2", "4"}) {
    summaries.push_back(
        train(one_epoch_mlp(runs, {"mesh.data=" + data, "model.compute_dtype=\"f16\""}), quiet()));
  }
  summaries.push_back(train(
      one_epoch_mlp(runs, {"mesh.data=4", "mesh.shard_params=true", "model.compute_dtype=\"f16\""}),
      quiet()));
  EXPECT_GT(summaries[0].overflow_steps, 0);
  for (size_t i = 1; i < summaries.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(summaries[i].params_sha256, summaries[0].params_sha256);
    EXPECT_EQ(summaries[i].overflow_steps, summaries[0].overflow_steps);
    EXPECT_EQ(summaries[i].final_loss_scale, summaries[0].final_loss_scale);
  }
  EXPECT_GT(summaries[0].test_accuracy, 0.5);
  fs::remove_all(runs);
}

TEST_F(DataParallelTraining, ShardedParamsGiveTheReplicatedBitsInAQuarterOfTheMemory) {
  fs::path runs = run_test::fresh_dir("dp", "fsdp");
  TrainSummary replicated = train(one_epoch_mlp(runs, {"mesh.data=4"}), quiet());
  TrainSummary sharded =
      train(one_epoch_mlp(runs, {"mesh.data=4", "mesh.shard_params=true"}), quiet());
  EXPECT_EQ(sharded.params_sha256, replicated.params_sha256);
  EXPECT_EQ(sharded.test_accuracy, replicated.test_accuracy);
  nlohmann::json whole = read_json(replicated.run_dir / "run.json")["timing"];
  nlohmann::json split = read_json(sharded.run_dir / "run.json")["timing"];
  // dense_1/kernel [784, 512] splits by rows over 4 devices; every first dimension here
  // (784, 512, 10 and the biases' 512, 512, 10) but 10 divides by 4.
  EXPECT_EQ(split["placement"][1]["shape"], "f32[784,512]{data,_}");
  EXPECT_EQ(split["misplaced_params"], 0);
  int64_t replicated_bytes = whole["state_bytes_per_device"].get<int64_t>();
  int64_t sharded_bytes = split["state_bytes_per_device"].get<int64_t>();
  EXPECT_LT(sharded_bytes, replicated_bytes / 3) << "expected about a quarter";
  EXPECT_GT(sharded_bytes, replicated_bytes / 4);
  // A global-norm clip over split gradients is refused by name, and so is FSDP without a mesh.
  EXPECT_THAT(
      load_error(runs, {"mesh.data=4", "mesh.shard_params=true", "optim.clip_global_norm=1"}),
      HasSubstr("optim.clip_global_norm"));
  EXPECT_THAT(load_error(runs, {"mesh.shard_params=true"}), HasSubstr("needs a mesh"));
  fs::remove_all(runs);
}

TEST_F(DataParallelTraining, DropoutAndBatchNormGiveTheSameBits) {
  fs::path runs = run_test::fresh_dir("dp", "regularized");
  fs::path config = write_regularized_config(runs);
  // 1000 examples in batches of 64: 15 steps, the last 40 examples left out.
  TrainSummary one = train(load_config(config, {"mesh.data=1"}), quiet());
  TrainSummary four = train(load_config(config, {"mesh.data=4"}), quiet());
  TrainSummary split =
      train(load_config(config, {"mesh.data=2", "mesh.shard_params=true"}), quiet());
  EXPECT_EQ(split.params_sha256, one.params_sha256);
  EXPECT_EQ(one.steps, 15);
  EXPECT_EQ(one.params_sha256, four.params_sha256);
  EXPECT_EQ(one.test_accuracy, four.test_accuracy);
  EXPECT_GT(one.test_accuracy, 0.3);  // chance is 0.1
  fs::remove_all(runs);
}

TEST_F(DataParallelTraining, ARunResumesOnAnotherMeshSizeWithTheSameBits) {
  fs::path runs = run_test::fresh_dir("dp", "resume");
  std::vector<std::string> two_epochs = {"mesh.data=4", "train.epochs=2", "train.savepoint_every=4",
                                         "train.savepoint_keep_every=4"};
  TrainSummary straight = train(one_epoch_mlp(runs, two_epochs), quiet());
  // Killed after the savepoint of step 4 (mid-epoch): the later ones and the weights gone.
  fs::path copy = run_test::killed_copy(straight.run_dir, runs / "killed", 4);
  // mesh.data is not part of the run identity: no --allow-changed needed.
  ResumeOptions on_two;
  on_two.overrides = {"mesh.data=2"};
  TrainSummary resumed = resume(copy, on_two, quiet());
  EXPECT_EQ(resumed.resumed_from_step, 4);
  EXPECT_EQ(resumed.steps, 16);
  EXPECT_EQ(resumed.params_sha256, straight.params_sha256);
  // Leaving the mesh changes what the step computes: that is a change of identity.
  fs::path again = run_test::killed_copy(straight.run_dir, runs / "again", 4);
  ResumeOptions without_mesh;
  without_mesh.overrides = {"mesh.data=0"};
  std::string message;
  try {
    resume(again, without_mesh, quiet());
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_THAT(message, HasSubstr("mesh"));
  fs::remove_all(runs);
}

// train.accumulate = K: each update adds K micro-batches' gradients, and is the update of
// one batch of K x batch_size in K x mesh.chunks chunks (docs/training.md, *Gradient
// accumulation*), with or without a mesh, and resumes between updates with the same bits.
TEST_F(DataParallelTraining, AccumulationIsTheBatchOfItsMicroBatchesInChunks) {
  fs::path runs = run_test::fresh_dir("dp", "accumulate");
  TrainSummary micro =
      train(one_epoch_mlp(runs, {"train.batch_size=32", "train.accumulate=4"}), quiet());
  TrainSummary whole =
      train(one_epoch_mlp(runs, {"mesh.data=1", "mesh.chunks=4"}), quiet());  // 128 rows
  EXPECT_EQ(micro.steps, 8);  // updates: 1024 / (4 x 32)
  EXPECT_EQ(micro.params_sha256, whole.params_sha256);
  // On a mesh: 2 micro-batches of 64 in 2 chunks each are 128 rows in 4 chunks.
  TrainSummary mesh_micro = train(
      one_epoch_mlp(runs,
                    {"mesh.data=2", "mesh.chunks=2", "train.batch_size=64", "train.accumulate=2"}),
      quiet());
  TrainSummary mesh_whole = train(one_epoch_mlp(runs, {"mesh.data=4", "mesh.chunks=4"}), quiet());
  EXPECT_EQ(mesh_micro.params_sha256, mesh_whole.params_sha256);
  EXPECT_EQ(mesh_micro.params_sha256, whole.params_sha256);
  // The run records the config as written, and resumes from a savepoint between updates.
  std::vector<std::string> two_epochs = {"train.batch_size=32", "train.accumulate=4",
                                         "train.epochs=2", "train.savepoint_every=4",
                                         "train.savepoint_keep_every=4"};
  TrainSummary straight = train(one_epoch_mlp(runs, two_epochs), quiet());
  std::ifstream config(straight.run_dir / "config.toml");
  std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("accumulate = 4"));
  EXPECT_THAT(text, HasSubstr("batch_size = 32"));
  fs::path copy = run_test::killed_copy(straight.run_dir, runs / "killed", 4);
  TrainSummary resumed = resume(copy, {}, quiet());
  EXPECT_EQ(resumed.resumed_from_step, 4);
  EXPECT_EQ(resumed.params_sha256, straight.params_sha256);
  fs::remove_all(runs);
}

TEST_F(DataParallelTraining, WhatCannotWorkIsRefusedNamingTheKey) {
  fs::path runs = run_test::fresh_dir("dp", "errors");
  EXPECT_THAT(load_error(runs, {"train.accumulate=0"}), HasSubstr("train.accumulate"));
  EXPECT_THAT(load_error(runs, {"train.batch_size=65536", "train.accumulate=64"}),
              HasSubstr("make updates of 4194304 rows"));
  EXPECT_THAT(load_error(runs, {"mesh.data=4", "mesh.chunks=6"}),
              HasSubstr("mesh.chunks = 6 is not a multiple of mesh.data = 4"));
  EXPECT_THAT(load_error(runs, {"mesh.data=2", "mesh.chunks=6"}),
              HasSubstr("train.batch_size = 128 does not split into mesh.chunks = 6"));
  EXPECT_THAT(load_error(runs, {"mesh.data=-1"}), HasSubstr("mesh.data"));
  // More devices than the process has: the message says how to get them.
  std::string too_many = error_of(one_epoch_mlp(runs, {"mesh.data=8", "mesh.chunks=8"}));
  EXPECT_THAT(too_many, HasSubstr("mesh.data = 8 needs 8 devices; this process has 4"));
  EXPECT_THAT(too_many, HasSubstr("KILN_CPU_DEVICES=8"));
  // 1000 examples in batches of 128 leave 104; 16 chunks of 104 rows do not divide.
  std::string last =
      error_of(one_epoch_mlp(runs, {"data.train_limit=1000", "mesh.data=2", "mesh.chunks=16"}));
  EXPECT_THAT(last, HasSubstr("last batch has 104 examples"));
  EXPECT_THAT(last, HasSubstr("train.pad_remainder"));
  EXPECT_FALSE(fs::exists(runs)) << "a refused run leaves nothing on disk";
  // Padding the last batch makes the same run work.
  TrainSummary padded = train(one_epoch_mlp(runs, {"data.train_limit=1000", "mesh.data=2",
                                                   "mesh.chunks=16", "train.pad_remainder=true"}),
                              quiet());
  EXPECT_EQ(padded.steps, 8);
  // The padded rows are left out of the sums: one device gives the same bits.
  TrainSummary padded_one =
      train(one_epoch_mlp(runs, {"data.train_limit=1000", "mesh.data=1", "mesh.chunks=16",
                                 "train.pad_remainder=true"}),
            quiet());
  EXPECT_EQ(padded_one.params_sha256, padded.params_sha256);
  fs::remove_all(runs);
}

}  // namespace
}  // namespace kiln::train
