// Vectorised (Highway) inner loop of the fast transpose of 4-byte elements
// (kernels/cpu/shape_transpose.cc), compiled for several instruction sets with the best
// chosen at run time. A transpose only moves bits, so every instruction set gives the same
// result; what the vectors buy is whole cache lines read and written per step.
#pragma once

#include <cstdint>

namespace kiln::simd {

// Whether transpose_band16_u32 has a vector implementation on this machine (it needs
// 256-bit vectors: AVX2 or AVX-512 on x86). Without one, callers keep their own loop.
bool transpose_band16_u32_vectorised();

// Transposes a band of 16 input rows: out[i * out_i + j] = in[j * in_j + i] for j < 16 and
// i < n_i rounded down to a multiple of 8, eight output rows of 64 bytes per step. With
// `stream`, the stores bypass the caches (the output is too large to be read back from
// them); that needs out and out_i * 4 aligned to 32 bytes. Returns how many i it moved (the
// caller moves the rest); 0 where there is no vector implementation.
int64_t transpose_band16_u32(const uint32_t* in, int64_t in_j, uint32_t* out, int64_t out_i,
                             int64_t n_i, bool stream);

}  // namespace kiln::simd
