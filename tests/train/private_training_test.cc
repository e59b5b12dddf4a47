// DP-SGD ([privacy], docs/privacy.md, issue 50): the private step's arithmetic against a
// plain per-example loop (clipping, the sum, the division by the expected batch), its
// noise's scale, padded rows that change nothing; a private run's epsilon per epoch and in
// run.json, the budget that ends it early, and a resumed private run with the bits of the
// uninterrupted one (Poisson draws and noise included); the config's refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/privacy.h"
#include "kiln/random.h"
#include "kiln/transforms.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "train/config_test_util.h"
#include "train/prediction_sums.h"
#include "train/run_test_util.h"
#include "train/train_step.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using run_test::quiet;
using run_test::read_json;
using ::testing::HasSubstr;

// A small classifier and a batch of 8 rows of which the mask keeps 5.
struct Classifier {
  explicit Classifier(int64_t hidden = 16)
      : model(nn::Sequential({nn::Dense(hidden), nn::Activation("tanh"), nn::Dense(4)})) {}
  nn::Module model;
  optim::GradientTransformation optimizer = optim::sgd(1.0);  // new params = params - g
  Array x = random::normal(random::key(1), {8, 6}) * full({}, 3.0);
  Array y = astype(kiln::testing::floats({0, 1, 2, 3, 0, 1, 2, 3}, {8}), DType::i32);
  Array mask = kiln::testing::floats({1, 1, 0, 1, 1, 0, 1, 0}, {8});
  Array key = random::key(3);

  TrainState state() const {
    nn::Variables v = model.init(random::key(2), x.aval());
    return TrainState{v.params, v.state, optimizer.init(v.params), Tree()};
  }
};

StepOptions private_options(double clip, double sigma, double expected, int64_t chunk) {
  StepOptions options;
  options.masked = true;
  options.privacy = StepOptions::Privacy{clip, sigma, expected, chunk};
  return options;
}

// One example's gradient, eagerly, as a user would write it.
Tree example_gradient(const Classifier& s, const Tree& params, int64_t row) {
  Array xi = slice(s.x, {row, 0}, {row + 1, 6});
  Array yi = slice(s.y, {row}, {row + 1});
  return grad([&](const Tree& p) {
    PredictionSums sums =
        prediction_sums(s.model.apply(nn::Variables{p, Tree()}, xi).y, yi, Array());
    return sums.loss_sum / sums.count;
  })(params);
}

double tree_norm(const Tree& t) {
  double total = 0;
  for (const Array& leaf : t.leaves())
    total += sum(square(astype(leaf, DType::f64))).item<double>();
  return std::sqrt(total);
}

// params - new params, leaf by leaf (the gradient an SGD step of rate 1 applied).
std::vector<std::vector<float>> applied(const TrainState& before, const TrainState& after) {
  std::vector<std::vector<float>> out;
  std::vector<Array> a = before.params.leaves(), b = after.params.leaves();
  for (size_t i = 0; i < a.size(); ++i) out.push_back((a[i] - b[i]).to_vector<float>());
  return out;
}

TEST(PrivateStep, ClipsEachExampleSumsTheRealRowsAndDividesByTheExpectedBatch) {
  Classifier s;
  TrainState state = s.state();
  // Per-example gradients and norms by a plain loop; C between the smallest and largest
  // norm, so that some examples are clipped and some are not.
  std::vector<Tree> grads;
  std::vector<double> norms;
  std::vector<float> mask = s.mask.to_vector<float>();
  for (int64_t row = 0; row < 8; ++row) {
    grads.push_back(example_gradient(s, state.params, row));
    if (mask[static_cast<size_t>(row)] > 0) norms.push_back(tree_norm(grads.back()));
  }
  std::vector<double> sorted = norms;
  std::sort(sorted.begin(), sorted.end());
  const double clip = sorted[sorted.size() / 2];
  ASSERT_LT(sorted.front(), clip);
  ASSERT_GT(sorted.back(), clip);
  const double expected = 4;
  std::vector<std::vector<double>> reference;
  for (const Array& leaf : state.params.leaves())
    reference.emplace_back(static_cast<size_t>(leaf.size()), 0.0);
  for (int64_t row = 0; row < 8; ++row) {
    if (mask[static_cast<size_t>(row)] == 0) continue;
    double factor = 1 / std::max(1.0, tree_norm(grads[static_cast<size_t>(row)]) / clip);
    std::vector<Array> leaves = grads[static_cast<size_t>(row)].leaves();
    for (size_t i = 0; i < leaves.size(); ++i) {
      std::vector<float> g = leaves[i].to_vector<float>();
      for (size_t j = 0; j < g.size(); ++j) reference[i][j] += factor * g[j] / expected;
    }
  }
  for (int64_t chunk : {1, 2, 4, 8}) {
    SCOPED_TRACE(chunk);
    // A noise negligible next to the gradients (1e-9 of C).
    TrainStep step(s.model, s.optimizer, private_options(clip, 1e-9, expected, chunk));
    TrainState before = s.state(), after = s.state();
    StepMetrics metrics = step.run(after, s.x, s.y, s.key, s.mask);
    std::vector<std::vector<float>> got = applied(before, after);
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i) {
      for (size_t j = 0; j < got[i].size(); ++j) {
        EXPECT_NEAR(got[i][j], reference[i][j], 1e-5 + 1e-4 * std::abs(reference[i][j]))
            << "leaf " << i << " element " << j;
      }
    }
    // The reported loss is the mean over the real rows.
    double loss_sum = 0;
    Tree p = s.state().params;
    for (int64_t row = 0; row < 8; ++row) {
      if (mask[static_cast<size_t>(row)] == 0) continue;
      Array xi = slice(s.x, {row, 0}, {row + 1, 6});
      Array yi = slice(s.y, {row}, {row + 1});
      loss_sum += prediction_sums(s.model.apply(nn::Variables{p, Tree()}, xi).y, yi, Array())
                      .loss_sum.item<float>();
    }
    EXPECT_NEAR(metrics.loss.item<float>(), loss_sum / 5, 1e-5);
  }
}

TEST(PrivateStep, PaddedRowsChangeNothingAndTheSameKeyGivesTheSameBits) {
  Classifier s;
  StepOptions options = private_options(1.0, 1.0, 4, 4);
  TrainStep step(s.model, s.optimizer, options);
  TrainState a = s.state(), b = s.state(), c = s.state();
  step.run(a, s.x, s.y, s.key, s.mask);
  // Other values in the rows the mask leaves out (rows 2, 5 and 7).
  Array keep = reshape(s.mask, {8, 1});
  Array other_x = s.x * keep + (full({}, 1.0) - keep) * full({8, 6}, 1e3);
  step.run(b, other_x, s.y, s.key, s.mask);
  EXPECT_TRUE(kiln::testing::same_bits(a.params.leaves()[0], b.params.leaves()[0]));
  EXPECT_TRUE(kiln::testing::same_bits(a.params.leaves()[2], b.params.leaves()[2]));
  // Another step key: other noise.
  step.run(c, s.x, s.y, random::key(4), s.mask);
  EXPECT_FALSE(kiln::testing::same_bits(a.params.leaves()[0], c.params.leaves()[0]));
}

TEST(PrivateStep, TheNoiseHasStandardDeviationSigmaTimesClipOverTheExpectedBatch) {
  // sigma x C / expected = 500 per element: the clipped gradients (at most 5 x C / expected
  // = 1.25 in norm over all of them) are lost in it.
  Classifier s(256);
  const double clip = 1, sigma = 2000, expected = 4;
  TrainStep step(s.model, s.optimizer, private_options(clip, sigma, expected, 8));
  TrainState before = s.state(), after = s.state();
  step.run(after, s.x, s.y, s.key, s.mask);
  double n = 0, total = 0, squares = 0;
  for (const std::vector<float>& leaf : applied(before, after)) {
    for (float v : leaf) {
      n += 1;
      total += v;
      squares += static_cast<double>(v) * v;
    }
  }
  ASSERT_GT(n, 2500);
  const double want = sigma * clip / expected;
  double mean = total / n;
  double std = std::sqrt(squares / n - mean * mean);
  // The sample standard deviation of n normal draws is within 4 / sqrt(2n) of the truth
  // (relative) but once in 30,000; the mean within 4 / sqrt(n) standard deviations.
  EXPECT_NEAR(std / want, 1.0, 4 / std::sqrt(2 * n));
  EXPECT_NEAR(mean / want, 0.0, 4 / std::sqrt(n));
}

// 1024 training images, batches of 128 expected (q = 1/8): 8 steps an epoch, 16 in all.
TrainConfig private_run(const fs::path& runs_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {
      "data.train_limit=1024",        "data.test_limit=200",           "train.epochs=2",
      "train.savepoint_every=2",      "train.savepoint_keep_last=100", "privacy.enabled=true",
      "privacy.noise_multiplier=1.1", "privacy.clip_norm=1.0",         "privacy.delta=1e-4",
      "privacy.examples_per_chunk=64"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return run_test::mlp_example(runs_dir, overrides);
}

TEST(PrivateTraining, EpsilonIsReportedEachEpochAndARunLearns) {
  fs::path runs = run_test::fresh_dir("private", "epsilon");
  TrainSummary summary = train(private_run(runs, {"train.savepoint_every=0"}), quiet());
  ASSERT_EQ(summary.steps, 16);
  privacy::StepAccountant accountant(0.125, 1.1, 1e-4);  // q = 128 / 1024
  std::vector<nlohmann::json> evals;
  for (const nlohmann::json& line : run_test::read_metrics(summary.run_dir)) {
    if (line["kind"] == "eval") evals.push_back(line);
  }
  ASSERT_EQ(evals.size(), 2u);
  for (const nlohmann::json& line : evals) {
    int64_t step = line["step"].get<int64_t>();
    EXPECT_DOUBLE_EQ(line["privacy_epsilon"].get<double>(), accountant.after(step).epsilon);
  }
  nlohmann::json record = read_json(summary.run_dir / "run.json")["privacy"];
  EXPECT_EQ(record["steps"], 16);
  EXPECT_DOUBLE_EQ(record["sampling_rate"].get<double>(), 0.125);
  EXPECT_DOUBLE_EQ(record["epsilon"].get<double>(), accountant.after(16).epsilon);
  // The batch's rows: P(Binomial(1024, 1/8) > rows) <= 1e-14, rounded up to the chunk.
  int64_t rows = privacy::poisson_batch_rows(1024, 0.125, 1e-14);
  EXPECT_EQ(record["batch_rows"], (rows + 63) / 64 * 64);
  EXPECT_EQ(record["truncated_examples"], 0);
  // The report's table of it.
  std::string report = run_test::read_text(summary.run_dir / "report.html");
  EXPECT_THAT(report, HasSubstr("Privacy (DP-SGD)"));
  EXPECT_THAT(report, HasSubstr("privacy.epsilon"));
  // Noisy, and only 16 steps, but it learns: twice chance (10 classes, 200 test images).
  EXPECT_GT(summary.test_accuracy, 0.2);
}

TEST(PrivateTraining, TheBudgetStopsTheRunBeforeItWouldBeExceeded) {
  fs::path runs = run_test::fresh_dir("private", "budget");
  privacy::StepAccountant accountant(0.125, 1.1, 1e-4);
  // A budget between the epsilon of 9 and of 10 steps.
  double budget = (accountant.after(9).epsilon + accountant.after(10).epsilon) / 2;
  TrainSummary summary = train(
      private_run(runs, {"train.savepoint_every=0", fmt::format("privacy.max_epsilon={}", budget)}),
      quiet());
  EXPECT_EQ(summary.steps, 9);
  nlohmann::json record = read_json(summary.run_dir / "run.json")["privacy"];
  EXPECT_LE(record["epsilon"].get<double>(), budget);
  EXPECT_EQ(record["steps_within_budget"], 9);
  // A budget one step cannot meet is refused before anything runs.
  EXPECT_TRUE(kiln::testing::fails_with(
      [&] {
        train(private_run(runs, {"privacy.max_epsilon=0.001", "experiment.name=\"tiny\""}),
              quiet());
      },
      {"privacy.max_epsilon = 0.001", "one step already spends"}));
}

TEST(PrivateTraining, ThePldAccountantCountsTheEpsilonAndTheBudget) {
  fs::path runs = run_test::fresh_dir("private", "pld");
  privacy::StepAccountant pld(0.125, 1.1, 1e-4, privacy::Accountant::kPld);
  privacy::StepAccountant rdp(0.125, 1.1, 1e-4);
  // The same guarantee, a smaller epsilon: a budget the RDP epsilon meets for 9 steps and the
  // PLD epsilon for more.
  const double budget = (rdp.after(9).epsilon + rdp.after(10).epsilon) / 2;
  const int64_t pld_steps = pld.steps_within(budget, 16);
  ASSERT_GT(pld_steps, 9);
  TrainSummary summary =
      train(private_run(runs, {"train.savepoint_every=0", "privacy.accountant=\"pld\"",
                               fmt::format("privacy.max_epsilon={}", budget)}),
            quiet());
  EXPECT_EQ(summary.steps, pld_steps);
  nlohmann::json record = read_json(summary.run_dir / "run.json")["privacy"];
  EXPECT_THAT(record["accountant"].get<std::string>(), HasSubstr("PLD"));
  EXPECT_FALSE(record.contains("rdp_order"));
  EXPECT_DOUBLE_EQ(record["epsilon"].get<double>(), pld.after(pld_steps).epsilon);
  EXPECT_LE(record["epsilon"].get<double>(), budget);
  for (const nlohmann::json& line : run_test::read_metrics(summary.run_dir)) {
    if (line["kind"] != "eval") continue;
    EXPECT_DOUBLE_EQ(line["privacy_epsilon"].get<double>(),
                     pld.after(line["step"].get<int64_t>()).epsilon);
  }
  // Written only when not the default, so runs before the key keep their identity.
  TrainConfig on = config_test::parse(config_test::kOneLayer, {"privacy.enabled=true"});
  EXPECT_EQ(identity_toml(on).find("accountant"), std::string::npos);
  TrainConfig by_pld = config_test::parse(config_test::kOneLayer,
                                          {"privacy.enabled=true", "privacy.accountant=\"pld\""});
  EXPECT_NE(identity_toml(by_pld).find("accountant = \"pld\""), std::string::npos);
  EXPECT_EQ(parse_config(to_toml(by_pld), "config.toml").privacy, by_pld.privacy);
}

TEST(PrivateTraining, AResumedPrivateRunHasTheUninterruptedBits) {
  fs::path runs = run_test::fresh_dir("private", "resume");
  TrainSummary straight = train(private_run(runs), quiet());
  ASSERT_EQ(straight.steps, 16);
  for (int64_t step : {4, 8}) {  // mid-epoch, and at an epoch's end
    SCOPED_TRACE(step);
    fs::path copy =
        run_test::killed_copy(straight.run_dir, runs / "resumed" / std::to_string(step), step);
    TrainSummary resumed = resume(copy, {}, quiet());
    EXPECT_EQ(resumed.resumed_from_step, step);
    EXPECT_EQ(resumed.params_sha256, straight.params_sha256);
    EXPECT_EQ(read_json(copy / "run.json")["privacy"]["epsilon"],
              read_json(straight.run_dir / "run.json")["privacy"]["epsilon"]);
  }
}

// On a mesh each device takes its share of the chunks and psum continues their pairwise
// sum; the noise, drawn after the sum from a key every device holds, is added once. So one
// device without a mesh and meshes of 1 and 2 devices give the same bits (4 logical
// devices: this suite runs in the train_data_parallel test).
TEST(DataParallelPrivateTraining, MeshesOfOneAndTwoDevicesGiveTheOneDeviceBits) {
  fs::path runs = run_test::fresh_dir("private", "mesh");
  auto run = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"train.savepoint_every=0", "train.epochs=1"});
    return train(private_run(runs, extra), quiet());
  };
  TrainSummary alone = run({});
  for (const char* devices : {"mesh.data=1", "mesh.data=2"}) {
    SCOPED_TRACE(devices);
    TrainSummary mesh = run({devices});
    nlohmann::json info = read_json(mesh.run_dir / "run.json");
    EXPECT_EQ(info["timing"]["placement"][0]["devices"],
              std::string(devices) == "mesh.data=2" ? "cpu:0,cpu:1" : "cpu:0");
    // The same rows (256: a multiple of 64 rows a chunk times 2 devices).
    EXPECT_EQ(read_json(mesh.run_dir / "run.json")["privacy"]["batch_rows"],
              read_json(alone.run_dir / "run.json")["privacy"]["batch_rows"]);
    EXPECT_EQ(mesh.steps, alone.steps);
    // Noise added on each device, or drawn per device, would not give these bits.
    EXPECT_EQ(mesh.params_sha256, alone.params_sha256);
  }
}

TEST(PrivateTrainingConfig, BadSettingsAreRefusedNamingTheKey) {
  using config_test::kOneLayer;
  using config_test::parse_error;
  auto refused = [](std::vector<std::string> overrides, const std::string& layers = kOneLayer) {
    overrides.insert(overrides.begin(), "privacy.enabled=true");
    return parse_error(layers, overrides);
  };
  EXPECT_THAT(refused({"privacy.noise_multiplier=0"}), HasSubstr("privacy.noise_multiplier"));
  EXPECT_THAT(refused({"privacy.clip_norm=-1"}), HasSubstr("privacy.clip_norm"));
  EXPECT_THAT(refused({"privacy.delta=1"}), HasSubstr("privacy.delta"));
  EXPECT_THAT(refused({"privacy.examples_per_chunk=0"}), HasSubstr("privacy.examples_per_chunk"));
  EXPECT_THAT(refused({"privacy.accountant=\"moments\""}), HasSubstr("privacy.accountant"));
  EXPECT_THAT(refused({"mesh.data=2", "mesh.shard_params=true"}),
              HasSubstr("privacy.enabled = true with mesh.shard_params = true"));
  EXPECT_THAT(refused({"mesh.data=1", "mesh.model=2"}), HasSubstr("mesh.model = 2"));
  EXPECT_THAT(refused({"train.memory_budget=\"1GiB\""}), HasSubstr("train.memory_budget"));
  EXPECT_THAT(refused({"telemetry.every=10"}), HasSubstr("outside the privacy guarantee"));
  EXPECT_THAT(refused({"train.accumulate=2"}), HasSubstr("train.accumulate = 2"));
  EXPECT_THAT(refused({"train.drop_remainder=true"}), HasSubstr("no remainder"));
  EXPECT_THAT(refused({"model.compute_dtype=\"f16\""}), HasSubstr("loss scaling"));
  std::string batch_norm = refused({}, "[[model.layers]]\ntype = \"batch_norm\"\n" + kOneLayer);
  EXPECT_THAT(batch_norm, HasSubstr("model.layers[0] (batch_norm, line "));
  EXPECT_THAT(batch_norm, HasSubstr("batch norm mixes the examples"));
  // Off, the section is not written, so earlier runs keep their config text and identity.
  EXPECT_EQ(to_toml(config_test::parse(kOneLayer)).find("[privacy]"), std::string::npos);
  TrainConfig on = config_test::parse(kOneLayer, {"privacy.enabled=true"});
  EXPECT_NE(identity_toml(on).find("[privacy]"), std::string::npos);
  EXPECT_EQ(parse_config(to_toml(on), "config.toml").privacy, on.privacy);
}

TEST(PrivateTrainingConfig, ABatchLargerThanTheTrainingSetIsRefused) {
  fs::path runs = run_test::fresh_dir("private", "refused");
  EXPECT_TRUE(kiln::testing::fails_with(
      [&] { train(private_run(runs, {"data.train_limit=100"}), quiet()); },
      {"train.batch_size = 128", "100 training examples", "at most 1"}));
}

}  // namespace
}  // namespace kiln::train
