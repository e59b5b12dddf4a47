// The mistakes users make with optimizers and schedules: arguments out of range at
// construction (naming the optimizer and the argument), gradients that do not match the
// state (naming the first differing path), misuse of chain and apply_updates.
#include <gtest/gtest.h>

#include "optim/optim_fixture.h"
#include "support/errors.h"

namespace kiln::testing {
namespace {

using optim::constant;

TEST(OptimErrors, HyperparametersOutOfRange) {
  EXPECT_TRUE(fails_with([] { constant(-0.1); }, {"constant: value must be >= 0, got -0.1"}));
  EXPECT_TRUE(fails_with([] { optim::sgd([](const Array&) { return scalar(-1.0); }); },
                         {"sgd: learning_rate must be finite and >= 0", "gives -1 at step 0"}));
  EXPECT_TRUE(fails_with([] { optim::sgd(nullptr); }, {"sgd: learning_rate is an empty"}));
  EXPECT_TRUE(fails_with([] { optim::adam([](const Array&) { return zeros({2}); }); },
                         {"adam: the learning-rate schedule returned f32[2]", "f32 scalar"}));
  EXPECT_TRUE(fails_with([] { optim::adamw(constant(1e-3), -0.01); },
                         {"adamw: weight_decay must be >= 0, got -0.01"}));
  optim::AdamOptions options;
  options.eps = 0;
  EXPECT_TRUE(
      fails_with([&] { optim::adam(constant(1e-3), options); }, {"adam: eps must be > 0, got 0"}));
  options = {};
  options.b1 = 1.0;
  EXPECT_TRUE(fails_with([&] { optim::adamw(constant(1e-3), 0.01, options); },
                         {"adamw: b1 must be in [0, 1), got 1"}));
  options = {};
  options.b2 = -0.5;
  EXPECT_TRUE(fails_with([&] { optim::adam(constant(1e-3), options); },
                         {"adam: b2 must be in [0, 1), got -0.5"}));
  options = {};
  options.b2 = std::nan("");
  EXPECT_TRUE(fails_with([&] { optim::adam(constant(1e-3), options); },
                         {"adam: b2 must be a finite number"}));
  EXPECT_TRUE(fails_with([] { optim::momentum(constant(0.1), 1.0); },
                         {"momentum: beta must be in [0, 1), got 1"}));
  EXPECT_TRUE(fails_with([] { optim::nesterov(constant(0.1), -0.1); },
                         {"nesterov: beta must be in [0, 1)"}));
  EXPECT_TRUE(fails_with([] { optim::rmsprop(constant(0.1), 1.5); },
                         {"rmsprop: decay must be in [0, 1), got 1.5"}));
  EXPECT_TRUE(
      fails_with([] { optim::rmsprop(constant(0.1), 0.9, -1e-8); }, {"rmsprop: eps must be > 0"}));
  EXPECT_TRUE(fails_with([] { optim::clip_by_global_norm(0); },
                         {"clip_by_global_norm: max_norm must be > 0, got 0"}));
  EXPECT_TRUE(fails_with([] { optim::clip(-1); }, {"clip: max_abs must be > 0, got -1"}));
}

TEST(OptimErrors, SchedulesOutOfRange) {
  EXPECT_TRUE(fails_with(
      [] {
        optim::piecewise_constant({10, 20}, {1.0, 0.5});
      },
      {"piecewise_constant: 2 boundaries need 3 values, got 2"}));
  EXPECT_TRUE(fails_with(
      [] {
        optim::piecewise_constant({10, 5}, {1.0, 0.5, 0.1});
      },
      {"piecewise_constant: boundaries must be sorted",
       "boundaries[1] = 5 comes after boundaries[0] = 10"}));
  EXPECT_TRUE(fails_with(
      [] {
        optim::piecewise_constant({10}, {1.0, -0.5});
      },
      {"piecewise_constant: values[1] must be >= 0"}));
  EXPECT_TRUE(
      fails_with([] { optim::warmup_cosine(1e-3, 100, 100); },
                 {"warmup_cosine: decay_steps (100) must be greater than warmup_steps (100)"}));
  EXPECT_TRUE(fails_with([] { optim::warmup_cosine(1e-3, -1, 100); },
                         {"warmup_cosine: warmup_steps must be >= 0, got -1"}));
  EXPECT_TRUE(
      fails_with([] { optim::linear(1.0, 0.0, 0); }, {"linear: steps must be >= 1, got 0"}));
  EXPECT_TRUE(
      fails_with([] { optim::cosine_decay(1.0, 0); }, {"cosine_decay: decay_steps must be >= 1"}));
  EXPECT_TRUE(fails_with([] { optim::exponential(1.0, 0.0, 10); },
                         {"exponential: rate must be > 0, got 0"}));
  EXPECT_TRUE(fails_with([] { optim::exponential(1.0, 0.5, 0); },
                         {"exponential: transition_steps must be >= 1"}));
  EXPECT_TRUE(fails_with([] { optim::schedule_value(constant(0.1), -3); },
                         {"schedule_value: step must be >= 0, got -3"}));
}

TEST(OptimErrors, GradientsThatDoNotMatchTheState) {
  Tree params = tree_of(initial_params());
  Tree renamed = Tree::dict({{"a", zeros({3})}, {"c", zeros({2, 2})}});
  Tree reshaped = Tree::dict({{"a", zeros({3})}, {"b", zeros({4})}});
  Tree nested = Tree::dict({{"a", zeros({3})}, {"b", Tree::dict({{"w", zeros({2, 2})}})}});
  Tree wrong_dtype = Tree::dict({{"a", zeros({3})}, {"b", zeros({2, 2}, DType::f64)}});
  for (const optim::GradientTransformation& opt :
       {optim::adam(constant(0.1)), optim::adamw(constant(0.1)), optim::momentum(constant(0.1)),
        optim::rmsprop(constant(0.1)), optim::sgd(constant(0.1))}) {
    SCOPED_TRACE(opt.name);
    Tree state = opt.init(params);
    EXPECT_TRUE(fails_with([&] { opt.update(renamed, state, params); },
                           {opt.name + ": gradients vs", "only in the second: b"}));
    EXPECT_TRUE(fails_with([&] { opt.update(nested, state, params); },
                           {opt.name + ": gradients vs", "differ at 'b'"}));
    EXPECT_TRUE(fails_with([&] { opt.update(reshaped, state, params); },
                           {opt.name + ": the gradient at 'b' is f32[4]", "f32[2,2]"}));
    EXPECT_TRUE(fails_with([&] { opt.update(wrong_dtype, state, params); },
                           {opt.name + ": the gradient at 'b' is f64[2,2]", "f32[2,2]"}));
  }
  Tree int_grads = Tree::dict({{"a", zeros({3}, DType::i32)}, {"b", zeros({2, 2})}});
  optim::GradientTransformation adam = optim::adam(constant(0.1));
  EXPECT_TRUE(fails_with([&] { adam.update(int_grads, adam.init(params), params); },
                         {"adam: the gradient at 'a' is i32[3], expected floating-point"}));
}

TEST(OptimErrors, ChainWithAForeignState) {
  Tree params = tree_of(initial_params());
  optim::GradientTransformation opt = optim::chain({optim::clip(1.0), optim::sgd(constant(0.1))});
  Tree adam_state = optim::adam(constant(0.1)).init(params);
  EXPECT_TRUE(
      fails_with([&] { opt.update(params, adam_state, params); },
                 {"chain(clip, sgd): expected a state list of 2 member states, got {count"}));
  optim::GradientTransformation empty;
  empty.name = "half";
  EXPECT_TRUE(fails_with(
      [&] {
        optim::chain({optim::clip(1.0), empty});
      },
      {"chain: transformation 1 ('half') has no init or update"}));
}

TEST(OptimErrors, ApplyUpdatesMismatch) {
  Tree params = tree_of(initial_params());
  Tree reshaped = Tree::dict({{"a", zeros({3})}, {"b", zeros({1, 4})}});
  EXPECT_TRUE(fails_with([&] { optim::apply_updates(params, reshaped); },
                         {"apply_updates: the update at 'b' is f32[1,4], but the parameter is "
                          "f32[2,2]"}));
  Tree missing = Tree::dict({{"a", zeros({3})}});
  EXPECT_TRUE(fails_with([&] { optim::apply_updates(params, missing); },
                         {"apply_updates: params vs updates"}));
  EXPECT_TRUE(fails_with(
      [] {
        optim::global_norm(Tree::dict({{"n", zeros({2}, DType::i32)}}));
      },
      {"global_norm: the leaf at 'n' is i32[2]"}));
}

}  // namespace
}  // namespace kiln::testing
