// Threefry-2x32 (kernels/threefry.h) over vectors of counters, compiled for several
// instruction sets with the best chosen at run time. Each element is hashed on its own, so
// the bits are those of the scalar hash whatever the vector width.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::simd {

// (y0[i], y1[i]) = hash(k0[i * s0], k1[i * s1], x0[i * s2], x1[i * s3]) for i < n; each
// stride is 1 (a run of values) or 0 (one value repeated).
struct ThreefryRun {
  const uint32_t* k0;
  const uint32_t* k1;
  const uint32_t* x0;
  const uint32_t* x1;
  size_t s0, s1, s2, s3;
  uint32_t* y0;
  uint32_t* y1;
};
void threefry2x32_run(const ThreefryRun& run, size_t n);

}  // namespace kiln::simd
