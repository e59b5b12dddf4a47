// The measurements behind `kiln bench collectives` (docs/performance.md, *Collectives*).
#pragma once

#include <cstdint>

namespace kiln::cli {

struct BenchCollectivesOptions {
  int repeats = 7;
  int64_t max_bytes = int64_t{64} << 20;  // per device
  bool quick = false;
};

int run_bench_collectives(const BenchCollectivesOptions& options);

}  // namespace kiln::cli
