// `kiln kernels bench NAME` (docs/kernels.md): a shipped kernel against the unfused program
// of the same math on the same inputs, alternated, with the machine it ran on recorded
// beside every figure, and a refusal, not an estimate, for a device it cannot run on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cli {

struct KernelBenchOptions {
  std::string name;               // a kernel of pallas::kernel_names()
  std::string device = "cpu";     // cpu, or cuda (refused: no CUDA lowering exists)
  int repeats = 5;                // A/B pairs
  bool quick = false;             // small inputs (a smoke test)
  std::string mode = "compiled";  // compiled (both sides jitted) or interpret (both eager)
  bool double_buffer = false;     // compiled: double-buffered against not, not vs unfused
  int64_t size = 0;               // matmul: N (0: 512, 128 with quick)
  std::vector<int64_t> blocks;    // matmul: M, N, K; the row kernels: rows (empty: defaults)
};

// Prints the table; returns the exit status (2 for a device kiln cannot measure on).
int run_kernel_bench(const KernelBenchOptions& options);

}  // namespace kiln::cli
