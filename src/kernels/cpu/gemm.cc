// kiln's GEMM on oneDNN's sgemm (see gemm.h). oneDNN here runs on OpenMP, whose thread
// count is a per-thread setting: each pool thread that calls the library first asks for a
// team of one, so a call never starts (or wakes) an OpenMP team behind kiln's pool.
#include "kernels/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include <oneapi/dnnl/dnnl.h>

#include "base/check.h"
#include "kiln/error.h"

namespace kiln {
namespace {

// The partition (measured with bench/gemm_choice --blocks/--split on the 2-core machine):
// a block must carry enough work to pay for waking a pool thread (~40 us here) and for
// the library packing the other operand again, which costs more when that operand has
// left the caches, so blocks grow with it.
constexpr double kMinBlockFlops = 6e6;
constexpr int64_t kMaxBlocks = 16;
constexpr int64_t kMinExtent = 64;
constexpr int64_t kMaxMinExtent = 1024;
// Other-operand elements per row of minimum block extent (1M elements -> 1024 rows): each
// block re-packs the other operand, so the larger it is the fewer blocks pay off. The
// first split in two needs only kMinExtent, so mid-sized products still use two threads.
constexpr int64_t kOtherPerExtent = 1024;
// Rows split on register-tile multiples; columns on whole cache lines of C.
constexpr int64_t kRowAlign = 8;
constexpr int64_t kColAlign = 16;

template <typename T>
void zero_c(const GemmDims& dims, T* c) {
  for (int64_t i = 0; i < dims.m; ++i) {
    std::memset(c + i * dims.ldc, 0, static_cast<size_t>(dims.n) * sizeof(T));
  }
}

void call_dnnl(const GemmDims& dims, const float* a, const float* b, float* c) {
  dnnl_status_t status =
      dnnl_sgemm(dims.trans_a ? 'T' : 'N', dims.trans_b ? 'T' : 'N', dims.m, dims.n, dims.k, 1.0f,
                 a, dims.lda, b, dims.ldb, 0.0f, c, dims.ldc);
  KILN_CHECK(status == dnnl_success, "dnnl_sgemm failed with status {} for m={} n={} k={}",
             static_cast<int>(status), dims.m, dims.n, dims.k);
}

template <typename T>
void block_of(const GemmDims& dims, const GemmBlocks& blocks, int64_t block, const T* a, const T* b,
              T* c) {
  int64_t begin = block * blocks.size;
  GemmDims part = dims;
  if (blocks.split_m) {
    part.m = std::min(blocks.size, dims.m - begin);
    // Row i of op(A) starts at a + i*lda untransposed, at column i (a + i) transposed.
    gemm_serial(part, dims.trans_a ? a + begin : a + begin * dims.lda, b, c + begin * dims.ldc);
  } else {
    part.n = std::min(blocks.size, dims.n - begin);
    gemm_serial(part, a, dims.trans_b ? b + begin * dims.ldb : b + begin, c + begin);
  }
}

template <typename T>
void gemm_on_pool(ComputePool& pool, const GemmDims& dims, const T* a, const T* b, T* c) {
  if (dims.m == 0 || dims.n == 0) return;
  GemmBlocks blocks = gemm_blocks(dims.m, dims.n, dims.k);
  pool.parallel_for(blocks.count, [&](int64_t block) { block_of(dims, blocks, block, a, b, c); });
}

}  // namespace

GemmBlocks gemm_blocks(int64_t m, int64_t n, int64_t k) {
  // Every block re-packs the operand it does not split, so split the dimension whose
  // other operand is smaller: rows (each block re-reads all of B, k x n) when n <= m,
  // columns (each block re-reads all of A, m x k) otherwise, as long as it is long enough.
  bool split_m = n < 2 * kMinExtent || (m >= 2 * kMinExtent && n <= m);
  int64_t extent = split_m ? m : n;
  int64_t other = k * (split_m ? n : m);
  int64_t min_extent = std::clamp(other / kOtherPerExtent, 2 * kMinExtent, kMaxMinExtent);
  double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  int64_t count = 1;
  while (count * 2 <= kMaxBlocks && flops / static_cast<double>(count * 2) >= kMinBlockFlops &&
         extent / (count * 2) >= (count == 1 ? kMinExtent : min_extent)) {
    count *= 2;
  }
  int64_t align = split_m ? kRowAlign : kColAlign;
  int64_t size = (extent + count - 1) / count;
  size = std::max<int64_t>((size + align - 1) / align * align, 1);
  count = extent > 0 ? (extent + size - 1) / size : 1;
  return {split_m, size, count};
}

void gemm_serial(const GemmDims& dims, const float* a, const float* b, float* c) {
  if (dims.m == 0 || dims.n == 0) return;
  if (dims.k == 0) return zero_c(dims, c);
  omp_set_num_threads(1);
  call_dnnl(dims, a, b, c);
}

void gemm_serial(const GemmDims& dims, const double* a, const double* b, double* c) {
  if (dims.m == 0 || dims.n == 0) return;
  auto a_at = [&](int64_t i, int64_t k) {
    return dims.trans_a ? a[k * dims.lda + i] : a[i * dims.lda + k];
  };
  // Each element sums its k terms in order, whichever loop nest runs.
  for (int64_t i = 0; i < dims.m; ++i) {
    double* row = c + i * dims.ldc;
    if (!dims.trans_b) {
      std::fill(row, row + dims.n, 0.0);
      for (int64_t k = 0; k < dims.k; ++k) {
        double scale = a_at(i, k);
        const double* b_row = b + k * dims.ldb;
        for (int64_t j = 0; j < dims.n; ++j) row[j] += scale * b_row[j];
      }
    } else {
      for (int64_t j = 0; j < dims.n; ++j) {
        const double* b_col = b + j * dims.ldb;
        double acc = 0;
        for (int64_t k = 0; k < dims.k; ++k) acc += a_at(i, k) * b_col[k];
        row[j] = acc;
      }
    }
  }
}

void gemm_block(const GemmDims& dims, const GemmBlocks& blocks, int64_t block, const float* a,
                const float* b, float* c) {
  block_of(dims, blocks, block, a, b, c);
}
void gemm_block(const GemmDims& dims, const GemmBlocks& blocks, int64_t block, const double* a,
                const double* b, double* c) {
  block_of(dims, blocks, block, a, b, c);
}

void gemm(ComputePool& pool, const GemmDims& dims, const float* a, const float* b, float* c) {
  gemm_on_pool(pool, dims, a, b, c);
}
void gemm(ComputePool& pool, const GemmDims& dims, const double* a, const double* b, double* c) {
  gemm_on_pool(pool, dims, a, b, c);
}

void sgemm_direct(const GemmDims& dims, const float* a, const float* b, float* c) {
  if (dims.m == 0 || dims.n == 0) return;
  if (dims.k == 0) return zero_c(dims, c);
  // As many OpenMP threads as kiln's pool has, so the comparison is like for like (this
  // thread may have asked for a team of one earlier, when it ran a pool chunk).
  omp_set_num_threads(default_compute_threads());
  call_dnnl(dims, a, b, c);
}

}  // namespace kiln
