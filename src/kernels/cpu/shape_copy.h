// Copy machinery shared by the layout family's fast kernels (kernels/cpu/shape*.cc).
// Every layout primitive except transpose is a strided block copy: broadcast_in_dim reads
// with stride 0 on broadcast axes, slice reads with strides, pad and dynamic_update_slice
// write into a sub-block, concatenate writes each operand at an offset. block_copy merges
// axes, copies contiguous runs with memcpy and splits the work by sizes alone, so results
// never depend on the thread count (they are plain copies anyway).
#pragma once

#include <cstdint>

#include "base/compute_pool.h"
#include "kiln/shape.h"

namespace kiln::shape_kernels {

// Bytes of work below which splitting a copy across threads costs more than it gains.
inline constexpr int64_t kMinChunkBytes = int64_t{1} << 16;

// Calls fn(begin, end) over [0, total) in chunks of at least `min_chunk` items; the chunk
// boundaries depend only on the two sizes.
template <typename Fn>
void parallel_range(ComputePool& pool, int64_t total, int64_t min_chunk, Fn&& fn) {
  int64_t chunks = chunk_count(total, min_chunk);
  if (chunks <= 1) {
    if (total > 0) fn(int64_t{0}, total);
    return;
  }
  pool.parallel_for(chunks, [&](int64_t chunk) {
    auto bound = [&](int64_t c) {
      return static_cast<int64_t>(static_cast<__int128>(total) * c / chunks);
    };
    fn(bound(chunk), bound(chunk + 1));
  });
}

// A block of `sizes` elements read at src_base + sum(index * src_strides) and written at
// dst_base + sum(index * dst_strides), all in elements. Strides may be 0 on the source
// (broadcast reads); destination elements must not overlap.
struct Block {
  Dims sizes;
  Dims src_strides;
  Dims dst_strides;
  int64_t src_base = 0;
  int64_t dst_base = 0;
};

// Copies `block` from `src` to `dst`; elements are `width` bytes (1, 2, 4 or 8).
void block_copy(const void* src, void* dst, const Block& block, int64_t width, ComputePool& pool);

// Copies `bytes` contiguous bytes, split across the pool for large copies.
void parallel_memcpy(void* dst, const void* src, int64_t bytes, ComputePool& pool);

}  // namespace kiln::shape_kernels
