// Vectorised (Highway) inner loops of the fast reduce kernels (kernels/cpu/reduce.cc),
// compiled for several instruction sets with the best chosen at run time. Each loop fixes
// its order of operations independently of the vector width, so the bits of a result are
// the same whichever instruction set runs (and whatever the thread count, which the
// caller's chunking takes care of).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::simd {

enum class ReduceKind : uint8_t { kSum, kMax, kMin };

// The number of logical accumulators of reduce_run.
inline constexpr size_t kReduceLanes = 16;

// Reduces x[0, n): element i < n - n % 16 feeds logical lane i % 16 and the last n % 16
// elements feed a tail accumulator in order; the lanes fold pairwise (lane j with j + 8,
// then j + 4, j + 2, j + 1) and the tail comes last. Sums accumulate in double; max/min
// propagate NaN (returned exactly, as double).
double reduce_run_f32(ReduceKind kind, const float* x, size_t n);
double reduce_run_f64(ReduceKind kind, const double* x, size_t n);

// acc[c] = op(acc[c], x[r * stride + c]) for r = 0, 1, ..., rows - 1 in that order and
// every c < width: a column reduction, accumulated in double.
void reduce_columns_f32(ReduceKind kind, const float* x, size_t stride, size_t rows, size_t width,
                        double* acc);
void reduce_columns_f64(ReduceKind kind, const double* x, size_t stride, size_t rows, size_t width,
                        double* acc);

}  // namespace kiln::simd
