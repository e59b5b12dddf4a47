// STREAM-style kernels run on kiln's compute pool: the memory-bandwidth yardsticks that
// elementwise and layout kernels are compared against in the same process and run.
#pragma once

#include <cstdint>

#include "base/compute_pool.h"

namespace kiln::profile {

// One pass of c[i] = a[i] + b[i] over n floats, split into the same size-derived chunks
// kiln's kernels use. Bytes counted as STREAM does: 3 * 4 * n (no write-allocate).
void stream_add(const float* a, const float* b, float* c, int64_t n, ComputePool& pool);

// STREAM's copy, c[i] = a[i]: the yardstick of a layout change that moves each element once
// (a transpose). Bytes counted as 2 * 4 * n.
void stream_copy(const float* a, float* c, int64_t n, ComputePool& pool);

// STREAM's triad, a[i] = b[i] + s * c[i]: the bandwidth figure STREAM reports first.
void stream_triad(float* a, const float* b, const float* c, float s, int64_t n, ComputePool& pool);

}  // namespace kiln::profile
