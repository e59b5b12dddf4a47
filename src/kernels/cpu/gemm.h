// Row-major matrix multiply for the fast CPU kernels, C = op(A) * op(B), on oneDNN's sgemm
// (the choice and its measurements: docs/dependencies.md, bench/gemm_choice.cc). kiln calls
// the library single-threaded from its own compute pool, over blocks of rows or columns of C
// derived from the shape alone, so results never depend on the thread count and no second
// thread pool competes with kiln's.
#pragma once

#include <cstdint>

#include "base/compute_pool.h"

namespace kiln {

// Shape and layout of one row-major GEMM: op(A) is m x k, op(B) is k x n, C is m x n.
struct GemmDims {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// How kiln splits a GEMM into independent blocks of C: `count` blocks of `size` rows
// (split_m) or columns (the last one possibly shorter). A function of the shape only.
struct GemmBlocks {
  bool split_m = true;
  int64_t size = 0;
  int64_t count = 1;
};
GemmBlocks gemm_blocks(int64_t m, int64_t n, int64_t k);

// C = op(A) op(B) on the calling thread only (the library's threading is switched off for
// this thread). k == 0 writes zeros. The double version is kiln's own plain loop: oneDNN
// has no dgemm, and f64 is for checking, not for speed.
void gemm_serial(const GemmDims& dims, const float* a, const float* b, float* c);
void gemm_serial(const GemmDims& dims, const double* a, const double* b, double* c);

// Block `block` of gemm_blocks() for `dims`, on the calling thread.
void gemm_block(const GemmDims& dims, const GemmBlocks& blocks, int64_t block, const float* a,
                const float* b, float* c);
void gemm_block(const GemmDims& dims, const GemmBlocks& blocks, int64_t block, const double* a,
                const double* b, double* c);

// kiln's GEMM: the blocks of gemm_blocks() run as pool chunks, each through gemm_serial.
// Bit-identical for every pool size.
void gemm(ComputePool& pool, const GemmDims& dims, const float* a, const float* b, float* c);
void gemm(ComputePool& pool, const GemmDims& dims, const double* a, const double* b, double* c);

// The baseline: the library called the way a user would call it directly, with its own
// threads (oneDNN's OpenMP team on the calling thread). `kiln bench ops` compares
// dot_general against this.
void sgemm_direct(const GemmDims& dims, const float* a, const float* b, float* c);

}  // namespace kiln
