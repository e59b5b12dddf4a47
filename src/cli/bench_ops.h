// The measurements behind `kiln bench ops`.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::cli {

struct BenchOpsOptions {
  int repeats = 15;
  int64_t elements = int64_t{1} << 24;  // 16M floats
  bool quick = false;
  std::string only;  // one section (dot, elementwise, transpose, dispatch, sync); empty: all
};

int run_bench_ops(const BenchOpsOptions& options);

}  // namespace kiln::cli
