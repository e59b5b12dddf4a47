// The profiler's outputs from a real compiled train step: the Chrome trace has the fields
// the Trace Event Format requires of each phase (formats.md section 3) and its slices nest
// per thread; the roofline accounts for every kernel that ran, with costs from the cost
// rules; the memory estimate's parts add up to the plan's and find the saved activations.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <vector>

#include "base/trace_events.h"
#include "kiln/kiln.h"
#include "profile/chrome_trace.h"
#include "profile/memory_report.h"
#include "profile/roofline.h"

namespace kiln::profile {
namespace {

Array mlp_loss(const std::vector<Array>& p, const Array& x, const Array& y) {
  Array h = maximum(matmul(x, p[0]) + p[1], scalar(0.0));
  Array out = matmul(h, p[2]) + p[3];
  return mean((out - y) * (out - y));
}

struct Traced {
  Compiled compiled;
  trace::Recording recording;
  int64_t param_bytes = 0;
};

Traced trace_train_steps(int steps) {
  auto step = jit(value_and_grad(mlp_loss), JitOptions().named("train_step"));
  std::vector<Array> params = {random::normal(random::key(1), {64, 32}), zeros({32}),
                               random::normal(random::key(2), {32, 8}), zeros({8})};
  Array x = random::normal(random::key(3), {16, 64});
  Array y = random::normal(random::key(4), {16, 8});
  step(params, x, y);  // compiled outside the recording
  synchronize_all();
  trace::begin_recording();
  for (int i = 0; i < steps; ++i) {
    auto [loss, grads] = step(params, x, y);
    (void)loss.item<float>();  // a host synchronization, on the training loop's track
  }
  synchronize_all();
  Traced traced{step.compile(params, x, y), trace::end_recording(), 0};
  for (const Array& p : params) traced.param_bytes += p.size_bytes();
  return traced;
}

MachinePeaks test_peaks() {
  MachinePeaks peaks;
  peaks.gemm_gflops = 100;
  peaks.bandwidth_gbs = 10;
  peaks.how = "fixed for the test";
  return peaks;
}

TEST(ChromeTrace, EveryEventHasTheFieldsItsPhaseRequiresAndSlicesNestPerThread) {
  Traced traced = trace_train_steps(2);
  nlohmann::json json = chrome_trace(traced.recording, {{"what", "test"}}, "kiln test");
  ASSERT_TRUE(json["traceEvents"].is_array());
  EXPECT_EQ(json["metadata"]["what"], "test");
  EXPECT_EQ(json["metadata"]["dropped_events"], 0);
  std::map<int, std::vector<std::pair<double, double>>> slices;  // tid -> (ts, end)
  int kernels = 0, counters = 0, names = 0;
  for (const auto& event : json["traceEvents"]) {
    ASSERT_TRUE(event.contains("ph") && event.contains("name")) << event;
    ASSERT_TRUE(event["ph"].is_string() && event["ph"].get<std::string>().size() == 1) << event;
    auto uint32_field = [&](const char* key) {
      return event.contains(key) && event[key].is_number_integer() &&
             event[key].get<int64_t>() >= 0 && event[key].get<int64_t>() <= 0xFFFFFFFFll;
    };
    ASSERT_TRUE(uint32_field("pid")) << event;
    ASSERT_TRUE(event["name"].is_string() && !event["name"].get<std::string>().empty()) << event;
    std::string phase = event["ph"];
    if (phase == "M") {
      const auto& args = event.at("args");
      ASSERT_TRUE((args.contains("name") && args.at("name").is_string()) ||
                  (args.contains("sort_index") && args.at("sort_index").is_number()))
          << event;
      names += event["name"] == "thread_name";
      continue;
    }
    ASSERT_TRUE(event.contains("ts") && event["ts"].is_number() && event["ts"].get<double>() >= 0)
        << event;
    if (phase == "X") {
      ASSERT_TRUE(event.contains("dur") && event["dur"].is_number() &&
                  event["dur"].get<double>() >= 0)
          << event;
      ASSERT_TRUE(uint32_field("tid")) << event;
      kernels += event["cat"] == "kernel";
      slices[event["tid"].get<int>()].push_back(
          {event["ts"].get<double>(), event["ts"].get<double>() + event["dur"].get<double>()});
    } else if (phase == "C") {
      ASSERT_TRUE(event.contains("args") && !event["args"].empty()) << event;
      for (const auto& [key, value] : event["args"].items()) ASSERT_TRUE(value.is_number());
      ++counters;
    } else {
      FAIL() << "unexpected phase " << event;
    }
  }
  EXPECT_GT(kernels, 0);
  EXPECT_GT(counters, 0);  // live bytes
  EXPECT_GE(names, 2);     // the training loop (host syncs) and the device
  // Slices on one thread either nest or follow one another (Perfetto needs that for X).
  for (auto& [tid, spans] : slices) {
    std::sort(spans.begin(), spans.end());
    std::vector<double> open_ends;
    for (const auto& [start, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= start) open_ends.pop_back();
      if (!open_ends.empty()) {
        ASSERT_LE(end, open_ends.back() + 1e-3) << "tid " << tid;
      }
      open_ends.push_back(end);
    }
  }
}

TEST(Roofline, AccountsForEveryKernelOfTheStepWithItsCostRuleCost) {
  const int steps = 3;
  Traced traced = trace_train_steps(steps);
  const detail::Executable& executable = *traced.compiled.executable();
  Roofline roofline = measure_roofline(executable, traced.recording, steps, 1e-3, test_peaks());
  ASSERT_FALSE(roofline.rows.empty());
  double flops = 0;
  for (const RooflineRow& row : roofline.rows) {
    EXPECT_DOUBLE_EQ(row.calls, 1.0) << row.name;
    EXPECT_GT(row.measured_s, 0) << row.name;
    EXPECT_TRUE(row.bound == "compute" || row.bound == "memory" || row.bound == "overhead");
    Cost cost = executable.step_cost(static_cast<size_t>(row.step));
    EXPECT_DOUBLE_EQ(row.flops, cost.flops);
    EXPECT_DOUBLE_EQ(row.attainable_s, std::max(cost.flops / 100e9, cost.bytes() / 10e9));
    flops += row.flops;
  }
  for (size_t i = 1; i < roofline.rows.size(); ++i) {
    EXPECT_GE(roofline.rows[i - 1].measured_s, roofline.rows[i].measured_s);
  }
  // Every step that does work ran once per train step: the rows cover the program's FLOPs.
  Cost program = cost_analysis(traced.compiled.program()).total;
  EXPECT_NEAR(flops, program.flops, 1e-6 * program.flops);
  nlohmann::json json = roofline.to_json(3);
  EXPECT_EQ(json["top"].size(), 3u);
  EXPECT_EQ(json["kernels"], roofline.rows.size());
  EXPECT_DOUBLE_EQ(json["ridge_flops_per_byte"], 10.0);
}

TEST(Roofline, TheBoundIsTheLargerTermUnlessNeitherExplainsTheTime) {
  MachinePeaks peaks = test_peaks();                              // ridge at 10 FLOPs per byte
  EXPECT_EQ(roofline_bound(1e9, 1e6, 0.011, peaks), "compute");   // 10 ms of FLOPs
  EXPECT_EQ(roofline_bound(1e6, 1e8, 0.011, peaks), "memory");    // 10 ms of bytes
  EXPECT_EQ(roofline_bound(1e6, 1e6, 0.011, peaks), "overhead");  // 0.1 ms of work in 11 ms
  EXPECT_EQ(roofline_bound(0, 0, 0, peaks), "overhead");
}

TEST(MemoryReport, ThePartsAddUpToThePlanAndTheBackwardPassReadsSavedActivations) {
  Traced traced = trace_train_steps(1);
  const detail::Executable& executable = *traced.compiled.executable();
  MemoryEstimate estimate = estimate_memory(executable, traced.param_bytes, 0);
  const MemoryPlanReport& plan = executable.memory_plan().report;
  EXPECT_EQ(estimate.total(), plan.peak_bytes);
  EXPECT_EQ(estimate.params_bytes + estimate.other_input_bytes, plan.argument_bytes);
  EXPECT_EQ(estimate.saved_activation_bytes + estimate.temporary_bytes, estimate.arena_bytes);
  EXPECT_GT(estimate.saved_activation_bytes, 0);  // h = relu(x w + b) is read by the backward pass
  nlohmann::json json = memory_report_json(estimate, plan.peak_bytes + 100);
  EXPECT_EQ(json["observed_minus_estimate_bytes"], 100);
  EXPECT_EQ(json["estimate"]["total"], plan.peak_bytes);
}

TEST(MemoryReport, BackwardEquationsAreThoseUnderAGradScope) {
  EXPECT_TRUE(in_backward_pass("grad"));
  EXPECT_TRUE(in_backward_pass("grad/mlp/dense1"));
  EXPECT_TRUE(in_backward_pass("train_step/grad"));
  EXPECT_FALSE(in_backward_pass("gradient_clip"));
  EXPECT_FALSE(in_backward_pass(""));
}

}  // namespace
}  // namespace kiln::profile
