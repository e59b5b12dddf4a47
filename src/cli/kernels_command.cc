// `kiln kernels list|check [NAME]|bench NAME`: the Pallas-style kernels kiln ships, each
// checked against the f64 program of the same math (docs/kernels.md) and timed against the
// unfused program (kernels_bench.h). check exits 1 when any case is out of its bound, so CI
// runs it as a test.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/kernels_bench.h"
#include "pallas/kernel_call.h"
#include "pallas/kernel_checks.h"
#include "train/progress.h"

namespace kiln::cli {
namespace {

// `mode`: compiled, interpret, or both (each case in each mode, compiled first).
int check(const std::string& name, const std::string& mode, bool verbose) {
  std::vector<std::string> modes;
  if (mode != "interpret") modes.push_back("compiled");
  if (mode != "compiled") modes.push_back("interpret");
  std::string text = fmt::format("{:<27} {:<9} {:<52} {:>10} {:>10} {:>8} {:>7}  {}\n", "kernel",
                                 "mode", "case", "max abs", "max rel", "ulps", "bound%", "");
  int failed = 0;
  size_t cases = 0;
  std::vector<std::string> bounds;  // "kernel: bound", each kernel once, in order
  for (const std::string& m : modes) {
    pallas::detail::ForcedMode forced(m == "interpret");
    std::vector<pallas::KernelCheck> checks =
        pallas::check_kernels(name, [&](const std::string& c) {
          if (verbose) std::fprintf(stderr, "checking %s (%s)\n", c.c_str(), m.c_str());
        });
    for (const pallas::KernelCheck& c : checks) {
      text += fmt::format("{:<27} {:<9} {:<52} {:>10.3g} {:>10.3g} {:>8.2f} {:>6.1f}%  {}\n",
                          c.kernel, m, c.what, c.max_abs_error, c.max_rel_error, c.max_ulps,
                          100 * c.worst_share_of_bound, c.ok ? "ok" : "FAILED");
      failed += c.ok ? 0 : 1;
      std::string bound = fmt::format("{}: {}", c.kernel, c.bound);
      if (std::find(bounds.begin(), bounds.end(), bound) == bounds.end()) bounds.push_back(bound);
    }
    cases += checks.size();
  }
  text += fmt::format(
      "{} case(s), {} failed. bound%: the largest error as a share of its element's bound ({}); "
      "the reference is the same math in f64.\n",
      cases, failed, fmt::join(bounds, "; "));
  train::print_best_effort(stdout, text);
  return failed ? 1 : 0;
}

}  // namespace

Runner add_kernels_command(CLI::App& app) {
  auto* kernels = app.add_subcommand(
      "kernels",
      "Pallas-style tiled kernels: list them, check them against f64 references, "
      "bench them against the unfused program (docs/kernels.md)");
  kernels->require_subcommand(1);
  kernels->add_subcommand("list", "The kernels kiln ships");
  auto name = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  auto check_mode = std::make_shared<std::string>("both");
  auto* check_command = kernels->add_subcommand(
      "check",
      "Each kernel (or NAME) against the plain f64 program of the same math over shapes, "
      "block sizes, dtypes and special values: max abs, rel and ulp errors against per-dtype "
      "bounds; exit 1 on any disagreement");
  check_command->add_option("name", *name, "one kernel (default: all)");
  check_command->add_flag("--verbose", *verbose, "print each case as it starts");
  check_command
      ->add_option("--mode", *check_mode,
                   "compiled, interpret, or both (each case in each mode; what CI runs)")
      ->check(CLI::IsMember({"both", "compiled", "interpret"}))
      ->capture_default_str();
  auto bench = std::make_shared<KernelBenchOptions>();
  auto* bench_command = kernels->add_subcommand(
      "bench",
      "NAME against the unfused program of the same math on the same inputs, alternated: "
      "median and p10/p90 times, GB/s or GFLOP/s against kiln bench machine's roofline, and "
      "the device it ran on; exit 2 for a device it cannot run on (no estimates)");
  bench_command->add_option("name", bench->name, "the kernel (kiln kernels list)")->required();
  bench_command
      ->add_option("--device", bench->device,
                   "where to measure: cpu (cuda is refused: "
                   "kiln's kernels have no CUDA lowering)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  bench_command->add_option("--repeats", bench->repeats, "timed A/B pairs")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  bench_command->add_flag("--quick", bench->quick, "small inputs (a smoke test)");
  bench_command
      ->add_option("--mode", bench->mode,
                   "compiled: the kernel and the unfused program each jitted; interpret: the "
                   "kernel in interpret mode and the program eager")
      ->check(CLI::IsMember({"compiled", "interpret"}))
      ->capture_default_str();
  bench_command->add_option("--size", bench->size, "matmul: N, for N x N @ N x N (default 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{16384}));
  bench_command
      ->add_option(
          "--blocks", bench->blocks,
          "matmul: M,N,K, the block sizes (default 128,128,128); softmax, layer_norm "
          "and the cross-entropy kernels: the rows per block (default: up to 8 within 64 KiB)")
      ->expected(1, 3)
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  bench_command->add_flag("--double-buffer", bench->double_buffer,
                          "the kernel with its next blocks copied ahead (CallOptions::"
                          "double_buffer) against the same kernel without, both jitted, "
                          "instead of against the unfused program");
  return [kernels, name, verbose, check_mode, bench] {
    if (kernels->got_subcommand("bench")) return run_kernel_bench(*bench);
    if (kernels->got_subcommand("list")) {
      std::string text;
      for (const std::string& kernel : pallas::kernel_names()) text += kernel + "\n";
      train::print_best_effort(stdout, text);
      return 0;
    }
    return check(*name, *check_mode, *verbose);
  };
}

}  // namespace kiln::cli
