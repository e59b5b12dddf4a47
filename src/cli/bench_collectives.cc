// `kiln bench collectives` (bench_collectives.h): on 2 and 4 logical devices, from 4 KiB to
// 64 MiB per device, an all-reduce (psum) against the same result by reduce-scatter then
// all-gather, alternating A and B, each timed to the last device's result; the tree
// against the ring for the all-reduce; and the bytes each device sent, measured by the
// traffic counters, against the ring's formula 2 (n - 1) / n x S. Algorithm bandwidth is
// S / t (nccl-tests' algbw); bus bandwidth multiplies it by 2 (n - 1) / n (busbw).
#include "cli/bench_collectives.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/ops.h"
#include "kiln/profile.h"
#include "kiln/sharding.h"
#include "prims/ids/spmd.h"
#include "prims/params.h"
#include "sharding/collective_dispatch.h"

namespace kiln::cli {
namespace {

using profile::median;

struct Setup {
  std::vector<spmd::AxisText> mesh;
  std::vector<Device*> devices;
  std::vector<Array> values;  // one per device, committed there
};

Setup setup_for(int64_t n, int64_t bytes) {
  Setup s;
  s.mesh = {{"data", n}};
  for (int64_t d = 0; d < n; ++d) {
    Device& target = device(static_cast<int>(d));
    s.devices.push_back(&target);
    // n * 4 divides the element count, so that the reduce-scatter splits it evenly.
    int64_t elements = std::max<int64_t>(n, bytes / 4 / n * n);
    s.values.push_back(device_put(full(Shape{elements}, 1.0 + static_cast<double>(d)), target));
    s.values.back().block_until_ready();
  }
  return s;
}

CollectiveParams params_for(int64_t n) {
  CollectiveParams p;
  p.axes = "data";
  p.axis_size = n;
  p.tiled = true;
  return p;
}

void wait_all(const std::vector<Array>& arrays) {
  for (const Array& array : arrays) array.block_until_ready();
}

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} KiB", bytes >> 10);
}

void bench_group(int64_t n, const BenchCollectivesOptions& options) {
  fmt::print("\n## {} devices: psum (A) vs psum_scatter + all_gather (B), ring algorithm\n", n);
  fmt::print("{:>9} {:>11} {:>10} {:>10} {:>11} {:>8} {:>11} {:>12} {:>11} {:>9}\n", "size",
             "A time us", "A algbw", "A busbw", "B time us", "B / A", "tree us", "tree / ring",
             "sent/dev", "formula");
  CollectiveParams p = params_for(n);
  for (int64_t bytes = 4096; bytes <= options.max_bytes; bytes *= options.quick ? 16 : 4) {
    Setup s = setup_for(n, bytes);
    const int64_t actual = s.values[0].size_bytes();
    auto all_reduce = [&] {
      wait_all(spmd::run_collective(prim::psum, p, s.mesh, s.devices, s.values, CallSite()));
    };
    auto two_steps = [&] {
      std::vector<Array> scattered =
          spmd::run_collective(prim::psum_scatter, p, s.mesh, s.devices, s.values, CallSite());
      wait_all(spmd::run_collective(prim::all_gather, p, s.mesh, s.devices, scattered, CallSite()));
    };
    profile::AlternateOptions alternation;
    alternation.rounds = options.repeats;
    alternation.calls = bytes <= (int64_t{1} << 20) ? 20 : 3;
    set_collective_algorithm(CollectiveAlgorithm::kRing);
    profile::Alternation ab = profile::alternate(all_reduce, two_steps, alternation);
    // The tree against the ring for the same all-reduce.
    auto tree = [&] {
      set_collective_algorithm(CollectiveAlgorithm::kTree);
      all_reduce();
    };
    auto ring = [&] {
      set_collective_algorithm(CollectiveAlgorithm::kRing);
      all_reduce();
    };
    profile::Alternation tr = profile::alternate(ring, tree, alternation);
    set_collective_algorithm(CollectiveAlgorithm::kRing);
    reset_collective_traffic();
    all_reduce();
    std::vector<DeviceTraffic> traffic = collective_traffic();
    int64_t most_sent = 0;
    for (int64_t d = 0; d < n; ++d)
      most_sent = std::max(most_sent, traffic[static_cast<size_t>(d)].bytes_sent);
    const double formula =
        2.0 * static_cast<double>(n - 1) / static_cast<double>(n) * static_cast<double>(actual);
    const double a_s = median(ab.a_s);
    const double algbw = static_cast<double>(actual) / a_s / 1e9;
    fmt::print(
        "{:>9} {:>11.1f} {:>8.2f}GB/s {:>8.2f}GB/s {:>11.1f} {:>8.2f} {:>11.1f} {:>12.2f} "
        "{:>11} {:>9.0f}\n",
        size_text(actual), a_s * 1e6, algbw,
        algbw * 2.0 * static_cast<double>(n - 1) / static_cast<double>(n), median(ab.b_s) * 1e6,
        ab.median_ratio(), median(tr.b_s) * 1e6, 1.0 / tr.median_ratio(), most_sent, formula);
  }
  set_collective_algorithm(CollectiveAlgorithm::kAuto);
}

}  // namespace

int run_bench_collectives(const BenchCollectivesOptions& options) {
  if (devices().size() < 4) {
    fail(CallSite(),
         fmt::format("kiln bench collectives runs on 2 and 4 logical devices; this process has {}",
                     devices().size()),
         "run it as KILN_CPU_DEVICES=4 kiln bench collectives");
  }
  fmt::print("# kiln bench collectives: {} logical devices, {} A/B pairs per size\n",
             devices().size(), options.repeats);
  fmt::print(
      "# time: median per call, synchronized on every device's result; B / A and "
      "tree / ring: medians of per-pair ratios (above 1: A, or the tree, is faster)\n");
  fmt::print(
      "# sent/dev: the most bytes one device sent for one ring all-reduce (measured); "
      "formula: 2 (n-1)/n x size\n");
  for (int64_t n : {2, 4}) bench_group(n, options);
  return 0;
}

}  // namespace kiln::cli
