// `kiln bench ops`: kiln's eager ops beside what a user would pick instead, measured in
// one run, alternating A and B and reporting ratios pair by pair (the machine is noisy).
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "base/compute_pool.h"
#include "cli/bench_ops.h"
#include "cli/bench_step.h"
#include "cli/commands.h"

namespace kiln::cli {

Runner add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (see docs/performance.md)");
  bench->require_subcommand(1);
  auto* ops = bench->add_subcommand(
      "ops",
      "dot_general vs direct sgemm, elementwise add/exp vs a STREAM add, dispatch overhead, and "
      "unsynchronized vs synchronized timing");
  auto options = std::make_shared<BenchOpsOptions>();
  ops->add_option("--repeats", options->repeats, "Timed A/B pairs per measurement")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  ops->add_option("--elements", options->elements, "Floats per array in the bandwidth tests")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30))
      ->capture_default_str();
  ops->add_flag("--quick", options->quick, "Fewer repeats and smaller sizes (a smoke test)");
  auto step = std::make_shared<std::function<int()>>();
  auto machine = std::make_shared<std::function<int()>>();
  add_bench_step_commands(*bench, step.get(), machine.get());
  return [options, ops, bench, step, machine] {
    if (bench->got_subcommand("step")) return (*step)();
    if (bench->got_subcommand("machine")) return (*machine)();
    return run_bench_ops(*options);
  };
}

}  // namespace kiln::cli
