// `kiln bench step CONFIG`: the timing report of a short run of CONFIG (docs/profiling.md),
// and `kiln bench machine`: the peak GEMM throughput and memory bandwidth that reports
// divide by.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bench_step.h"
#include "cli/process_age.h"
#include "kiln/error.h"
#include "profile/machine.h"
#include "track/run_info.h"
#include "train/config.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string timing_text(const json& timing) {
  std::string text = "# timing report\n";
  auto line = [&](const char* what, const std::string& value) {
    text += fmt::format("{:<28} {}\n", what, value);
  };
  line("compile",
       fmt::format("{:.3f} s ({} compilation{})", timing["compile_seconds"].get<double>(),
                   timing["compiles"].get<int64_t>(),
                   timing["compiles"].get<int64_t>() == 1 ? "" : "s"));
  line("time to first step",
       fmt::format("{:.3f} s after process start", timing["first_step_seconds"].get<double>()));
  // Where that time went, phase by phase.
  for (const json& phase : timing["startup"]) {
    text += fmt::format("  {:<26} {:.3f} s\n", phase[0].get<std::string>(), phase[1].get<double>());
  }
  const json& step = timing["step_ms"];
  line("steady-state step",
       fmt::format("median {:.3f} ms (p10 {:.3f}, p90 {:.3f}) over {} steps",
                   step["median"].get<double>(), step["p10"].get<double>(),
                   step["p90"].get<double>(), timing["steady_steps"].get<int64_t>()));
  line("examples/s", fmt::format("{:.0f}", timing["examples_per_second"].get<double>()));
  line("data wait",
       fmt::format("{:.2f}% of the training loop", timing["data_wait_percent"].get<double>()));
  line("savepoints", fmt::format("{:.2f}% of the training loop (the training thread's share)",
                                 timing["savepoint_percent"].get<double>()));
  line("host syncs per step", fmt::format("{:.2f}", timing["host_syncs_per_step"].get<double>()));
  int64_t misplaced = timing["misplaced_params"].get<int64_t>();
  line("parameter placement",
       misplaced == 0
           ? fmt::format("all {} as requested", timing["placement"].size())
           : fmt::format("{} of {} NOT as requested", misplaced, timing["placement"].size()));
  for (const json& param : timing["placement"]) {
    text += fmt::format("  {:<26} {:<22} on {:<8} (requested {}){}\n",
                        param["param"].get<std::string>(), param["shape"].get<std::string>(),
                        param["devices"].get<std::string>(), param["requested"].get<std::string>(),
                        param["ok"].get<bool>() ? "" : "  MISPLACED");
  }
  return text;
}

int bench_step(const BenchStepOptions& options) {
  std::vector<std::string> overrides = options.overrides;
  fs::path scratch = fs::temp_directory_path() / fmt::format("kiln-bench-step-{}", ::getpid());
  fs::path runs_dir = options.runs_dir.empty() ? scratch : fs::path(options.runs_dir);
  overrides.push_back(fmt::format("train.max_steps={}", options.steps));
  overrides.push_back(fmt::format("experiment.runs_dir=\"{}\"", runs_dir.string()));
  overrides.push_back("tracking.catalog=false");
  overrides.push_back("tracking.tensorboard=false");
  double started_age = process_age_seconds();
  train::TrainConfig config = train::load_config(options.config, overrides);
  train::TrainOptions train_options;
  train_options.quiet = true;
  train_options.process_start_age_seconds = process_age_seconds();
  train_options.config_seconds = train_options.process_start_age_seconds - started_age;
  train::TrainSummary summary = train::train(config, train_options);
  json timing = json::parse(track::read_run_info(summary.run_dir).section("timing"));
  if (options.json) {
    train::print_best_effort(stdout, timing.dump(2) + "\n");
  } else {
    std::string text = fmt::format("# kiln bench step {} ({} steps of batch {})\n", config.source,
                                   summary.steps, config.train.batch_size);
    text += timing_text(timing);
    if (!options.runs_dir.empty()) text += fmt::format("run: {}\n", summary.run_dir.string());
    train::print_best_effort(stdout, text);
  }
  if (options.runs_dir.empty()) fs::remove_all(scratch);
  return 0;
}

int bench_machine(const BenchMachineOptions& options) {
  bool cached = false;
  profile::MachinePeaks peaks = profile::machine_peaks(options.refresh, &cached);
  if (options.json) {
    json out = peaks.to_json();
    out["cached"] = cached;
    train::print_best_effort(stdout, out.dump(2) + "\n");
    return 0;
  }
  train::print_best_effort(
      stdout, fmt::format("# kiln bench machine ({})\n"
                          "cpu                 {} ({}, {} compute threads)\n"
                          "peak f32 GEMM       {:.1f} GFLOP/s\n"
                          "memory bandwidth    {:.1f} GB/s (STREAM triad)\n"
                          "measured            {}\n",
                          cached ? fmt::format("cached in {}; --refresh measures again",
                                               (profile::cache_dir() / "machine.json").string())
                                 : "measured now",
                          peaks.cpu_model, peaks.simd_target, peaks.threads, peaks.gemm_gflops,
                          peaks.bandwidth_gbs, peaks.how));
  return 0;
}

}  // namespace

void add_bench_step_commands(CLI::App& bench, std::function<int()>* step_runner,
                             std::function<int()>* machine_runner) {
  auto step_options = std::make_shared<BenchStepOptions>();
  CLI::App* step = bench.add_subcommand(
      "step",
      "The timing report of a short run of CONFIG: compile time, time to first step, "
      "steady-state step time (median, p10, p90), examples/s, data wait, savepoints, host "
      "synchronizations per step, parameter placement (docs/profiling.md)");
  step->add_option("config", step_options->config, "the TOML config")->required();
  step->add_option("--set", step_options->overrides,
                   "override a key: section.key=value, or model.layers[N].field=value");
  step->add_option("--steps", step_options->steps, "training steps to run")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  step->add_option("--runs-dir", step_options->runs_dir,
                   "keep the run there (default: a temporary directory, removed)");
  step->add_flag("--json", step_options->json, "print the report as JSON");
  *step_runner = [step_options] { return bench_step(*step_options); };

  auto machine_options = std::make_shared<BenchMachineOptions>();
  CLI::App* machine = bench.add_subcommand(
      "machine",
      "Peak f32 GEMM GFLOP/s and memory bandwidth (STREAM triad) of this machine, cached per "
      "CPU model, thread count and SIMD target: the figures roofline reports divide by");
  machine->add_flag("--refresh", machine_options->refresh, "measure again, ignoring the cache");
  machine->add_flag("--json", machine_options->json, "print JSON");
  *machine_runner = [machine_options] { return bench_machine(*machine_options); };
}

}  // namespace kiln::cli
