// STREAM-style copy, add and triad; see bandwidth.h.
#include "profile/bandwidth.h"

namespace kiln::profile {
namespace {

// A plain loop the compiler vectorises (restrict: no aliasing), like STREAM's own.
void copy_range(const float* __restrict a, float* __restrict c, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) c[i] = a[i];
}

void add_range(const float* __restrict a, const float* __restrict b, float* __restrict c,
               int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) c[i] = a[i] + b[i];
}

void triad_range(float* __restrict a, const float* __restrict b, const float* __restrict c, float s,
                 int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

void stream_copy(const float* a, float* c, int64_t n, ComputePool& pool) {
  int64_t chunks = chunk_count(n, 16384);
  pool.parallel_for(chunks, [&](int64_t chunk) {
    copy_range(a, c, n * chunk / chunks, n * (chunk + 1) / chunks);
  });
}

void stream_triad(float* a, const float* b, const float* c, float s, int64_t n, ComputePool& pool) {
  int64_t chunks = chunk_count(n, 16384);
  pool.parallel_for(chunks, [&](int64_t chunk) {
    triad_range(a, b, c, s, n * chunk / chunks, n * (chunk + 1) / chunks);
  });
}

void stream_add(const float* a, const float* b, float* c, int64_t n, ComputePool& pool) {
  int64_t chunks = chunk_count(n, 16384);
  pool.parallel_for(chunks, [&](int64_t chunk) {
    add_range(a, b, c, n * chunk / chunks, n * (chunk + 1) / chunks);
  });
}

}  // namespace kiln::profile
