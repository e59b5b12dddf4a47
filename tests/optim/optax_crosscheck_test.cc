// kiln's optimizers and schedules against the real Optax (the pinned peers, docs/peers.md):
// each optimizer runs 200 steps on the fixture's two-leaf tree and a fixed stream of
// gradients, and every schedule is evaluated at steps 0..250. This test writes the specs,
// the inputs and kiln's results to one JSON file; tests/tools/optax_crosscheck.py builds
// the same optimizers and schedules with Optax from the specs, runs them on the same inputs
// and compares, within the tolerances it states.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/optim.h"
#include "optim/optim_fixture.h"
#include "support/peer_check.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kCrossSteps = 200;
constexpr int kScheduleSteps = 250;

// The schedule a spec describes (the same keys the Python side reads).
optim::Schedule schedule_of(const json& spec) {
  std::string kind = spec["kind"];
  if (kind == "constant") return optim::constant(spec["value"]);
  if (kind == "linear") return optim::linear(spec["init"], spec["end"], spec["steps"]);
  if (kind == "cosine_decay") {
    return optim::cosine_decay(spec["init"], spec["decay_steps"], spec["alpha"]);
  }
  if (kind == "warmup_cosine") {
    return optim::warmup_cosine(spec["peak"], spec["warmup_steps"], spec["decay_steps"],
                                spec["end"]);
  }
  if (kind == "piecewise_constant") {
    return optim::piecewise_constant(spec["boundaries"].get<std::vector<int64_t>>(),
                                     spec["values"].get<std::vector<double>>());
  }
  if (kind == "exponential") {
    return optim::exponential(spec["init"], spec["rate"], spec["transition_steps"],
                              spec["staircase"]);
  }
  ADD_FAILURE() << "unknown schedule " << kind;
  return optim::constant(0);
}

optim::GradientTransformation optimizer_of(const json& spec) {
  std::string kind = spec["kind"];
  optim::Schedule lr = schedule_of(spec["lr"]);
  if (kind == "sgd") return optim::sgd(lr);
  if (kind == "momentum") return optim::momentum(lr, spec["beta"], spec["nesterov"]);
  optim::AdamOptions adam{
      .b1 = spec.value("b1", 0.9), .b2 = spec.value("b2", 0.999), .eps = spec.value("eps", 1e-8)};
  if (kind == "adam") return optim::adam(lr, adam);
  if (kind == "adamw") return optim::adamw(lr, spec["weight_decay"], adam);
  if (kind == "rmsprop") return optim::rmsprop(lr, spec["decay"], spec["eps"]);
  if (kind == "clipped_sgd") {
    return optim::chain({optim::clip_by_global_norm(spec["max_norm"]), optim::sgd(lr)});
  }
  ADD_FAILURE() << "unknown optimizer " << kind;
  return optim::sgd(lr);
}

json constant_lr(double value) {
  return {{"kind", "constant"}, {"value", value}};
}

std::vector<json> schedule_specs() {
  return {
      constant_lr(0.01),
      {{"kind", "linear"}, {"init", 0.1}, {"end", 0.001}, {"steps", 180}},
      {{"kind", "cosine_decay"}, {"init", 0.05}, {"decay_steps", 150}, {"alpha", 0.1}},
      {{"kind", "warmup_cosine"},
       {"peak", 0.02},
       {"warmup_steps", 25},
       {"decay_steps", 200},
       {"end", 0.001}},
      {{"kind", "piecewise_constant"}, {"boundaries", {50, 120}}, {"values", {0.1, 0.05, 0.01}}},
      {{"kind", "exponential"},
       {"init", 0.1},
       {"rate", 0.5},
       {"transition_steps", 40},
       {"staircase", false}},
      {{"kind", "exponential"},
       {"init", 0.1},
       {"rate", 0.5},
       {"transition_steps", 40},
       {"staircase", true}},
  };
}

std::vector<json> optimizer_specs() {
  json warmup = schedule_specs()[3];
  return {
      {{"kind", "sgd"}, {"lr", constant_lr(0.05)}},
      {{"kind", "momentum"}, {"lr", constant_lr(0.05)}, {"beta", 0.9}, {"nesterov", false}},
      {{"kind", "momentum"}, {"lr", constant_lr(0.05)}, {"beta", 0.9}, {"nesterov", true}},
      {{"kind", "adam"}, {"lr", constant_lr(0.01)}},
      {{"kind", "adam"}, {"lr", warmup}, {"b1", 0.8}, {"b2", 0.99}, {"eps", 1e-6}},
      {{"kind", "adamw"}, {"lr", constant_lr(0.01)}, {"weight_decay", 0.05}},
      {{"kind", "rmsprop"}, {"lr", constant_lr(0.01)}, {"decay", 0.99}, {"eps", 1e-8}},
      {{"kind", "clipped_sgd"}, {"lr", constant_lr(0.05)}, {"max_norm", 0.5}},
  };
}

// The fixture's gradient formula, extended to any step.
json gradient_stream() {
  json stream = json::array();
  for (int step = 0; step < kCrossSteps; ++step) stream.push_back(grads_at(step));
  return stream;
}

TEST(OptaxCrosscheck, OptimizersAndSchedulesMatchOptax) {
  json record = {{"params", initial_params()}, {"grads", gradient_stream()}};
  for (const json& spec : optimizer_specs()) {
    optim::GradientTransformation opt = optimizer_of(spec);
    Tree params = tree_of(initial_params());
    Tree state = opt.init(params);
    for (int step = 0; step < kCrossSteps; ++step) {
      auto [updates, next] = opt.update(tree_of(grads_at(step)), state, params);
      params = optim::apply_updates(params, updates);
      state = next;
    }
    record["optimizers"].push_back({{"spec", spec}, {"params", flat(params)}});
  }
  for (const json& spec : schedule_specs()) {
    optim::Schedule schedule = schedule_of(spec);
    std::vector<double> values;
    for (int step = 0; step <= kScheduleSteps; ++step) {
      values.push_back(optim::schedule_value(schedule, step));
    }
    record["schedules"].push_back({{"spec", spec}, {"values", values}});
  }
  PeerReport peer = run_peer_check("optax_crosscheck.py", record);
  const std::string& report = peer.text;
  EXPECT_EQ(peer.status, 0) << report;
  EXPECT_THAT(report, ::testing::HasSubstr("0 failed")) << report;
  std::cout << report;
}

}  // namespace
}  // namespace kiln::testing
