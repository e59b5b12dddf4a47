// The training run end to end on a subset of Fashion-MNIST: learning happens, the run
// directory holds what it promises, two runs give the same weights, and failures
// (non-finite loss, missing data, impossible model) are clear and leave no finished-looking
// run behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/error.h"
#include "kiln/safetensors.h"
#include "train/config.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

const char* kDataDir = "/usr/share/datasets/fashion-mnist";

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("kiln-trainer-test-{}-{}", name, getpid());
  fs::remove_all(dir);
  return dir;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The MLP example on 2048 training and 1000 test images, 2 epochs: seconds, not minutes.
TrainConfig small_mlp(const fs::path& runs_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {
      "data.train_limit=2048", "data.test_limit=1000", "train.epochs=2",
      fmt::format("experiment.runs_dir=\"{}\"", runs_dir.string())};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return load_config(fs::path(KILN_SOURCE_DIR) / "examples/fashion_mnist_mlp.toml", overrides);
}

TrainOptions quiet() {
  TrainOptions options;
  options.quiet = true;
  return options;
}

std::vector<nlohmann::json> read_metrics(const fs::path& run_dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

class Trainer : public testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kDataDir)) {
      GTEST_FAIL() << kDataDir << " is missing: scripts/setup installs dataset-fashion-mnist";
    }
  }
};

TEST_F(Trainer, LearnsOnASubsetAndWritesTheRunDirectory) {
  fs::path runs = fresh_dir("learn");
  TrainSummary summary = train(small_mlp(runs), quiet());
  // 2048 examples, batch 128: 16 steps per epoch.
  EXPECT_EQ(summary.steps, 32);
  // Chance is 10%; two epochs on 2048 images reach about 75%.
  EXPECT_GT(summary.test_accuracy, 0.6);
  std::vector<nlohmann::json> records = read_metrics(summary.run_dir);
  std::vector<double> losses;
  int evals = 0;
  for (const auto& r : records) {
    if (r["kind"] == "train") losses.push_back(r["loss"].get<double>());
    if (r["kind"] == "eval") ++evals;
  }
  ASSERT_EQ(losses.size(), 32u);
  EXPECT_EQ(evals, 2);
  EXPECT_LT(losses.back(), 0.6 * losses.front()) << "the loss did not fall";

  nlohmann::json info = nlohmann::json::parse(read_text(summary.run_dir / "run.json"));
  EXPECT_EQ(info["status"], "completed");
  EXPECT_EQ(info["steps"], 32);
  EXPECT_EQ(info["params_sha256"], summary.params_sha256);
  EXPECT_EQ(summary.run_dir.parent_path(), runs / "fashion_mnist_mlp");
  // The saved config reads back to the same config.
  TrainConfig again = load_config(summary.run_dir / "config.toml");
  EXPECT_EQ(to_toml(again), read_text(summary.run_dir / "config.toml"));
  // The weights file holds every parameter under its path.
  SafetensorsFile weights = load_safetensors(summary.run_dir / "params.safetensors");
  std::vector<std::string> names;
  for (const auto& [name, array] : weights.arrays) names.push_back(name);
  EXPECT_THAT(names, testing::ElementsAre("dense_1/bias", "dense_1/kernel", "dense_3/bias",
                                          "dense_3/kernel", "dense_5/bias", "dense_5/kernel"));
  fs::remove_all(runs);
}

TEST_F(Trainer, TwoRunsWithTheSameConfigGiveBitIdenticalWeights) {
  fs::path runs = fresh_dir("twice");
  std::vector<std::string> one_epoch = {"train.epochs=1", "data.train_limit=1024"};
  TrainSummary first = train(small_mlp(runs, one_epoch), quiet());
  TrainSummary second = train(small_mlp(runs, one_epoch), quiet());
  EXPECT_NE(first.run_dir, second.run_dir) << "a second run must get its own directory";
  EXPECT_EQ(first.params_sha256, second.params_sha256);
  EXPECT_EQ(first.test_accuracy, second.test_accuracy);
  // A different seed gives different weights (the comparison above can fail).
  TrainSummary other = train(
      small_mlp(runs, {"train.epochs=1", "data.train_limit=1024", "experiment.seed=7"}), quiet());
  EXPECT_NE(first.params_sha256, other.params_sha256);
  fs::remove_all(runs);
}

TEST_F(Trainer, NonFiniteLossStopsTheRunNamingTheStepAndParameter) {
  fs::path runs = fresh_dir("nan");
  // A learning rate this large overflows the weights within a few steps.
  TrainConfig config = small_mlp(runs, {"optim.name=\"sgd\"", "optim.lr=1e30"});
  try {
    train(config, quiet());
    FAIL() << "expected the run to stop";
  } catch (const NonFiniteError& error) {
    EXPECT_THAT(error.what(), HasSubstr("step "));
    EXPECT_THAT(error.what(), HasSubstr("first non-finite gradient: dense_"));
  }
  fs::path run_dir = *fs::directory_iterator(runs / "fashion_mnist_mlp");
  nlohmann::json info = nlohmann::json::parse(read_text(run_dir / "run.json"));
  EXPECT_EQ(info["status"], "failed");
  EXPECT_THAT(info["error"].get<std::string>(), HasSubstr("non-finite"));
  EXPECT_FALSE(fs::exists(run_dir / "params.safetensors")) << "a failed run must not look finished";
  bool recorded = false;
  for (const auto& r : read_metrics(run_dir)) recorded |= r["kind"] == "nonfinite";
  EXPECT_TRUE(recorded);
  fs::remove_all(runs);
}

TEST_F(Trainer, SkipPolicyKeepsTrainingAndCountsSkippedSteps) {
  fs::path runs = fresh_dir("skip");
  TrainConfig config = small_mlp(runs, {"optim.name=\"sgd\"", "optim.lr=1e30",
                                        "train.on_nonfinite=\"skip\"", "train.epochs=1"});
  TrainSummary summary = train(config, quiet());
  EXPECT_GT(summary.skipped_steps, 0);
  EXPECT_EQ(summary.steps, 16);
  // Skipped steps leave the weights as they were, so they stay finite and are saved.
  SafetensorsFile weights = load_safetensors(summary.run_dir / "params.safetensors");
  for (const auto& [name, array] : weights.arrays) {
    for (float v : array.to_vector<float>()) ASSERT_TRUE(std::isfinite(v)) << name;
  }
  fs::remove_all(runs);
}

TEST_F(Trainer, MissingDatasetIsAClearErrorAndCreatesNoRun) {
  fs::path runs = fresh_dir("nodata");
  TrainConfig config = small_mlp(runs, {"data.dir=\"/nonexistent/fashion\""});
  try {
    train(config, quiet());
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("/nonexistent/fashion"));
    EXPECT_THAT(error.what(), HasSubstr("dataset-fashion-mnist"));
  }
  EXPECT_FALSE(fs::exists(runs)) << "nothing may be written before the run can start";
}

TEST_F(Trainer, ModelThatDoesNotFitTheImagesIsAClearErrorAndCreatesNoRun) {
  fs::path runs = fresh_dir("badmodel");
  fs::path config_path =
      fs::temp_directory_path() / fmt::format("kiln-bad-model-{}.toml", getpid());
  std::ofstream(config_path) << "[experiment]\nname = \"bad\"\nruns_dir = \"" << runs.string()
                             << "\"\n[[model.layers]]\ntype = \"max_pool\"\nwindow = [64, 64]\n"
                                "[[model.layers]]\ntype = \"flatten\"\n"
                                "[[model.layers]]\ntype = \"dense\"\nfeatures = 10\n";
  try {
    train(load_config(config_path), quiet());
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("max_pool_0"));
  }
  EXPECT_FALSE(fs::exists(runs));
  fs::remove(config_path);
}

TEST_F(Trainer, ModelWithTheWrongNumberOfOutputsIsAClearError) {
  fs::path runs = fresh_dir("outputs");
  fs::path config_path = fs::temp_directory_path() / fmt::format("kiln-bad-out-{}.toml", getpid());
  std::ofstream(config_path) << "[experiment]\nruns_dir = \"" << runs.string()
                             << "\"\n[[model.layers]]\ntype = \"flatten\"\n"
                                "[[model.layers]]\ntype = \"dense\"\nfeatures = 7\n";
  try {
    train(load_config(config_path), quiet());
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("10 logits"));
    EXPECT_THAT(error.what(), HasSubstr("f32[1,7]"));
  }
  EXPECT_FALSE(fs::exists(runs));
  fs::remove(config_path);
}

}  // namespace
}  // namespace kiln::train
