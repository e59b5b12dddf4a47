// Learning-rate schedules against their formulas (computed here in double) at the steps
// that matter: start, inside the warmup, the peak, inside the decay, its end and beyond.
// Schedules compute in f32, so values agree to relative ~1e-6 (absolute near zero).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "optim/optim_fixture.h"

namespace kiln::testing {
namespace {

constexpr double kPi = std::numbers::pi;

void expect_schedule(const optim::Schedule& schedule, int64_t step, double expected, double scale) {
  EXPECT_NEAR(optim::schedule_value(schedule, step), expected, 1e-6 * scale) << "step " << step;
}

TEST(Schedules, Constant) {
  for (int64_t step : {0, 1, 1000}) expect_schedule(optim::constant(0.3), step, 0.3, 0.3);
  Array value = optim::constant(0.3)(scalar(7, DType::i32));
  EXPECT_EQ(value.aval().to_string(), "f32[]");
}

TEST(Schedules, Linear) {
  optim::Schedule s = optim::linear(1.0, 0.1, 10);
  for (int64_t step : {0, 3, 7, 10, 15}) {
    double t = std::min<double>(static_cast<double>(step), 10);
    expect_schedule(s, step, 1.0 + (0.1 - 1.0) * t / 10, 1.0);
  }
  expect_schedule(s, 3, 0.73, 1.0);
  expect_schedule(optim::linear(0.0, 2.0, 4), 2, 1.0, 2.0);  // increasing works too
}

TEST(Schedules, CosineDecay) {
  optim::Schedule s = optim::cosine_decay(0.5, 20, 0.1);
  for (int64_t step : {0, 5, 10, 19, 20, 30}) {
    double t = std::min<double>(static_cast<double>(step), 20);
    double cosine = 0.5 * (1 + std::cos(kPi * t / 20));
    expect_schedule(s, step, 0.5 * ((1 - 0.1) * cosine + 0.1), 0.5);
  }
  expect_schedule(s, 10, 0.5 * (0.9 * 0.5 + 0.1), 0.5);
  expect_schedule(s, 30, 0.05, 0.5);
}

TEST(Schedules, WarmupCosine) {
  // Peak 2 after 10 warmup steps, cosine to 0.1 by step 110.
  optim::Schedule s = optim::warmup_cosine(2.0, 10, 110, 0.1);
  auto formula = [](int64_t step) {
    if (step < 10) return 2.0 * static_cast<double>(step) / 10;
    double t = std::min<double>(static_cast<double>(step - 10), 100);
    return 0.1 + (2.0 - 0.1) * 0.5 * (1 + std::cos(kPi * t / 100));
  };
  for (int64_t step : {0, 1, 5, 9, 10, 11, 60, 109, 110, 200, 100000}) {
    expect_schedule(s, step, formula(step), 2.0);
  }
  // The landmarks, written out.
  expect_schedule(s, 0, 0.0, 2.0);
  expect_schedule(s, 5, 1.0, 2.0);
  expect_schedule(s, 10, 2.0, 2.0);
  expect_schedule(s, 60, 1.05, 2.0);
  expect_schedule(s, 110, 0.1, 2.0);
  expect_schedule(s, 200, 0.1, 2.0);
  // No warmup: the cosine starts at the peak.
  expect_schedule(optim::warmup_cosine(1.0, 0, 10), 0, 1.0, 1.0);
  expect_schedule(optim::warmup_cosine(1.0, 0, 10), 5, 0.5, 1.0);
}

TEST(Schedules, PiecewiseConstant) {
  optim::Schedule s = optim::piecewise_constant({5, 10}, {1.0, 0.5, 0.25});
  std::vector<std::pair<int64_t, double>> expected = {{0, 1.0}, {4, 1.0},   {5, 0.5},
                                                      {9, 0.5}, {10, 0.25}, {100, 0.25}};
  for (auto [step, value] : expected) expect_schedule(s, step, value, 1.0);
  expect_schedule(optim::piecewise_constant({}, {0.7}), 3, 0.7, 1.0);
  // Boundaries beyond the i32 range never trigger.
  expect_schedule(optim::piecewise_constant({int64_t{1} << 40}, {0.7, 0.1}), 1 << 30, 0.7, 1.0);
}

TEST(Schedules, Exponential) {
  optim::Schedule smooth = optim::exponential(2.0, 0.5, 4);
  optim::Schedule stairs = optim::exponential(2.0, 0.5, 4, true);
  for (int64_t step : {0, 2, 4, 7, 12}) {
    double p = static_cast<double>(step) / 4;
    expect_schedule(smooth, step, 2.0 * std::pow(0.5, p), 2.0);
    expect_schedule(stairs, step, 2.0 * std::pow(0.5, std::floor(p)), 2.0);
  }
  expect_schedule(stairs, 7, 1.0, 2.0);
  expect_schedule(smooth, 2, 2.0 * std::sqrt(0.5), 2.0);
}

TEST(Schedules, TraceUnderJitWithoutRecompiling) {
  optim::Schedule s = optim::warmup_cosine(2.0, 10, 110, 0.1);
  auto at = jit([&](const Array& step) { return s(step); });
  for (int step : {0, 5, 10, 60, 200}) {
    EXPECT_EQ(at(scalar(step, DType::i32)).item<double>(), optim::schedule_value(s, step)) << step;
  }
  EXPECT_EQ(at.stats().compiles, 1);
}

// learning_rate(state): the schedule at count - 1, and at count 0 the first step's rate.
TEST(LearningRate, FollowsTheScheduleAsUpdatesHappen) {
  optim::Schedule schedule = optim::linear(1.0, 0.0, 4);
  Tree params = tree_of(initial_params());
  for (const optim::GradientTransformation& opt :
       {optim::sgd(schedule), optim::momentum(schedule), optim::adam(schedule),
        optim::adamw(schedule), optim::rmsprop(schedule),
        optim::chain({optim::clip_by_global_norm(1.0), optim::adam(schedule)})}) {
    SCOPED_TRACE(opt.name);
    Tree state = opt.init(params);
    ASSERT_TRUE(opt.learning_rate(state).has_value());
    EXPECT_EQ(opt.learning_rate(state)->item<double>(), 1.0);
    for (int step = 0; step < 6; ++step) {
      state = opt.update(tree_of(grads_at(step)), state, params).second;
      EXPECT_NEAR(opt.learning_rate(state)->item<double>(), optim::schedule_value(schedule, step),
                  1e-7);
    }
    EXPECT_EQ(opt.learning_rate(state)->item<double>(), 0.0);
  }
}

TEST(LearningRate, ClippingHasNone) {
  Tree params = tree_of(initial_params());
  for (const optim::GradientTransformation& opt :
       {optim::clip(1.0), optim::clip_by_global_norm(1.0), optim::chain({optim::clip(1.0)}),
        optim::chain({})}) {
    EXPECT_FALSE(opt.learning_rate(opt.init(params)).has_value()) << opt.name;
  }
}

}  // namespace
}  // namespace kiln::testing
