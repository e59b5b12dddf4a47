// The train step of an example config, timed, and (--roofline) set beside its roofline
// limit measured in the same run: the step's matrix products timed alone through the
// chosen BLAS (kiln's blocked oneDNN path and oneDNN with its own threads; the faster
// counts), plus the optimizer's bytes at the STREAM bandwidth. Rounds alternate step and
// limit, and the ratio is taken round by round (the machine is noisy).
//
//   build/release/bench/train_step_bench --config examples/fashion_mnist_mlp.toml --roofline
//   build/release/bench/train_step_bench --config examples/fashion_mnist_cnn.toml --json
//
// With --logging, rounds alternate plain steps with steps that each log a metrics record
// the way `kiln train` does (metrics.jsonl, the run catalog, TensorBoard, and an MLflow
// mirror with --mlflow-uri) into a scratch run directory: the step-time ratio per pair of
// rounds, and the time the training thread spends in the logging call itself.
//
//   build/release/bench/train_step_bench --config examples/fashion_mnist_mlp.toml --logging
//
// bench/vs_peers.py runs this against the JAX and PyTorch scripts of the same recipe.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include <time.h>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/compute_pool.h"
#include "kernels/cpu/gemm.h"
#include "kiln/nn/module.h"
#include "kiln/profile.h"
#include "kiln/random.h"
#include "profile/bandwidth.h"
#include "train/builders.h"
#include "train/config.h"
#include "train/run_directory.h"
#include "train/run_tracking.h"
#include "train/train_step.h"

using namespace kiln;

namespace {

using profile::median;

double seconds_of(const std::function<void()>& fn) {
  double start = profile::now_seconds();
  fn();
  return profile::now_seconds() - start;
}

// One dense layer's GEMMs in a train step at batch B: forward x[B,in] w[in,out];
// backward dW = x^T dy, and dX = dy w^T unless it is the first layer.
std::vector<GemmDims> dense_gemms(int64_t batch, int64_t in, int64_t out, bool first) {
  std::vector<GemmDims> gemms;
  gemms.push_back(GemmDims{false, false, batch, out, in, in, out, out});
  gemms.push_back(GemmDims{true, false, in, out, batch, in, out, out});
  if (!first) gemms.push_back(GemmDims{false, true, batch, in, out, out, out, in});
  return gemms;
}

struct GemmBuffers {
  GemmDims dims;
  std::vector<float> a, b, c;
};

// This thread's CPU time: what logging computes, as opposed to the wall time of the call,
// which on a loaded 2-core machine also holds waiting for a core.
double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Rounds of plain steps and of steps that each log a record, alternated ABBA so that a
// drift in the machine's speed falls on both; ratios are per pair of rounds.
nlohmann::json logging_overhead(const std::function<void()>& one_step, int rounds,
                                const train::TrackingConfig& tracking_config) {
  namespace fs = std::filesystem;
  fs::path scratch = fs::temp_directory_path() / fmt::format("kiln-logging-bench-{}", ::getpid());
  fs::remove_all(scratch);
  std::vector<double> ratios, log_us, log_cpu_us, log_share;
  {
    train::RunTracking tracking(tracking_config, scratch);
    train::RunDirectory run =
        train::RunDirectory::create(scratch, "logging_bench", "", std::string(64, '0'), {});
    run.observe(&tracking);
    int64_t step_number = 0;
    auto logged_step = [&](std::vector<double>& logging, std::vector<double>& logging_cpu) {
      one_step();
      double start = profile::now_seconds();
      double cpu_start = thread_cpu_seconds();
      track::MetricsLine line;
      line.kind = "train";
      line.step = ++step_number;
      line.epoch = 1;
      line.values = {
          {"loss", 0.5}, {"accuracy", 0.8}, {"lr", 1e-3}, {"step_ms", 9.5}, {"data_wait_ms", 0.01}};
      run.append_metrics(std::move(line));
      logging_cpu.push_back(thread_cpu_seconds() - cpu_start);
      logging.push_back(profile::now_seconds() - start);
    };
    constexpr int kSteps = 30;
    for (int round = 0; round < rounds; ++round) {
      std::vector<double> plain, logged, logging, logging_cpu;
      auto time_plain = [&] {
        for (int i = 0; i < kSteps; ++i) plain.push_back(seconds_of(one_step));
      };
      auto time_logged = [&] {
        for (int i = 0; i < kSteps; ++i) {
          logged.push_back(seconds_of([&] { logged_step(logging, logging_cpu); }));
        }
      };
      if (round % 2 == 0) {
        time_plain();
        time_logged();
      } else {
        time_logged();
        time_plain();
      }
      ratios.push_back(median(logged) / median(plain));
      log_us.push_back(1e6 * median(logging));
      log_cpu_us.push_back(1e6 * median(logging_cpu));
      log_share.push_back(median(logging) / median(plain));
    }
    run.info().status = "completed";
    run.write_info();
    tracking.finish();
  }
  fs::remove_all(scratch);
  return {{"logged_over_plain", ratios},
          {"median_logged_over_plain", median(ratios)},
          {"logging_call_us", log_us},
          {"median_logging_call_us", median(log_us)},
          {"logging_call_cpu_us", log_cpu_us},
          {"median_logging_call_cpu_us", median(log_cpu_us)},
          {"median_logging_share_of_step", median(log_share)}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the train step of an example config (and its roofline limit)"};
  std::string config_path = "examples/fashion_mnist_mlp.toml";
  int steps = 60, warmup = 10, rounds = 7;
  bool roofline = false, json = false, logging = false;
  std::string mlflow_uri;
  app.add_option("--config", config_path, "Training config (its model, optimizer, batch size)");
  app.add_option("--steps", steps, "Timed steps (without --roofline)");
  app.add_option("--warmup", warmup, "Steps run before timing (the first one compiles)");
  app.add_option("--rounds", rounds, "Alternating step/limit rounds (with --roofline)");
  app.add_flag("--roofline", roofline,
               "Compare with the GEMMs + optimizer bytes limit (dense models)");
  app.add_flag("--logging", logging,
               "Compare steps that log a metrics record (catalog, TensorBoard) with plain ones");
  app.add_option("--mlflow-uri", mlflow_uri, "With --logging, mirror to this MLflow server too");
  app.add_flag("--json", json, "One JSON line instead of text");
  std::vector<std::string> overrides;
  app.add_option("--set", overrides,
                 "Override a config key, as in `kiln train` (e.g. train.flush_denormals=false)");
  CLI11_PARSE(app, argc, argv);

  train::TrainConfig config = train::load_config(config_path, overrides);
  int64_t batch = config.train.batch_size;
  nn::Module model = train::build_model(config.model);
  AbstractValue input(Shape{batch, 28, 28, 1}, DType::f32);
  nn::Variables variables = model.init(random::key(0), input);
  optim::GradientTransformation optimizer = train::build_optimizer(config.optim, 100000);
  train::TrainState state{variables.params, variables.state, optimizer.init(variables.params)};
  train::StepOptions step_options;
  step_options.flush_denormals = config.train.flush_denormals;
  // --set privacy.enabled=true: the DP-SGD step on a batch of batch_size real examples (a
  // run's Poisson batches carry padding rows besides: docs/privacy.md).
  const bool private_step = config.privacy.enabled;
  if (private_step) {
    step_options.masked = true;
    step_options.privacy =
        train::StepOptions::Privacy{config.privacy.clip_norm, config.privacy.noise_multiplier,
                                    static_cast<double>(batch), config.privacy.examples_per_chunk};
  }
  train::TrainStep step(model, optimizer, step_options);
  Array images = random::uniform(random::key(1), input.shape);
  // Speed does not depend on the label values: 0, 1, ..., 9, 0, 1, ...
  std::vector<int32_t> label_values(static_cast<size_t>(batch));
  for (size_t i = 0; i < label_values.size(); ++i) label_values[i] = static_cast<int32_t>(i % 10);
  Array labels = from_host<int32_t>(label_values, Shape{batch});
  Array key = random::key(3);
  Array mask = private_step ? full({batch}, 1.0) : Array();
  auto one_step = [&] { step.run(state, images, labels, key, mask).loss.block_until_ready(); };

  double first_ms = 1e3 * seconds_of(one_step);
  for (int i = 1; i < warmup; ++i) one_step();
  nlohmann::json out = {{"config", config_path},
                        {"batch", batch},
                        {"first_step_ms", first_ms},
                        {"parameters", nn::parameter_count(state.params)}};

  if (logging) {
    train::TrackingConfig tracking = config.tracking;  // --set tracking.catalog=false etc.
    if (!mlflow_uri.empty()) tracking.mlflow_uri = mlflow_uri;
    tracking.wait_seconds = 2;
    out["logging"] = logging_overhead(one_step, rounds, tracking);
    out["median_step_ms"] = nullptr;
  } else if (!roofline) {
    std::vector<double> samples;
    for (int i = 0; i < steps; ++i) samples.push_back(seconds_of(one_step));
    profile::Timing timing = profile::summarize(first_ms / 1e3, std::move(samples));
    out["median_step_ms"] = 1e3 * timing.median_s;
    out["p10_step_ms"] = 1e3 * timing.p10_s;
    out["p90_step_ms"] = 1e3 * timing.p90_s;
  } else {
    // The dense layers' shapes, read from the params (kernel [in, out]).
    std::vector<GemmBuffers> gemms;
    bool first = true;
    for (const auto& [path, leaf] : variables.params.leaves_with_paths()) {
      if (leaf.rank() != 2 || path.find("kernel") == std::string::npos) continue;
      for (GemmDims dims : dense_gemms(batch, leaf.dim(0), leaf.dim(1), first)) {
        int64_t rows_a = dims.trans_a ? dims.k : dims.m, cols_a = dims.trans_a ? dims.m : dims.k;
        int64_t rows_b = dims.trans_b ? dims.n : dims.k, cols_b = dims.trans_b ? dims.k : dims.n;
        dims.lda = cols_a;
        dims.ldb = cols_b;
        dims.ldc = dims.n;
        gemms.push_back(GemmBuffers{dims, std::vector<float>(rows_a * cols_a, 0.5f),
                                    std::vector<float>(rows_b * cols_b, 0.25f),
                                    std::vector<float>(dims.m * dims.n)});
      }
      first = false;
    }
    // AdamW-style optimizers read params, grads and two moments and write three arrays.
    double optimizer_bytes = 7.0 * 4 * static_cast<double>(nn::parameter_count(state.params));
    int64_t stream_n = int64_t{1} << 24;
    std::vector<float> sa(stream_n, 1.0f), sb(stream_n, 2.0f), sc(stream_n);
    ComputePool& pool = compute_pool();
    std::vector<double> step_ms, gemm_ms, stream_gbps, limit_ms, ratios;
    for (int round = 0; round < rounds; ++round) {
      // The previous round's direct sgemm calls leave oneDNN's OpenMP threads spinning for
      // a while (libgomp's spin-wait), stealing one of the two cores from kiln's pool: let
      // them go idle. Then a few untimed steps, since the GEMM and STREAM passes evicted the
      // caches, which is not a training loop's state.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      for (int i = 0; i < 3; ++i) one_step();
      std::vector<double> s;
      for (int i = 0; i < 20; ++i) s.push_back(seconds_of(one_step));
      double step_s = median(s);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      double gemm_s = 0;
      for (GemmBuffers& g : gemms) {
        std::vector<double> kiln_path, direct;
        for (int i = 0; i < 5; ++i) {
          kiln_path.push_back(
              seconds_of([&] { gemm(pool, g.dims, g.a.data(), g.b.data(), g.c.data()); }));
          direct.push_back(
              seconds_of([&] { sgemm_direct(g.dims, g.a.data(), g.b.data(), g.c.data()); }));
        }
        gemm_s += std::min(median(kiln_path), median(direct));
      }
      std::vector<double> stream_s;
      for (int i = 0; i < 5; ++i) {
        stream_s.push_back(seconds_of(
            [&] { profile::stream_add(sa.data(), sb.data(), sc.data(), stream_n, pool); }));
      }
      double bandwidth = 3.0 * 4 * static_cast<double>(stream_n) / median(stream_s);
      double limit_s = gemm_s + optimizer_bytes / bandwidth;
      step_ms.push_back(1e3 * step_s);
      gemm_ms.push_back(1e3 * gemm_s);
      stream_gbps.push_back(bandwidth / 1e9);
      limit_ms.push_back(1e3 * limit_s);
      ratios.push_back(step_s / limit_s);
    }
    out["median_step_ms"] = median(step_ms);
    out["roofline"] = {
        {"gemm_ms", median(gemm_ms)},         {"optimizer_bytes", optimizer_bytes},
        {"stream_gbps", median(stream_gbps)}, {"limit_ms", median(limit_ms)},
        {"step_over_limit", ratios},          {"median_step_over_limit", median(ratios)}};
  }
  JitStats stats = step.stats();
  out["compiles"] = stats.compiles;
  if (json) {
    fmt::print("{}\n", out.dump());
    return 0;
  }
  fmt::print("{} (batch {}, {} parameters)\n", config_path, batch,
             out["parameters"].get<int64_t>());
  if (logging) {
    const auto& l = out["logging"];
    std::string list;
    for (double ratio : l["logged_over_plain"]) list += fmt::format("{:.3f} ", ratio);
    fmt::print("logged step / plain step per pair of rounds: {}(median {:.3f})\n", list,
               l["median_logged_over_plain"].get<double>());
    fmt::print(
        "the logging call on the training thread: median {:.1f} us wall ({:.2f} % of a step), "
        "{:.1f} us of CPU\n",
        l["median_logging_call_us"].get<double>(),
        100 * l["median_logging_share_of_step"].get<double>(),
        l["median_logging_call_cpu_us"].get<double>());
    return 0;
  }
  fmt::print("first step (compiles) {:.1f} ms; median step {:.2f} ms\n", first_ms,
             out["median_step_ms"].get<double>());
  if (roofline) {
    const auto& r = out["roofline"];
    fmt::print(
        "roofline limit {:.2f} ms = GEMMs {:.2f} ms + {:.1f} MB of optimizer traffic at {:.1f} "
        "GB/s\n",
        r["limit_ms"].get<double>(), r["gemm_ms"].get<double>(),
        r["optimizer_bytes"].get<double>() / 1e6, r["stream_gbps"].get<double>());
    std::string list;
    for (double ratio : r["step_over_limit"]) list += fmt::format("{:.2f} ", ratio);
    fmt::print("step / limit per round: {} (median {:.2f})\n", list,
               r["median_step_over_limit"].get<double>());
  }
  return 0;
}
