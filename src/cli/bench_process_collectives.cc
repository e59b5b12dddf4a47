// `mpirun -np P kiln bench collectives --processes`: the sum of a tree over the processes of
// an MPI job (train::sum_over_processes: a reduce-scatter by all_to_all, then an all-gather,
// each rank adding its own range in rank order), timed from 4 KiB to --max-bytes. Each
// repeat starts after a barrier and ends when this rank has the sum; the slowest rank's time
// is the repeat's, the median over repeats the size's. The bytes each rank sent are counted
// against 2 (P - 1) / P x S. These points are what bench/scale_model.py fits its
// latency-bandwidth model to (docs/distributed.md, *The scale model*).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bench_collectives.h"
#include "dist/processes.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/profile.h"
#include "kiln/tree.h"
#include "train/process_parallel_step.h"
#include "train/progress.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

void barrier() {
  (void)dist::all_gather("bench barrier", "");
}

// Every rank's `seconds`, in rank order.
std::vector<double> gathered(const std::vector<double>& seconds) {
  std::string mine(seconds.size() * sizeof(double), '\0');
  std::memcpy(mine.data(), seconds.data(), mine.size());
  std::vector<double> slowest(seconds.size(), 0);
  for (const std::string& theirs : dist::all_gather("bench times", mine)) {
    for (size_t r = 0; r < seconds.size(); ++r) {
      double value = 0;
      std::memcpy(&value, theirs.data() + r * sizeof(double), sizeof(double));
      slowest[r] = std::max(slowest[r], value);
    }
  }
  return slowest;
}

}  // namespace

int run_bench_process_collectives(const BenchCollectivesOptions& options) {
  if (!dist::active() || dist::size() < 2) {
    fail(kUnknownSite,
         "kiln bench collectives --processes measures the exchanges between the processes of "
         "an MPI job, and this process is not one of two or more",
         "run it under mpirun: mpirun -np 4 kiln bench collectives --processes");
  }
  const int processes = dist::size();
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t bytes = 4096; bytes <= options.max_bytes; bytes *= options.quick ? 16 : 4) {
    int64_t elements = std::max<int64_t>(processes, bytes / 4 / processes * processes);
    Tree local(full(Shape({elements}), 1.0 + dist::rank(), DType::f32));
    (void)train::sum_over_processes(local, "bench").leaf().block_until_ready();  // warm up
    std::vector<double> seconds;
    int64_t sent_before = dist::bytes_sent();
    for (int r = 0; r < options.repeats; ++r) {
      barrier();
      Clock::time_point start = Clock::now();
      Tree sum = train::sum_over_processes(local, "bench");
      sum.leaf().block_until_ready();
      seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    // The barriers sent bytes too: count only the sums'.
    int64_t barrier_bytes = 0;
    {
      int64_t before = dist::bytes_sent();
      barrier();
      barrier_bytes = dist::bytes_sent() - before;
    }
    double sent = static_cast<double>(dist::bytes_sent() - sent_before - barrier_bytes -
                                      options.repeats * barrier_bytes) /
                  options.repeats;
    std::vector<double> slowest = gathered(seconds);
    double median = profile::median(slowest);
    double payload = static_cast<double>(elements) * 4;
    rows.push_back({{"bytes", payload},
                    {"median_seconds", median},
                    {"bytes_sent_per_rank", sent},
                    {"formula_bytes", 2.0 * (processes - 1) / processes * payload},
                    {"algorithm_gbs", payload / median / 1e9}});
  }
  if (dist::rank() != 0) return 0;
  if (options.json) {
    train::print_best_effort(
        stdout, nlohmann::json({{"processes", processes}, {"rows", rows}}).dump(2) + "\n");
    return 0;
  }
  std::string text = fmt::format(
      "# sum over {} processes (reduce-scatter + all-gather), slowest rank, median of {}\n"
      "{:>12} {:>12} {:>16} {:>14} {:>10}\n",
      processes, options.repeats, "bytes", "median ms", "sent/rank", "formula", "algbw GB/s");
  for (const auto& row : rows) {
    text += fmt::format("{:>12.0f} {:>12.4f} {:>16.0f} {:>14.0f} {:>10.3f}\n",
                        row["bytes"].get<double>(), 1e3 * row["median_seconds"].get<double>(),
                        row["bytes_sent_per_rank"].get<double>(),
                        row["formula_bytes"].get<double>(), row["algorithm_gbs"].get<double>());
  }
  train::print_best_effort(stdout, text);
  return 0;
}

}  // namespace kiln::cli
