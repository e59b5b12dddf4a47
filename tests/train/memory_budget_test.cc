// train.memory_budget (docs/memory.md, issue 47) in runs: the CNN trained under a budget its
// default plan exceeds (more micro-batches, the allocator's peak within the budget, the
// same bits as the chosen plan written out, a resume that keeps the plan), the CNN and a
// GPT-2 that recompute blocks before they split their batch, and the budgets that cannot work,
// refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/device.h"
#include "support/errors.h"
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

TrainConfig cnn(const fs::path& runs, std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(),
                   {"data.train_limit=2048", "data.test_limit=500", "train.epochs=1",
                    "train.savepoint_every=4", "train.savepoint_keep_every=4"});
  overrides.push_back(fmt::format("experiment.runs_dir=\"{}\"", runs.string()));
  return load_config(kiln::testing::source_dir() / "examples/fashion_mnist_cnn.toml", overrides);
}

TEST(MemoryBudget, TheCnnTrainsInABudgetItsDefaultPlanExceeds) {
  fs::path runs = run_test::fresh_dir("budget", "cnn");
  const int64_t budget = int64_t{25} << 20;
  TrainSummary fitted = train(cnn(runs, {"train.memory_budget=\"25MiB\""}), quiet());
  nlohmann::json info = read_json(fitted.run_dir / "run.json");
  const nlohmann::json& fit = info["memory_budget"];
  EXPECT_EQ(fit["budget_bytes"].get<int64_t>(), budget);
  const nlohmann::json& plans = fit["plans"];
  ASSERT_GE(plans.size(), 2u);
  EXPECT_GT(plans[0]["planned_peak_bytes"].get<int64_t>(), budget) << "the default plan is over";
  EXPECT_EQ(plans[0]["accumulate"].get<int64_t>(), 1);
  const nlohmann::json& chosen = plans[fit["chosen"].get<size_t>()];
  EXPECT_EQ(fit["chosen"].get<size_t>(), plans.size() - 1);
  const int64_t k = chosen["accumulate"].get<int64_t>();
  EXPECT_GT(k, 1);
  EXPECT_EQ(k * chosen["batch_size"].get<int64_t>(), 128) << "the update keeps its 128 rows";
  EXPECT_LE(chosen["planned_peak_bytes"].get<int64_t>(), budget);
  // What the allocator saw over the profiled steps: within the budget, near the plan; and
  // from those steps to the end of the run, evaluation and savepoints included (the
  // profiler reset the device's peak when its steps began).
  int64_t observed = info["memory"]["observed_peak_bytes"].get<int64_t>();
  EXPECT_LE(observed, budget);
  EXPECT_GT(observed, chosen["planned_peak_bytes"].get<int64_t>() / 2);
  EXPECT_LE(default_device().memory_stats().peak_bytes, budget);
  // The evaluation of 500 test examples in one batch would not fit: it takes smaller ones.
  const nlohmann::json& evaluation = fit["evaluation"];
  ASSERT_GE(evaluation.size(), 2u);
  EXPECT_EQ(evaluation[0]["eval_batch_size"].get<int64_t>(), 500);
  EXPECT_GT(evaluation[0]["planned_peak_bytes"].get<int64_t>(), budget);
  EXPECT_LE(evaluation.back()["planned_peak_bytes"].get<int64_t>(), budget);
  // config.toml records the plan, so the run is the chosen plan written out, bit for bit.
  std::string text = run_test::read_text(fitted.run_dir / "config.toml");
  EXPECT_THAT(text, HasSubstr(fmt::format("accumulate = {}", k)));
  EXPECT_THAT(text, HasSubstr("memory_budget = \"25MiB\""));
  TrainSummary written = train(cnn(runs, {fmt::format("train.accumulate={}", k),
                                          fmt::format("train.batch_size={}", 128 / k)}),
                               quiet());
  EXPECT_EQ(written.params_sha256, fitted.params_sha256);
  // A resumed run keeps the plan its config.toml records.
  fs::path copy = run_test::killed_copy(fitted.run_dir, runs / "killed", 8);
  TrainSummary resumed = resume(copy, {}, quiet());
  EXPECT_EQ(resumed.resumed_from_step, 8);
  EXPECT_EQ(resumed.params_sha256, fitted.params_sha256);
}

TEST(MemoryBudget, TheCnnRecomputesItsBlocksBeforeItSplitsItsBatch) {
  fs::path runs = run_test::fresh_dir("budget", "cnn_blocks");
  // An ample budget takes the default plan; its planned peak, less a byte, is then too little.
  TrainSummary ample = train(cnn(runs, {"train.memory_budget=\"1GiB\""}), quiet());
  nlohmann::json first = read_json(ample.run_dir / "run.json")["memory_budget"];
  ASSERT_EQ(first["plans"].size(), 1u);
  EXPECT_EQ(first["plans"][0]["remat"], "none");
  int64_t default_peak = first["plans"][0]["planned_peak_bytes"].get<int64_t>();
  TrainSummary tight =
      train(cnn(runs, {fmt::format("train.memory_budget={}", default_peak - 1)}), quiet());
  nlohmann::json info = read_json(tight.run_dir / "run.json");
  const nlohmann::json& fit = info["memory_budget"];
  const nlohmann::json& chosen = fit["plans"][fit["chosen"].get<size_t>()];
  EXPECT_EQ(chosen["accumulate"].get<int64_t>(), 1) << fit.dump();
  EXPECT_EQ(chosen["remat"], "blocks") << fit.dump();
  EXPECT_LT(chosen["planned_peak_bytes"].get<int64_t>(), default_peak);
  EXPECT_LE(info["memory"]["observed_peak_bytes"].get<int64_t>(), default_peak - 1);
  // Recomputing changes no bit, and config.toml has the blocks chosen.
  EXPECT_EQ(tight.params_sha256, ample.params_sha256);
  EXPECT_THAT(run_test::read_text(tight.run_dir / "config.toml"),
              HasSubstr("type = \"conv2d\"\nfeatures = 32\nkernel_size = [3, 3]\npadding = "
                        "\"valid\"\nremat = \"save_nothing\"\nremat_span = 3\n"));
}

// A GPT-2 of two blocks on a few lines of text, stopped after two steps.
TrainConfig tiny_gpt2(const fs::path& dir, const std::string& budget) {
  fs::create_directories(dir);
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "In the beginning was the word, and the word was light.\n";
  std::ofstream(dir / "corpus.txt", std::ios::binary) << corpus;
  std::string text = fmt::format(R"(
[experiment]
name = "budget_gpt2"
runs_dir = "{}"
[data]
dataset = "text"
train_file = "{}"
context = 32
test_fraction = 0.1
[model]
kind = "gpt2"
[model.gpt2]
layers = 2
heads = 2
channels = 64
max_context = 32
[train]
epochs = 1
max_steps = 2
batch_size = 8
eval_batch_size = 8
savepoint_every = 0
memory_budget = "{}"
)",
                                 (dir / "runs").string(), (dir / "corpus.txt").string(), budget);
  return parse_config(text, "budget_gpt2.toml");
}

TEST(MemoryBudget, AGpt2RecomputesBeforeItSplitsItsBatch) {
  fs::path dir = run_test::fresh_dir("budget", "gpt2");
  // An ample budget takes the default plan; its planned peak, less a byte, is then too little.
  TrainSummary ample = train(tiny_gpt2(dir, "1GiB"), quiet());
  nlohmann::json first = read_json(ample.run_dir / "run.json")["memory_budget"];
  ASSERT_EQ(first["plans"].size(), 1u);
  int64_t default_peak = first["plans"][0]["planned_peak_bytes"].get<int64_t>();
  TrainSummary tight = train(tiny_gpt2(dir, std::to_string(default_peak - 1)), quiet());
  nlohmann::json fit = read_json(tight.run_dir / "run.json")["memory_budget"];
  const nlohmann::json& chosen = fit["plans"][fit["chosen"].get<size_t>()];
  EXPECT_EQ(chosen["accumulate"].get<int64_t>(), 1) << fit.dump();
  EXPECT_NE(chosen["remat"].get<std::string>(), "none") << fit.dump();
  EXPECT_LT(chosen["planned_peak_bytes"].get<int64_t>(), default_peak);
  EXPECT_THAT(run_test::read_text(tight.run_dir / "config.toml"),
              HasSubstr(fmt::format("remat = \"{}\"", chosen["remat"].get<std::string>())));
}

TEST(MemoryBudget, BudgetsThatCannotWorkAreRefusedByName) {
  fs::path runs = run_test::fresh_dir("budget", "errors");
  EXPECT_THAT(kiln::testing::error_of([&] { cnn(runs, {"train.memory_budget=abc"}); }),
              HasSubstr("train.memory_budget = \"abc\" is not a size in bytes"));
  EXPECT_THAT(kiln::testing::error_of([&] { cnn(runs, {"train.memory_budget=0"}); }),
              HasSubstr("is not a size in bytes"));
  EXPECT_THAT(kiln::testing::error_of([&] {
                cnn(runs, {"train.memory_budget=2GiB", "mesh.data=2"});
              }),
              HasSubstr("train.memory_budget with mesh.data = 2"));
  EXPECT_THAT(
      kiln::testing::error_of([&] { train(cnn(runs, {"train.memory_budget=64KiB"}), quiet()); }),
      HasSubstr("is less than the model's parameters and optimizer state alone"));
  // Above the state (2.6 MiB) but below any plan: the plans tried, and why the search stopped.
  std::string none_fits =
      kiln::testing::error_of([&] { train(cnn(runs, {"train.memory_budget=3MiB"}), quiet()); });
  EXPECT_THAT(none_fits, HasSubstr("train.memory_budget = 3.00 MiB: no plan's train step fits"));
  EXPECT_THAT(none_fits, HasSubstr("accumulate 1 x batch_size 128"));
  EXPECT_FALSE(fs::exists(runs)) << "a refused run leaves nothing on disk";
}

}  // namespace
}  // namespace kiln::train
