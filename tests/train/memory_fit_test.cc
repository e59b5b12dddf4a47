// train.memory_budget's search (memory_fit.h) with made-up planned peaks: the order of the
// plans, the first that fits, the plans that cannot run, where the search stops, and the
// refusals; and the pairwise tree built as the chunks arrive (PairwiseAccumulator), which
// must add what pairwise_sum adds, in its order. Runs under a budget: memory_budget_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/error.h"
#include "support/errors.h"
#include "train/config_test_util.h"
#include "train/data_parallel_parts.h"
#include "train/memory_fit.h"

namespace kiln::train {
namespace {

using ::testing::HasSubstr;

TEST(PairwiseAccumulator, AddsWhatPairwiseSumAddsInItsOrder) {
  auto add = [](const std::string& a, const std::string& b) { return "(" + a + "+" + b + ")"; };
  for (int n = 1; n <= 40; ++n) {
    std::vector<std::string> parts;
    PairwiseAccumulator<std::string, decltype(add)> accumulator(add);
    for (int i = 0; i < n; ++i) {
      parts.push_back(std::to_string(i));
      accumulator.push(parts.back());
    }
    EXPECT_EQ(accumulator.total(), pairwise_sum(parts, add)) << n << " parts";
  }
}

TEST(PairwiseAccumulator, HoldsALogarithmicNumberOfSums) {
  int live = 0, most = 0;
  // A sum that counts how many are held at once (a moved-from one holds nothing).
  struct Counted {
    int* live;
    int* most;
    bool holds = true;
    explicit Counted(int* l, int* m) : live(l), most(m) { *most = std::max(*most, ++*live); }
    Counted(const Counted& o) : live(o.live), most(o.most) { *most = std::max(*most, ++*live); }
    Counted(Counted&& o) noexcept : live(o.live), most(o.most) { o.holds = false; }
    Counted& operator=(const Counted&) = delete;
    Counted& operator=(Counted&& o) noexcept {
      if (holds) --*live;
      live = o.live;
      most = o.most;
      holds = std::exchange(o.holds, false);
      return *this;
    }
    ~Counted() {
      if (holds) --*live;
    }
  };
  auto add = [&](const Counted&, const Counted&) { return Counted(&live, &most); };
  auto most_held = [&](int parts) {
    most = 0;
    PairwiseAccumulator<Counted, decltype(add)> accumulator(add);
    for (int i = 0; i < parts; ++i) accumulator.push(Counted(&live, &most));
    Counted total = accumulator.total();
    return most;
  };
  int held_64 = most_held(64), held_1024 = most_held(1024);
  EXPECT_EQ(live, 0);
  // log2: 16 times the parts hold 4 more sums, not 960 more.
  EXPECT_LE(held_64, 6 + 3);
  EXPECT_EQ(held_1024 - held_64, 4);
}

TrainConfig sequential(const std::vector<std::string>& overrides) {
  return config_test::parse(config_test::kOneLayer, overrides);
}

TrainConfig gpt2(const std::vector<std::string>& overrides) {
  return config_test::parse(
      "[model]\nkind = \"gpt2\"\n[data]\ndataset = \"text\"\ntrain_file = \"t.txt\"\n"
      "context = 16\n",
      overrides);
}

// The CNN example's layers: conv relu pool | conv relu pool flatten | dense relu | dense.
TrainConfig cnn(const std::vector<std::string>& overrides) {
  std::string text;
  auto layer = [&](const std::string& body) { text += "[[model.layers]]\n" + body + "\n"; };
  for (int block = 0; block < 2; ++block) {
    layer("type = \"conv2d\"\nfeatures = 8\nkernel_size = [3, 3]");
    layer("type = \"relu\"");
    layer("type = \"max_pool\"\nwindow = [2, 2]");
  }
  layer("type = \"flatten\"");
  layer("type = \"dense\"\nfeatures = 16");
  layer("type = \"relu\"");
  layer("type = \"dense\"\nfeatures = 10");
  return config_test::parse(text, overrides);
}

bool any_remat(const TrainConfig& c) {
  for (const LayerConfig& layer : c.model.layers) {
    if (layer.remat != "none") return true;
  }
  return false;
}

std::vector<std::string> plans_of(const std::vector<TrainConfig>& configs) {
  std::vector<std::string> names;
  for (const TrainConfig& c : configs) {
    std::string remat = c.model.kind == "gpt2" ? " " + c.model.gpt2.remat
                        : any_remat(c)         ? " blocks"
                                               : "";
    names.push_back(fmt::format("{}x{}{}", c.train.accumulate, c.train.batch_size, remat));
  }
  return names;
}

TEST(MemoryCandidates, FewestMicroBatchesFirstThenTheLeastRecomputation) {
  EXPECT_THAT(plans_of(memory_candidates(sequential({"train.batch_size=12"}))),
              ::testing::ElementsAre("1x12", "2x6", "3x4", "4x3", "6x2", "12x1"));
  // From what the config asks on: accumulate 2 x 4 rows is an update of 8.
  EXPECT_THAT(plans_of(memory_candidates(sequential({"train.batch_size=4", "train.accumulate=2"}))),
              ::testing::ElementsAre("2x4", "4x2", "8x1"));
  EXPECT_THAT(plans_of(memory_candidates(gpt2({"train.batch_size=2"}))),
              ::testing::ElementsAre("1x2 none", "1x2 blocks_save_dots", "1x2 blocks", "2x1 none",
                                     "2x1 blocks_save_dots", "2x1 blocks"));
  EXPECT_THAT(plans_of(memory_candidates(
                  gpt2({"train.batch_size=2", "model.gpt2.remat=\"blocks_save_dots\""}))),
              ::testing::ElementsAre("1x2 blocks_save_dots", "1x2 blocks", "2x1 blocks_save_dots",
                                     "2x1 blocks"));
  // A sequential model with blocks to recompute: none, then its blocks, for each count.
  std::vector<TrainConfig> cnn_plans = memory_candidates(cnn({"train.batch_size=2"}));
  EXPECT_THAT(plans_of(cnn_plans),
              ::testing::ElementsAre("1x2", "1x2 blocks", "2x1", "2x1 blocks"));
  // Every dense or conv2d layer starts a block; the last one (the logits) and the layers
  // before the first are in none.
  std::vector<std::pair<std::string, int64_t>> blocks;
  for (const LayerConfig& layer : cnn_plans[1].model.layers)
    blocks.emplace_back(layer.remat, layer.remat_span);
  using Block = std::pair<std::string, int64_t>;
  const Block none{"none", 1}, nothing3{"save_nothing", 3}, nothing4{"save_nothing", 4},
      nothing2{"save_nothing", 2};
  EXPECT_THAT(blocks, ::testing::ElementsAre(nothing3, none, none, nothing4, none, none, none,
                                             nothing2, none, none));
  // A config's own blocks are kept in every plan, and the search has no choice to make.
  EXPECT_THAT(plans_of(memory_candidates(
                  cnn({"train.batch_size=2", "model.layers[7].remat=save_dot_outputs",
                       "model.layers[7].remat_span=2"}))),
              ::testing::ElementsAre("1x2 blocks", "2x1 blocks"));
}

// A made-up planner: activations that shrink with the micro-batch and with recomputation,
// plus the pairwise tree's gradient sums, which grow with log2 of the count. For 64 rows:
// 74000, 45000, 32000, 27000, 26000, 27000 (1 to 32 micro-batches).
int64_t made_up_peak(const TrainConfig& c) {
  int64_t activations = 1000 * c.train.batch_size;
  if (c.model.kind == "gpt2" && c.model.gpt2.remat == "blocks_save_dots") activations /= 2;
  if (c.model.kind == "gpt2" && c.model.gpt2.remat == "blocks") activations /= 4;
  if (any_remat(c)) activations /= 2;
  int64_t levels = 0;
  while ((int64_t{1} << levels) < c.train.accumulate) ++levels;
  return 10000 + activations + 3000 * levels;
}

TEST(FitMemoryBudget, TakesTheFirstPlanThatFits) {
  // 64 rows: 74000 in one batch, 2 x 32: 45000, 4 x 16: 32000.
  MemoryFit fit = fit_memory_budget(sequential({"train.batch_size=64"}), 40000, 5000, made_up_peak);
  EXPECT_EQ(fit.config.train.accumulate, 4);
  EXPECT_EQ(fit.config.train.batch_size, 16);
  ASSERT_EQ(fit.tried.size(), 3u);
  EXPECT_EQ(fit.tried[0].planned_peak_bytes, 74000);
  EXPECT_EQ(fit.tried[2].planned_peak_bytes, 32000);
  EXPECT_THAT(fit.to_string(), HasSubstr("-> accumulate 4 x batch_size 16"));
  EXPECT_THAT(fit.to_string(), HasSubstr("over"));
  // A GPT-2 recomputes before it splits the batch: blocks_save_dots is 42000.
  MemoryFit remat = fit_memory_budget(gpt2({"train.batch_size=64"}), 44000, 5000, made_up_peak);
  EXPECT_EQ(remat.config.train.accumulate, 1);
  EXPECT_EQ(remat.config.model.gpt2.remat, "blocks_save_dots");
  // So does a sequential model with blocks to recompute, and the table says which plan.
  MemoryFit blocks = fit_memory_budget(cnn({"train.batch_size=64"}), 44000, 5000, made_up_peak);
  EXPECT_EQ(blocks.config.train.accumulate, 1);
  EXPECT_EQ(blocks.config.model.layers[0].remat, "save_nothing");
  EXPECT_THAT(blocks.to_string(), HasSubstr("-> accumulate 1 x batch_size 64, remat blocks"));
  EXPECT_THAT(blocks.to_string(), HasSubstr("accumulate 1 x batch_size 64, remat none"));
  // A budget the first plan meets changes nothing.
  MemoryFit ample =
      fit_memory_budget(sequential({"train.batch_size=64"}), 1 << 30, 5000, made_up_peak);
  EXPECT_EQ(ample.config, sequential({"train.batch_size=64"}));
}

TEST(FitMemoryBudget, APlanThatCannotRunIsRecordedAndSkipped) {
  auto odd = [](const TrainConfig& c) -> int64_t {
    if (c.train.accumulate == 2) fail(kUnknownSite, "the last batch does not split");
    return made_up_peak(c);
  };
  MemoryFit fit = fit_memory_budget(sequential({"train.batch_size=64"}), 40000, 5000, odd);
  EXPECT_EQ(fit.config.train.accumulate, 4);
  EXPECT_EQ(fit.tried[1].not_possible, "the last batch does not split");
  EXPECT_THAT(fit.to_string(), HasSubstr("cannot run: the last batch does not split"));
}

TEST(FitMemoryBudget, RefusesWhatNoPlanCanMeet) {
  TrainConfig config = sequential({"train.batch_size=64"});
  kiln::testing::fails_with(
      [&] { fit_memory_budget(config, 4000, 5000, made_up_peak); },
      {"train.memory_budget = 3.91 KiB is less than the model's parameters and optimizer state "
       "alone (4.88 KiB)"});
  int compiled = 0;
  auto counting = [&](const TrainConfig& c) {
    ++compiled;
    return made_up_peak(c);
  };
  // 32 micro-batches (27000) are no lower than 16 (26000): the search stops there.
  std::string error;
  try {
    fit_memory_budget(config, 12000, 5000, counting);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_THAT(error, HasSubstr("no plan's train step fits"));
  EXPECT_THAT(error, HasSubstr("more micro-batches stopped lowering the planned peak (25.4 KiB "
                               "with 16, 26.4 KiB with 32)"));
  EXPECT_THAT(error, HasSubstr("accumulate 1 x batch_size 64"));
  EXPECT_THAT(error, HasSubstr("raise train.memory_budget"));
  EXPECT_EQ(compiled, 6) << "1 to 32 micro-batches, not 64";
}

}  // namespace
}  // namespace kiln::train
