// The training run end to end on a subset of Fashion-MNIST: learning happens, the run
// directory holds what it promises, two runs give the same weights, and failures
// (non-finite loss, missing data, impossible model) are clear and leave no finished-looking
// run behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "kiln/error.h"
#include "kiln/safetensors.h"
#include "train/config.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const char* kDataDir = "/usr/share/datasets/fashion-mnist";

fs::path fresh_dir(const std::string& name) {
  return run_test::fresh_dir("trainer", name);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The MLP example on 2048 training and 1000 test images, 2 epochs: seconds, not minutes.
TrainConfig small_mlp(const fs::path& runs_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {"data.train_limit=2048", "data.test_limit=1000",
                                        "train.epochs=2"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return run_test::mlp_example(runs_dir, overrides);
}

using run_test::quiet;
using run_test::read_metrics;

class Trainer : public ::testing::Test {
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
  EXPECT_THAT(names, ::testing::ElementsAre("dense_1/bias", "dense_1/kernel", "dense_3/bias",
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
  fs::path run_dir = run_test::only_run_dir(runs, "fashion_mnist_mlp");
  nlohmann::json info = nlohmann::json::parse(read_text(run_dir / "run.json"));
  EXPECT_EQ(info["status"], "failed");
  EXPECT_THAT(info["error"].get<std::string>(), HasSubstr("non-finite"));
  EXPECT_FALSE(fs::exists(run_dir / "params.safetensors")) << "a failed run must not look finished";
  bool recorded = false;
  for (const auto& r : read_metrics(run_dir)) recorded |= r["kind"] == "nonfinite";
  EXPECT_TRUE(recorded);
  fs::remove_all(runs);
}

nlohmann::json only_run_info(const fs::path& runs, const std::string& experiment) {
  fs::path run_dir = run_test::only_run_dir(runs, experiment);
  return nlohmann::json::parse(read_text(run_dir / "run.json"));
}

// Skipping most steps used to end "completed" with a test loss of nan. Skipped steps keep
// the weights, but these (from the one step of lr 1e30 that was finite) give a nan loss.
TEST_F(Trainer, SkipPolicyRunWhoseEvaluationIsNotFiniteFails) {
  fs::path runs = fresh_dir("skip");
  TrainConfig config =
      small_mlp(runs, {"optim.name=\"sgd\"", "optim.lr=1e30", "train.on_nonfinite=\"skip\"",
                       "train.epochs=1", "train.max_skipped_steps=1000"});
  try {
    train(config, quiet());
    FAIL() << "expected the run to fail";
  } catch (const NonFiniteError& error) {
    EXPECT_THAT(error.what(), HasSubstr("epoch 1 (step 16): the test loss is nan"));
    EXPECT_THAT(error.what(), HasSubstr("steps were skipped"));
  }
  nlohmann::json info = only_run_info(runs, "fashion_mnist_mlp");
  EXPECT_EQ(info["status"], "failed");
  EXPECT_FALSE(info.contains("params_file"));
  fs::remove_all(runs);
}

TEST_F(Trainer, SkipPolicyStopsAfterMaxSkippedSteps) {
  fs::path runs = fresh_dir("skiplimit");
  TrainConfig config =
      small_mlp(runs, {"optim.name=\"sgd\"", "optim.lr=1e30", "train.on_nonfinite=\"skip\"",
                       "train.max_skipped_steps=3"});
  try {
    train(config, quiet());
    FAIL() << "expected the run to stop";
  } catch (const NonFiniteError& error) {
    EXPECT_THAT(error.what(), HasSubstr("4 steps were skipped as non-finite, more than "
                                        "train.max_skipped_steps = 3"));
  }
  EXPECT_EQ(only_run_info(runs, "fashion_mnist_mlp")["status"], "failed");
  int skipped = 0;
  for (const auto& r : read_metrics(run_test::only_run_dir(runs, "fashion_mnist_mlp"))) {
    skipped += r["kind"] == "nonfinite" && r["action"] == "skipped";
  }
  EXPECT_EQ(skipped, 4);
  fs::remove_all(runs);
}

// The first non-finite gradient was the alphabetically first parameter (dense_1/bias);
// the backward pass produces the last layer's gradients first.
TEST_F(Trainer, FirstNonFiniteGradientIsTheFirstInBackwardOrder) {
  fs::path runs = fresh_dir("order");
  try {
    train(small_mlp(runs, {"optim.name=\"sgd\"", "optim.lr=1e30"}), quiet());
    FAIL() << "expected the run to stop";
  } catch (const NonFiniteError& error) {
    EXPECT_THAT(error.what(), HasSubstr("first non-finite gradient: dense_5/bias (in backward "
                                        "order: the last layer's first)"));
  }
  for (const auto& r : read_metrics(run_test::only_run_dir(runs, "fashion_mnist_mlp"))) {
    if (r["kind"] != "nonfinite") continue;
    EXPECT_EQ(r["first_nonfinite_gradient"], "dense_5/bias");
    EXPECT_EQ(r["nonfinite_gradients"][0], "dense_5/bias");
  }
  fs::remove_all(runs);
}

// --debug-nonfinite: the failing step run again one primitive at a time names the first
// operation that made a NaN or an infinity, in the error and in metrics.jsonl, and the
// same config gives the same failing step as without it (nothing donated changes no bits).
TEST_F(Trainer, DebugNonfiniteNamesTheOperationThatMadeTheFirstNaN) {
  fs::path runs = fresh_dir("debug_nan");
  std::vector<std::string> keys = {"optim.name=\"sgd\"", "optim.lr=1e30"};
  std::string plain;
  try {
    train(small_mlp(runs / "plain", keys), quiet());
  } catch (const NonFiniteError& error) {
    plain = error.what();
  }
  TrainOptions options = quiet();
  options.debug_nonfinite = true;
  try {
    train(small_mlp(runs / "debug", keys), options);
    FAIL() << "expected the run to stop";
  } catch (const NonFiniteError& error) {
    std::string message = error.what();
    // The same step and parameter as without the flag, then where the value came from.
    EXPECT_EQ(message.substr(0, plain.find(" (set train.on_nonfinite")),
              plain.substr(0, plain.find(" (set train.on_nonfinite")));
    EXPECT_THAT(message, HasSubstr("where it came from: equation "));
    EXPECT_THAT(message, HasSubstr("from finite operands"));
  }
  bool explained = false;
  for (const auto& r : read_metrics(run_test::only_run_dir(runs / "debug", "fashion_mnist_mlp"))) {
    if (r["kind"] != "nonfinite") continue;
    explained = r.contains("nonfinite_origin") &&
                r["nonfinite_origin"].get<std::string>().find("equation ") == 0;
  }
  EXPECT_TRUE(explained);
  // On a mesh it is refused before the run starts.
  EXPECT_THROW(train(small_mlp(runs / "mesh", {"mesh.data=1"}), options), Error);
  EXPECT_FALSE(fs::exists(runs / "mesh"));
  fs::remove_all(runs);
}

// [telemetry]: every N steps each layer's statistics in metrics.jsonl, a warning past a
// threshold, and nothing of the run changed (the same params, the same run identity).
TEST_F(Trainer, TelemetryRecordsEachLayerAndChangesNothing) {
  fs::path runs = fresh_dir("telemetry");
  std::vector<std::string> keys = {"train.epochs=1", "data.train_limit=1024"};
  TrainSummary plain = train(small_mlp(runs / "plain", keys), quiet());
  keys.insert(keys.end(), {"telemetry.every=4", "telemetry.dead_warning=0.0"});
  TrainSummary observed = train(small_mlp(runs / "observed", keys), quiet());
  EXPECT_EQ(observed.params_sha256, plain.params_sha256);
  // Not part of the identity: the same config with and without it has one identity text.
  EXPECT_EQ(identity_toml(small_mlp(runs / "plain", keys)),
            identity_toml(small_mlp(runs / "plain", {"train.epochs=1", "data.train_limit=1024"})));
  std::vector<int64_t> steps;
  bool warned = false;
  for (const auto& r :
       read_metrics(run_test::only_run_dir(runs / "observed", "fashion_mnist_mlp"))) {
    if (r["kind"] != "telemetry") continue;
    steps.push_back(r["step"].get<int64_t>());
    for (const char* key : {"dense_1/grad_norm", "dense_1/update_ratio", "relu_2/dead_fraction",
                            "flatten_0/activation_std"}) {
      ASSERT_TRUE(r.contains(key)) << key;
      EXPECT_TRUE(std::isfinite(r[key].get<double>())) << key;
    }
    EXPECT_GE(r["relu_2/dead_fraction"].get<double>(), 0.0);
    EXPECT_LE(r["relu_2/dead_fraction"].get<double>(), 1.0);
    EXPECT_GT(r["dense_1/grad_norm"].get<double>(), 0.0);
    EXPECT_FALSE(r.contains("relu_2/grad_norm"));  // no params, no gradient
    warned |= r.contains("warnings");
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{4, 8}));
  EXPECT_TRUE(warned) << "dead_warning = 0 warns of any dead unit";
  fs::remove_all(runs);
}

// An error that only a full run would have met (here: BatchNorm's batch statistics on the
// last batch of an epoch, 1 example) is found before the run directory exists.
TEST_F(Trainer, BatchNormOnAOneExampleLastBatchIsRefusedBeforeTheFirstStep) {
  fs::path runs = fresh_dir("bn");
  fs::path config_path = fs::temp_directory_path() / fmt::format("kiln-bn-{}.toml", getpid());
  std::ofstream(config_path) << "[experiment]\nruns_dir = \"" << runs.string()
                             << "\"\n[data]\ntrain_limit = 129\ntest_limit = 100\n"
                                "[[model.layers]]\ntype = \"flatten\"\n"
                                "[[model.layers]]\ntype = \"dense\"\nfeatures = 16\n"
                                "[[model.layers]]\ntype = \"batch_norm\"\n"
                                "[[model.layers]]\ntype = \"dense\"\nfeatures = 10\n";
  std::string message;
  try {
    train(load_config(config_path), quiet());
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_THAT(message, HasSubstr("model.layers[2] (batch_norm, line 11)"));
  EXPECT_THAT(message, HasSubstr("last training batch of each epoch has 1 example(s)"));
  EXPECT_FALSE(fs::exists(runs));
  // With max_steps short of the last batch, the run never meets it.
  TrainSummary summary = train(load_config(config_path, {"train.max_steps=1"}), quiet());
  EXPECT_EQ(summary.steps, 1);
  fs::remove_all(runs);
  fs::remove(config_path);
}

TEST_F(Trainer, ScheduleThatUnderflowsIsRefusedBeforeTheRun) {
  fs::path runs = fresh_dir("schedule");
  std::string message;
  try {
    // 1e-20 divided by 10 at each of the 32 steps ends at 1e-52: 0 in f32.
    train(small_mlp(runs, {"optim.lr=1e-20", "optim.schedule=\"exponential\"",
                           "optim.transition_steps=1", "optim.decay_rate=0.1"}),
          quiet());
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_THAT(message, HasSubstr("optim.schedule = \"exponential\" (optim.lr = 1e-20, "
                                 "optim.decay_rate = 0.1, optim.transition_steps = 1)"));
  EXPECT_THAT(message, HasSubstr("a rate of 0 or a subnormal"));
  EXPECT_FALSE(fs::exists(runs));
}

TEST_F(Trainer, RunJsonRecordsTheProcessAndTheKernels) {
  fs::path runs = fresh_dir("info");
  TrainSummary summary =
      train(small_mlp(runs, {"train.max_steps=2", "data.train_limit=256"}), quiet());
  nlohmann::json info = nlohmann::json::parse(read_text(summary.run_dir / "run.json"));
  EXPECT_EQ(info["pid"], static_cast<int64_t>(getpid()));
  EXPECT_TRUE(info["host"].is_string());
  EXPECT_EQ(info["kernels"], std::getenv("KILN_KERNELS") ? "ref" : "fast");
  fs::remove_all(runs);
}

// A stop request (SIGINT in `kiln train`) before the run starts writes nothing; a run
// whose stop is requested ends after the step in flight, "interrupted".
TEST_F(Trainer, StopRequestedBeforeTheStartWritesNothing) {
  fs::path runs = fresh_dir("stop");
  std::atomic<int> stop{SIGINT};
  TrainOptions options = quiet();
  options.stop_signal = &stop;
  try {
    train(small_mlp(runs), options);
    FAIL() << "expected an interruption";
  } catch (const InterruptedError& interrupted) {
    EXPECT_EQ(interrupted.signal(), SIGINT);
    EXPECT_EQ(interrupted.steps(), 0);
    EXPECT_THAT(interrupted.what(), HasSubstr("SIGINT before the run started"));
  }
  EXPECT_FALSE(fs::exists(runs));
}

class WriteFaults : public Trainer {
 protected:
  void TearDown() override { io::set_write_fault_for_testing(nullptr); }
  // Fails every write to a file called `name` with ENOSPC.
  static void fail_writes_to(const std::string& name) {
    io::set_write_fault_for_testing(
        [name](const fs::path& path) { return path.filename() == name ? ENOSPC : 0; });
  }
};

// A full disk while writing metrics or weights: the error names that file (not run.json's
// temporary), and run.json records the failure.
TEST_F(WriteFaults, AFailedMetricsOrWeightsWriteNamesTheFileAndIsRecorded) {
  for (std::string file : {"metrics.jsonl", "params.safetensors"}) {
    fs::path runs = fresh_dir("fault");
    fail_writes_to(file);
    std::string message;
    try {
      train(small_mlp(runs, {"train.max_steps=3", "data.train_limit=512"}), quiet());
    } catch (const Error& error) {
      message = error.what();
    }
    io::set_write_fault_for_testing(nullptr);
    EXPECT_THAT(message, HasSubstr("cannot write")) << file;
    EXPECT_THAT(message, HasSubstr("/" + file)) << file;
    EXPECT_THAT(message, HasSubstr("No space left on device")) << file;
    EXPECT_THAT(message, ::testing::Not(HasSubstr(".run.json.tmp"))) << file;
    nlohmann::json info = only_run_info(runs, "fashion_mnist_mlp");
    EXPECT_EQ(info["status"], "failed") << file;
    EXPECT_THAT(info["error"].get<std::string>(), HasSubstr(file));
    fs::path run_dir = run_test::only_run_dir(runs, "fashion_mnist_mlp");
    for (const auto& entry : fs::directory_iterator(run_dir)) {
      EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr(".tmp.")));
    }
    fs::remove_all(runs);
  }
}

// A run that fails after an epoch whose evaluation was finite keeps that epoch's weights:
// here the final weights file cannot be written, so the weights after epoch 2 are the
// last good ones.
TEST_F(WriteFaults, ARunFailingLateKeepsTheLastGoodWeights) {
  fs::path runs = fresh_dir("lastgood");
  fail_writes_to("params.safetensors");
  EXPECT_THROW(train(small_mlp(runs, {"data.train_limit=512"}), quiet()), Error);
  io::set_write_fault_for_testing(nullptr);
  nlohmann::json info = only_run_info(runs, "fashion_mnist_mlp");
  EXPECT_EQ(info["status"], "failed");
  EXPECT_EQ(info["last_good"]["epoch"], 2);
  EXPECT_EQ(info["last_good"]["step"], 8);  // 512 examples, batch 128, 2 epochs
  fs::path run_dir = run_test::only_run_dir(runs, "fashion_mnist_mlp");
  EXPECT_FALSE(fs::exists(run_dir / "params.safetensors"));
  SafetensorsFile kept = load_safetensors(run_dir / "last_good.params.safetensors");
  EXPECT_EQ(kept.metadata["epoch"], "2");
  EXPECT_EQ(kept.arrays.size(), 6u);  // three dense layers' kernels and biases
  fs::remove_all(runs);
}

// When run.json's temporary cannot be written (the disk is full), the final state still
// reaches run.json, rewritten in place.
TEST_F(WriteFaults, FinalStateIsRecordedWhenNoTemporaryFits) {
  fs::path runs = fresh_dir("inplace");
  io::set_write_fault_for_testing([](const fs::path& path) {
    return path.filename().string().starts_with(".run.json") ? ENOSPC : 0;
  });
  TrainSummary summary =
      train(small_mlp(runs, {"train.max_steps=2", "data.train_limit=256"}), quiet());
  io::set_write_fault_for_testing(nullptr);
  EXPECT_EQ(nlohmann::json::parse(read_text(summary.run_dir / "run.json"))["status"], "completed");
  fs::remove_all(runs);
}

// A run whose process is gone (killed by SIGKILL) but whose run.json says running is
// marked crashed when the next run of the same experiment starts.
TEST_F(Trainer, AStaleRunningRunIsMarkedCrashedByTheNextRun) {
  fs::path runs = fresh_dir("stale");
  TrainSummary first =
      train(small_mlp(runs, {"train.max_steps=1", "data.train_limit=256"}), quiet());
  nlohmann::json info = nlohmann::json::parse(read_text(first.run_dir / "run.json"));
  info["status"] = "running";
  info["pid"] = 0x7ffffff0;  // no such process
  std::ofstream(first.run_dir / "run.json") << info.dump(2);
  TrainSummary second =
      train(small_mlp(runs, {"train.max_steps=1", "data.train_limit=256"}), quiet());
  EXPECT_THAT(second.crashed_runs, ::testing::ElementsAre(first.run_dir));
  nlohmann::json marked = nlohmann::json::parse(read_text(first.run_dir / "run.json"));
  EXPECT_EQ(marked["status"], "crashed");
  EXPECT_THAT(marked["error"].get<std::string>(), HasSubstr("ended without recording"));
  // A live run (this process) is left alone.
  EXPECT_EQ(nlohmann::json::parse(read_text(second.run_dir / "run.json"))["status"], "completed");
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
