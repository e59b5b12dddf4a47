// `kiln bench ops|collectives|step|machine|cost`: kiln beside what a user would pick instead (or
// one algorithm beside another), measured in one run, alternating A and B and reporting
// ratios pair by pair (the machine is noisy).
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "base/compute_pool.h"
#include "cli/bench_collectives.h"
#include "cli/bench_cost.h"
#include "cli/bench_ops.h"
#include "cli/bench_step.h"
#include "cli/commands.h"

namespace kiln::cli {

Runner add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (see docs/performance.md)");
  bench->require_subcommand(1);
  auto* ops = bench->add_subcommand(
      "ops",
      "dot_general vs direct sgemm, elementwise add/exp vs a STREAM add, transpose vs a STREAM "
      "copy, dispatch overhead, and unsynchronized vs synchronized timing");
  auto options = std::make_shared<BenchOpsOptions>();
  ops->add_option("--repeats", options->repeats, "Timed A/B pairs per measurement")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  ops->add_option("--elements", options->elements, "Floats per array in the bandwidth tests")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30))
      ->capture_default_str();
  ops->add_flag("--quick", options->quick, "Fewer repeats and smaller sizes (a smoke test)");
  ops->add_option("--only", options->only, "Run one section")
      ->check(CLI::IsMember({"dot", "elementwise", "transpose", "dispatch", "sync"}));
  auto* collectives = bench->add_subcommand(
      "collectives",
      "psum vs psum_scatter + all_gather and the tree vs the ring on 2 and 4 logical devices, "
      "4 KiB to 64 MiB per device: time, algorithm and bus bandwidth, bytes sent per device "
      "against the ring formula (needs KILN_CPU_DEVICES=4)");
  auto collective_options = std::make_shared<BenchCollectivesOptions>();
  collectives->add_option("--repeats", collective_options->repeats, "Timed A/B pairs per size")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  collectives
      ->add_option("--max-bytes", collective_options->max_bytes,
                   "The largest array per device, in bytes")
      ->check(CLI::Range(int64_t{4096}, int64_t{1} << 30))
      ->capture_default_str();
  collectives->add_flag("--quick", collective_options->quick,
                        "Every 16x in size instead of 4x (a smoke test)");
  collectives->add_flag("--processes", collective_options->processes,
                        "Between the processes of an MPI job (mpirun -np P kiln bench collectives "
                        "--processes): the sum over processes the trainer uses, slowest rank, "
                        "bytes per rank against 2 (P - 1) / P x S");
  collectives->add_flag("--json", collective_options->json, "With --processes: print JSON");
  auto step = std::make_shared<std::function<int()>>();
  auto machine = std::make_shared<std::function<int()>>();
  add_bench_step_commands(*bench, step.get(), machine.get());
  auto cost = std::make_shared<std::function<int()>>();
  add_bench_cost_command(*bench, cost.get());
  return [options, collective_options, bench, step, machine, cost] {
    if (bench->got_subcommand("collectives")) {
      return collective_options->processes ? run_bench_process_collectives(*collective_options)
                                           : run_bench_collectives(*collective_options);
    }
    if (bench->got_subcommand("step")) return (*step)();
    if (bench->got_subcommand("machine")) return (*machine)();
    if (bench->got_subcommand("cost")) return (*cost)();
    return run_bench_ops(*options);
  };
}

}  // namespace kiln::cli
