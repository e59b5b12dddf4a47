// The measurements behind `kiln bench ops`.
#pragma once

#include <cstdint>

namespace kiln::cli {

struct BenchOpsOptions {
  int repeats = 15;
  int64_t elements = int64_t{1} << 24;  // 16M floats
  bool quick = false;
};

int run_bench_ops(const BenchOpsOptions& options);

}  // namespace kiln::cli
