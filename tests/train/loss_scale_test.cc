// Loss scaling (docs/precision.md, issue 47): the arithmetic of the dynamic scale in the
// compiled step (an overflow is skipped and backs the scale off; good steps in a row grow
// it), f16 training of the MLP with it, how skipped overflows are recorded and counted, and
// the config keys' checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/random.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "train/config_test_util.h"
#include "train/run_test_util.h"
#include "train/train_step.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using run_test::quiet;
using run_test::read_json;
using ::testing::HasSubstr;

// A small classifier, its state, and one batch.
struct Classifier {
  nn::Module model = nn::Sequential({nn::Dense(16), nn::Relu(), nn::Dense(4)});
  optim::GradientTransformation optimizer = optim::adam(1e-2);
  Array x = random::normal(random::key(1), {8, 6});
  Array y = astype(kiln::testing::floats({0, 1, 2, 3, 0, 1, 2, 3}, {8}), DType::i32);
  Array key = random::key(3);

  TrainState state(const LossScaleOptions& scaling) const {
    nn::Variables v = model.init(random::key(2), x.aval());
    return TrainState{v.params, v.state, optimizer.init(v.params), initial_loss_scale(scaling)};
  }
};

StepOptions f16_dynamic(double initial, int64_t growth_interval) {
  StepOptions options;
  options.compute = DType::f16;
  options.loss_scale.mode = "dynamic";
  options.loss_scale.initial = initial;
  options.loss_scale.growth_interval = growth_interval;
  return options;
}

float scale_of(const TrainState& state) {
  return state.loss_scale["scale"].leaf().item<float>();
}
int32_t good_steps_of(const TrainState& state) {
  return state.loss_scale["good_steps"].leaf().item<int32_t>();
}

// A copy of every leaf in buffers of its own (the step donates the state it is given).
Tree copied(const Tree& tree) {
  if (tree.num_leaves() == 0) return tree;
  return tree_map(
      [](const Array& x) {
        HostArray host = x.to_host();
        return from_host_bytes(host.bytes.data(), x.aval(), nullptr, kUnknownSite);
      },
      tree);
}

TrainState copied(const TrainState& s) {
  return TrainState{copied(s.params), copied(s.model_state), copied(s.opt_state),
                    copied(s.loss_scale)};
}

bool same_tree_bits(const Tree& a, const Tree& b) {
  std::vector<Array> x = a.leaves(), y = b.leaves();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!kiln::testing::same_bits(x[i], y[i])) return false;
  }
  return true;
}

TEST(LossScale, AnOverflowIsSkippedAndHalvesTheScale) {
  Classifier s;
  // 2^40 times the loss's cotangent does not fit in f16 (largest 65504): the gradient
  // reaching the f16 activations is infinite.
  StepOptions options = f16_dynamic(std::ldexp(1.0, 40), 2000);
  TrainStep step(s.model, s.optimizer, options);
  TrainState state = s.state(options.loss_scale);
  TrainState before = copied(state);
  StepMetrics m = step.run(state, s.x, s.y, s.key);
  EXPECT_TRUE(std::isfinite(m.loss.item<float>()));
  EXPECT_EQ(m.loss_scale.item<float>(), std::ldexp(1.0f, 40));
  EXPECT_GT(sum(astype(m.nonfinite, DType::i32)).item<int32_t>(), 0);
  // Params and optimizer state (its step count too) as they were; the scale halved.
  EXPECT_TRUE(same_tree_bits(state.params, before.params));
  EXPECT_TRUE(same_tree_bits(state.opt_state, before.opt_state));
  EXPECT_EQ(scale_of(state), std::ldexp(1.0f, 39));
  EXPECT_EQ(good_steps_of(state), 0);
  // Backing off until the gradient fits, then training.
  int skipped = 1;
  while (true) {
    StepMetrics next = step.run(state, s.x, s.y, s.key);
    if (sum(astype(next.nonfinite, DType::i32)).item<int32_t>() == 0) break;
    ++skipped;
    ASSERT_LT(skipped, 40);
  }
  EXPECT_FALSE(same_tree_bits(state.params, before.params));
  EXPECT_EQ(good_steps_of(state), 1);
  EXPECT_EQ(scale_of(state), std::ldexp(1.0f, 40 - skipped));
  EXPECT_EQ(step.stats().compiles, 1) << "the scale is state, not a constant of the program";
}

TEST(LossScale, GrowsAfterTheIntervalOfGoodStepsAndNeverBacksOffBelowOne) {
  Classifier s;
  StepOptions options = f16_dynamic(1024, 3);
  TrainStep step(s.model, s.optimizer, options);
  TrainState state = s.state(options.loss_scale);
  std::vector<float> used, after;
  std::vector<int32_t> good;
  for (int i = 0; i < 7; ++i) {
    used.push_back(step.run(state, s.x, s.y, s.key).loss_scale.item<float>());
    after.push_back(scale_of(state));
    good.push_back(good_steps_of(state));
  }
  EXPECT_THAT(used, ::testing::ElementsAre(1024, 1024, 1024, 2048, 2048, 2048, 4096));
  EXPECT_THAT(after, ::testing::ElementsAre(1024, 1024, 2048, 2048, 2048, 4096, 4096));
  EXPECT_THAT(good, ::testing::ElementsAre(1, 2, 0, 1, 2, 0, 1));
  // At the floor an overflow keeps the scale at 1 (the trainer then treats the gradient as
  // non-finite by itself: train.on_nonfinite). A NaN input makes every gradient NaN.
  StepOptions low = f16_dynamic(1.5, 3);
  TrainStep at_floor(s.model, s.optimizer, low);
  TrainState floor_state = s.state(low.loss_scale);
  Array nan_x = s.x * full({}, std::nan(""));
  at_floor.run(floor_state, nan_x, s.y, s.key);
  EXPECT_EQ(scale_of(floor_state), 1.0f);
  at_floor.run(floor_state, nan_x, s.y, s.key);
  EXPECT_EQ(scale_of(floor_state), 1.0f);
}

// A scale that is a power of two multiplies and divides exactly: f32 with loss scaling
// computes the bits of f32 without it (no gradient here is near f32's limits).
TEST(LossScale, APowerOfTwoScaleInF32ChangesNoBits) {
  Classifier s;
  StepOptions plain;
  StepOptions scaled;
  scaled.loss_scale.mode = "dynamic";
  scaled.loss_scale.growth_interval = 2;
  TrainStep a(s.model, s.optimizer, plain), b(s.model, s.optimizer, scaled);
  TrainState sa = s.state(plain.loss_scale), sb = s.state(scaled.loss_scale);
  for (int i = 0; i < 4; ++i) {
    a.run(sa, s.x, s.y, s.key);
    b.run(sb, s.x, s.y, s.key);
  }
  EXPECT_TRUE(same_tree_bits(sa.params, sb.params));
  EXPECT_TRUE(same_tree_bits(sa.opt_state, sb.opt_state));
  EXPECT_EQ(scale_of(sb), std::ldexp(1.0f, 17));
}

TEST(LossScale, SkippedStepsAdvanceTheScheduleOnlyWhenAsked) {
  Classifier s;
  for (bool advance : {false, true}) {
    SCOPED_TRACE(advance);
    StepOptions options = f16_dynamic(std::ldexp(1.0, 40), 2000);
    options.skipped_steps_advance_schedule = advance;
    TrainStep step(s.model, s.optimizer, options);
    TrainState state = s.state(options.loss_scale);
    TrainState before = copied(state);
    step.run(state, s.x, s.y, s.key);
    EXPECT_TRUE(same_tree_bits(state.params, before.params));
    EXPECT_EQ(state.opt_state["count"].leaf().item<int32_t>(), advance ? 1 : 0);
    EXPECT_TRUE(same_tree_bits(state.opt_state["mu"], before.opt_state["mu"]));
  }
}

// The chunked data-parallel step (a mesh of one device) scales, skips and backs off alike.
TEST(LossScale, TheChunkedStepScalesAlike) {
  Classifier s;
  StepOptions options = f16_dynamic(std::ldexp(1.0, 40), 2000);
  options.data_devices = 1;
  options.chunks = 2;
  TrainStep step(s.model, s.optimizer, options);
  TrainState state = s.state(options.loss_scale);
  TrainState before = copied(state);
  step.run(state, s.x, s.y, s.key);
  EXPECT_TRUE(same_tree_bits(on_one_device(state.params), before.params));
  EXPECT_EQ(on_one_device(state.loss_scale)["scale"].leaf().item<float>(), std::ldexp(1.0f, 39));
}

TEST(F16Training, TrainsTheMlpAndRecordsTheScale) {
  fs::path runs = run_test::fresh_dir("loss_scale", "f16");
  std::vector<std::string> base = {"data.train_limit=2048", "data.test_limit=500",
                                   "train.epochs=1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> all = base;
    all.insert(all.end(), extra.begin(), extra.end());
    return run_test::mlp_example(runs, all);
  };
  TrainSummary f32 = train(with({}), quiet());
  TrainSummary f16 = train(with({"model.compute_dtype=\"f16\""}), quiet());
  EXPECT_NE(f16.params_sha256, f32.params_sha256);
  EXPECT_GT(f16.test_accuracy, 0.6);
  EXPECT_NEAR(f16.test_accuracy, f32.test_accuracy, 0.05);
  EXPECT_EQ(f16.final_loss_scale, 32768);  // 16 steps: no growth, no overflow
  nlohmann::json info = read_json(f16.run_dir / "run.json");
  EXPECT_EQ(info["precision"]["compute"], "f16");
  EXPECT_EQ(info["precision"]["loss_scale"], "dynamic");
  EXPECT_EQ(info["loss_scale"]["final_scale"], 32768);
  EXPECT_EQ(info["loss_scale"]["overflow_steps"], 0);
  for (const nlohmann::json& r : run_test::read_metrics(f16.run_dir)) {
    if (r["kind"] == "train") {
      EXPECT_EQ(r["loss_scale"], 32768);
    }
  }
  // An f32 run writes none of it: its config text, identity and records are as before
  // the keys existed.
  nlohmann::json f32_info = read_json(f32.run_dir / "run.json");
  EXPECT_FALSE(f32_info.contains("loss_scale"));
  EXPECT_FALSE(f32_info["precision"].contains("loss_scale"));
  for (const nlohmann::json& r : run_test::read_metrics(f32.run_dir))
    EXPECT_FALSE(r.contains("loss_scale"));
  std::string f32_text = run_test::read_text(f32.run_dir / "config.toml");
  EXPECT_THAT(f32_text, ::testing::Not(HasSubstr("\nloss_scale")));
  EXPECT_THAT(f32_text, ::testing::Not(HasSubstr("\nskipped_steps_advance_schedule")));
  EXPECT_THAT(run_test::read_text(f16.run_dir / "config.toml"),
              HasSubstr("loss_scale_growth_interval"));
  // A key set away from its default is written, and reads back.
  TrainConfig set = with({"train.loss_scale_growth=4.0"});
  EXPECT_THAT(to_toml(set), HasSubstr("loss_scale_growth = 4.0"));
  EXPECT_EQ(parse_config(to_toml(set), "config.toml").train, set.train);
  fs::remove_all(runs);
}

TEST(F16Training, OverflowsAreSkippedRecordedAndNotFailures) {
  fs::path runs = run_test::fresh_dir("loss_scale", "overflow");
  // 2^30: the first steps overflow f16 and back off to a scale that fits. max_skipped_steps
  // = 1 and on_nonfinite = "stop" (the default): overflows are neither.
  TrainConfig config = run_test::mlp_example(
      runs, {"data.train_limit=2048", "data.test_limit=500", "train.epochs=1",
             "model.compute_dtype=\"f16\"", "train.loss_scale_initial=1073741824.0",
             "train.max_skipped_steps=1"});
  TrainSummary summary = train(config, quiet());
  EXPECT_GT(summary.overflow_steps, 1);
  EXPECT_EQ(summary.skipped_steps, summary.overflow_steps);
  EXPECT_GT(summary.test_accuracy, 0.5);
  int64_t recorded = 0;
  double last_scale = 1073741824.0 * 2;
  for (const nlohmann::json& r : run_test::read_metrics(summary.run_dir)) {
    if (r["kind"] != "nonfinite") continue;
    ++recorded;
    EXPECT_EQ(r["action"], "skipped");
    EXPECT_EQ(r["cause"], "loss_scale_overflow");
    EXPECT_EQ(r["loss_scale"].get<double>(), last_scale / 2) << "each overflow halves the scale";
    last_scale = r["loss_scale"].get<double>();
    EXPECT_FALSE(r["first_nonfinite_gradient"].get<std::string>().empty());
  }
  EXPECT_EQ(recorded, summary.overflow_steps);
  nlohmann::json info = read_json(summary.run_dir / "run.json");
  EXPECT_EQ(info["skipped_steps"], summary.skipped_steps);
  EXPECT_EQ(info["loss_scale"]["overflow_steps"], summary.overflow_steps);
  EXPECT_EQ(info["loss_scale"]["final_scale"].get<double>(), last_scale / 2);
  fs::remove_all(runs);
}

TEST(LossScaleConfig, BadValuesAreRefusedNamingTheKey) {
  using config_test::kOneLayer;
  using config_test::parse_error;
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nloss_scale_backoff = 1.0\n"),
            "config.toml:5:22: train.loss_scale_backoff = 1.0 is out of range; expected a float "
            "in (0, 1)");
  EXPECT_THAT(parse_error(kOneLayer + "[train]\nloss_scale_backoff = 0.0\n"),
              HasSubstr("train.loss_scale_backoff = 0.0 is out of range"));
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nloss_scale_growth = 1.0\n"),
            "config.toml:5:21: train.loss_scale_growth = 1.0 is out of range; expected a float "
            "in (1, 1e+30]");
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nloss_scale_growth_interval = 0\n"),
            "config.toml:5:30: train.loss_scale_growth_interval = 0 is out of range; expected an "
            "integer in [1, 2147483647]");
  EXPECT_THAT(parse_error(kOneLayer + "[train]\nloss_scale_initial = 0.5\n"),
              HasSubstr("train.loss_scale_initial = 0.5 is out of range"));
  EXPECT_THAT(parse_error(kOneLayer + "[train]\nloss_scale = \"static\"\n"),
              HasSubstr("train.loss_scale"));
  // f16 needs loss scaling; f32 and bf16 may have it (a power of two changes no bits).
  EXPECT_THAT(parse_error(kOneLayer + "[model]\ncompute_dtype = \"f16\"\n[train]\nloss_scale = "
                                      "\"none\"\n"),
              HasSubstr("model.compute_dtype = \"f16\" with train.loss_scale = \"none\""));
  EXPECT_EQ(parse_error(kOneLayer + "[model]\ncompute_dtype = \"f16\"\n[train]\nloss_scale = "
                                    "\"fixed\"\n"),
            "");
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nloss_scale = \"dynamic\"\n"), "");
  EXPECT_EQ(resolved_loss_scale(config_test::parse(kOneLayer)), "none");
  EXPECT_EQ(resolved_loss_scale(config_test::parse(kOneLayer + "[model]\ncompute_dtype = "
                                                               "\"f16\"\n")),
            "dynamic");
}

}  // namespace
}  // namespace kiln::train
