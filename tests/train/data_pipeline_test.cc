// The data pipeline inside a run: the tabular example trains on a real CSV file from a
// Debian package, the worker count does not change the weights, violations stop a run
// before anything is written or are dropped and counted in run.json, drop_remainder
// leaves one compilation, and augmentation changes the training but not its determinism.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/error.h"
#include "support/source_tree.h"
#include "train/config.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path pipeline_dir(const std::string& name) {
  return run_test::fresh_dir("data-pipeline", name);
}

using run_test::quiet;
nlohmann::json run_info(const fs::path& run_dir) {
  return run_test::read_json(run_dir / "run.json");
}

TrainConfig example(const std::string& name, const fs::path& runs,
                    std::vector<std::string> overrides) {
  overrides.push_back(fmt::format("experiment.runs_dir=\"{}\"", runs.string()));
  return load_config(kiln::testing::source_dir() / "examples" / name, overrides);
}

TEST(DataPipeline, WineExampleLearnsFromTheDebianCsv) {
  fs::path runs = pipeline_dir("wine");
  TrainSummary summary = train(example("wine_mlp.toml", runs, {}), quiet());
  // Three cultivars, 36 test wines: a linear model already separates them well.
  EXPECT_GT(summary.test_accuracy, 0.9);
  nlohmann::json info = run_info(summary.run_dir);
  const nlohmann::json& dataset = info["dataset"];
  EXPECT_EQ(dataset["train_examples"], 142);
  EXPECT_EQ(dataset["test_examples"], 36);
  EXPECT_EQ(dataset["normalize"], "standardize");
  EXPECT_EQ(dataset["identity"].get<std::string>().size(), 64u);
  EXPECT_EQ(dataset["files"][0]["role"], "train_file");
  EXPECT_EQ(dataset["train_report"]["class_histogram"].size(), 3u);
  EXPECT_TRUE(info["data_wait"].contains("median_ms"));
  fs::remove_all(runs);
}

// Any number of loader threads assembles the same batches: the same weights.
TEST(DataPipeline, WorkerCountDoesNotChangeTheWeights) {
  fs::path runs = pipeline_dir("workers");
  std::vector<std::string> small = {"data.train_limit=1024", "data.test_limit=500",
                                    "train.epochs=1"};
  auto with = [&](const std::string& setting) {
    std::vector<std::string> overrides = small;
    overrides.push_back(setting);
    return train(example("fashion_mnist_cnn.toml", runs, overrides), quiet()).params_sha256;
  };
  std::string one = with("data.workers=1");
  EXPECT_EQ(with("data.workers=3"), one);
  EXPECT_EQ(with("data.prefetch=1"), one);
  // Augmentation is part of the training: switching it off changes the weights.
  EXPECT_NE(with("data.augment.horizontal_flip=false"), one);
  fs::remove_all(runs);
}

// A 6-record NPY training set whose record 4 holds a NaN.
TrainConfig nan_config(const fs::path& dir, const std::string& policy) {
  fs::create_directories(dir);
  auto write_npy = [](const fs::path& path, const std::string& descr, const std::string& shape,
                      const void* data, size_t bytes) {
    std::string header =
        fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
    header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    char length[2] = {static_cast<char>(header.size() & 0xff),
                      static_cast<char>(header.size() >> 8)};
    out.write(length, 2);
    out << header;
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  };
  std::vector<float> features = {0, 1, 1, 0, 0, 0, 1, 1, NAN, 0, 0.5f, 0.5f};
  std::vector<int64_t> labels = {0, 1, 0, 1, 0, 1};
  write_npy(dir / "x.npy", "<f4", "(6, 2)", features.data(), features.size() * 4);
  write_npy(dir / "y.npy", "<i8", "(6,)", labels.data(), labels.size() * 8);
  std::string text = fmt::format(R"(
[experiment]
name = "nan"
runs_dir = "{0}/runs"
[data]
dataset = "npy"
train_features = "{0}/x.npy"
train_labels = "{0}/y.npy"
test_features = "{0}/x.npy"
test_labels = "{0}/y.npy"
on_violation = "{1}"
[data.label]
num_classes = 2
[[model.layers]]
type = "dense"
features = 2
[train]
epochs = 1
batch_size = 2
)",
                                 dir.string(), policy);
  return parse_config(text, "nan.toml");
}

TEST(DataPipeline, ViolationsStopTheRunBeforeAnythingIsWritten) {
  fs::path dir = pipeline_dir("nan-error");
  TrainConfig config = nan_config(dir, "error");
  try {
    train(config, quiet());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.message(), HasSubstr("x.npy' record 4 element 0 is nan"));
    EXPECT_THAT(error.hint(), HasSubstr("on_violation = \"drop\""));
  }
  EXPECT_FALSE(fs::exists(dir / "runs"));
  fs::remove_all(dir);
}

TEST(DataPipeline, DroppedRecordsAreCountedInRunJson) {
  fs::path dir = pipeline_dir("nan-drop");
  TrainSummary summary = train(nan_config(dir, "drop"), quiet());
  nlohmann::json dataset = run_info(summary.run_dir)["dataset"];
  EXPECT_EQ(dataset["dropped_train"], 1);
  EXPECT_EQ(dataset["dropped_test"], 1);
  EXPECT_EQ(dataset["train_examples"], 5);
  EXPECT_EQ(dataset["train_report"]["violations"]["finite"]["first_records"],
            nlohmann::json::array({4}));
  fs::remove_all(dir);
}

// 1000 examples in batches of 128: a last batch of 104 is a second shape, unless dropped.
TEST(DataPipeline, DropRemainderKeepsOneCompilation) {
  fs::path runs = pipeline_dir("remainder");
  std::vector<std::string> small = {"data.train_limit=1000", "data.test_limit=500",
                                    "train.epochs=1"};
  auto compiles = [&](bool drop) {
    std::vector<std::string> overrides = small;
    overrides.push_back(fmt::format("train.drop_remainder={}", drop));
    TrainSummary summary = train(example("fashion_mnist_mlp.toml", runs, overrides), quiet());
    return std::pair{run_info(summary.run_dir)["jit"]["compiles"].get<int64_t>(), summary.steps};
  };
  EXPECT_EQ(compiles(false), (std::pair<int64_t, int64_t>{2, 8}));
  EXPECT_EQ(compiles(true), (std::pair<int64_t, int64_t>{1, 7}));
  fs::remove_all(runs);
}

// pad_remainder: all 1000 examples are trained on in 8 steps of one shape, and the padded
// step learns what the short batch would: the two runs' weights agree to rounding (the
// sums run over 128 rows instead of 104), and their per-step losses likewise.
TEST(DataPipeline, PadRemainderTrainsOnEveryExampleWithOneCompilation) {
  fs::path runs = pipeline_dir("padded");
  std::vector<std::string> small = {"data.train_limit=1000", "data.test_limit=500",
                                    "train.epochs=1", "train.log_every=1"};
  std::vector<std::string> padding = small;
  padding.push_back("train.pad_remainder=true");
  TrainSummary padded = train(example("fashion_mnist_mlp.toml", runs, padding), quiet());
  TrainSummary plain = train(example("fashion_mnist_mlp.toml", runs, small), quiet());
  EXPECT_EQ(padded.steps, 8);
  EXPECT_EQ(run_info(padded.run_dir)["jit"]["compiles"], 1);
  auto train_records = [](const fs::path& run_dir) {
    std::vector<nlohmann::json> records;
    for (nlohmann::json& record : run_test::read_metrics(run_dir)) {
      if (record["kind"] == "train") records.push_back(std::move(record));
    }
    return records;
  };
  std::vector<nlohmann::json> a = train_records(padded.run_dir), b = train_records(plain.run_dir);
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_NEAR(a[i]["loss"].get<double>(), b[i]["loss"].get<double>(),
                1e-5 * std::abs(b[i]["loss"].get<double>()));
    EXPECT_EQ(a[i]["accuracy"], b[i]["accuracy"]);  // the padded rows never count as correct
  }
  EXPECT_NEAR(padded.test_loss, plain.test_loss, 1e-4 * plain.test_loss);
  fs::remove_all(runs);
}

TEST(DataPipeline, PadRemainderIsRefusedWithBatchNormOrDropRemainder) {
  fs::path runs = pipeline_dir("padded-refused");
  // The MLP example with its first ReLU made a batch norm.
  std::ifstream in(kiln::testing::source_dir() / "examples/fashion_mnist_mlp.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t relu = text.find("type = \"relu\"");
  ASSERT_NE(relu, std::string::npos);
  text.replace(relu, std::strlen("type = \"relu\""), "type = \"batch_norm\"");
  EXPECT_THROW(
      {
        try {
          train(parse_config(text, "batch_norm.toml",
                             {"train.pad_remainder=true", "data.train_limit=1000",
                              fmt::format("experiment.runs_dir=\"{}\"", runs.string())}),
                quiet());
        } catch (const Error& error) {
          EXPECT_THAT(error.what(), HasSubstr("batch_norm"));
          EXPECT_THAT(error.what(), HasSubstr("padded rows would enter"));
          throw;
        }
      },
      Error);
  EXPECT_FALSE(fs::exists(runs));  // refused before anything was written
  EXPECT_THROW(
      {
        try {
          example("fashion_mnist_mlp.toml", runs,
                  {"train.pad_remainder=true", "train.drop_remainder=true"});
        } catch (const Error& error) {
          EXPECT_THAT(error.what(), HasSubstr("not both"));
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace kiln::train
