// The measurements behind `kiln bench collectives` (docs/performance.md, *Collectives*).
#pragma once

#include <cstdint>

namespace kiln::cli {

struct BenchCollectivesOptions {
  int repeats = 7;
  int64_t max_bytes = int64_t{64} << 20;  // per device
  bool quick = false;
  // Between the processes of an MPI job (bench_process_collectives.cc) instead of the
  // logical devices of one process.
  bool processes = false;
  bool json = false;  // --processes only
};

int run_bench_collectives(const BenchCollectivesOptions& options);
int run_bench_process_collectives(const BenchCollectivesOptions& options);

}  // namespace kiln::cli
