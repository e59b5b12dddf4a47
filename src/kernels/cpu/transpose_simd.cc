// Highway implementation of kernels/cpu/transpose_simd.h, compiled once per SIMD target by
// hwy/foreach_target.h. The 8 x 8 block is transposed in registers with three rounds of
// interleaves (32-bit lanes, 64-bit lanes, 128-bit halves), the shuffle network every x86
// BLAS uses for it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/transpose_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/cpu/transpose_simd.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_CAP_GE256

using D8 = hn::FixedTag<uint32_t, 8>;
using V8 = hn::Vec<D8>;

// Interleaves the 64-bit lanes of a and b within each 128-bit block.
HWY_INLINE V8 interleave_lower_64(V8 a, V8 b) {
  const hn::Repartition<uint64_t, D8> d64;
  return hn::BitCast(D8(), hn::InterleaveLower(d64, hn::BitCast(d64, a), hn::BitCast(d64, b)));
}
HWY_INLINE V8 interleave_upper_64(V8 a, V8 b) {
  const hn::Repartition<uint64_t, D8> d64;
  return hn::BitCast(D8(), hn::InterleaveUpper(d64, hn::BitCast(d64, a), hn::BitCast(d64, b)));
}

// Rows r[0..7] (8 lanes each) in, columns out: column c holds r[0][c], ..., r[7][c].
HWY_INLINE void transpose8x8(const V8 (&r)[8], V8 (&column)[8]) {
  const D8 d;
  V8 t[8];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = hn::InterleaveLower(d, r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = hn::InterleaveUpper(d, r[2 * k], r[2 * k + 1]);
  }
  // u[0..3]: columns 0-3 of rows 0-3 in the low block, columns 4-7 in the high one; u[4..7]
  // the same of rows 4-7.
  V8 u[8];
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    const V8* s = t + 4 * half;
    u[4 * half + 0] = interleave_lower_64(s[0], s[2]);
    u[4 * half + 1] = interleave_upper_64(s[0], s[2]);
    u[4 * half + 2] = interleave_lower_64(s[1], s[3]);
    u[4 * half + 3] = interleave_upper_64(s[1], s[3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    column[c] = hn::ConcatLowerLower(d, u[4 + c], u[c]);
    column[c + 4] = hn::ConcatUpperUpper(d, u[4 + c], u[c]);
  }
}

template <bool kStream>
int64_t band16(const uint32_t* HWY_RESTRICT in, int64_t in_j, uint32_t* HWY_RESTRICT out,
               int64_t out_i, int64_t n_i) {
  const D8 d;
  int64_t whole = n_i - n_i % 8;
  for (int64_t i = 0; i < whole; i += 8) {
    V8 low[8], high[8], rows[8];
#pragma GCC unroll 8
    for (int64_t k = 0; k < 8; ++k) rows[k] = hn::LoadU(d, in + k * in_j + i);
    transpose8x8(rows, low);
#pragma GCC unroll 8
    for (int64_t k = 0; k < 8; ++k) rows[k] = hn::LoadU(d, in + (k + 8) * in_j + i);
    transpose8x8(rows, high);
    // Both halves of an output row go out back to back: one whole 64-byte line.
#pragma GCC unroll 8
    for (int64_t k = 0; k < 8; ++k) {
      uint32_t* row = out + (i + k) * out_i;
      if constexpr (kStream) {
        hn::Stream(low[k], d, row);
        hn::Stream(high[k], d, row + 8);
      } else {
        hn::StoreU(low[k], d, row);
        hn::StoreU(high[k], d, row + 8);
      }
    }
  }
  if constexpr (kStream) hwy::FlushStream();
  return whole;
}

bool Vectorised() {
  return true;
}

int64_t Band16(const uint32_t* in, int64_t in_j, uint32_t* out, int64_t out_i, int64_t n_i,
               bool stream) {
  return stream ? band16<true>(in, in_j, out, out_i, n_i)
                : band16<false>(in, in_j, out, out_i, n_i);
}

#else  // no 256-bit vectors on this target

bool Vectorised() {
  return false;
}

int64_t Band16(const uint32_t*, int64_t, uint32_t*, int64_t, int64_t, bool) {
  return 0;
}

#endif

}  // namespace kiln::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(Vectorised);
HWY_EXPORT(Band16);

bool transpose_band16_u32_vectorised() {
  return HWY_DYNAMIC_DISPATCH(Vectorised)();
}

int64_t transpose_band16_u32(const uint32_t* in, int64_t in_j, uint32_t* out, int64_t out_i,
                             int64_t n_i, bool stream) {
  return HWY_DYNAMIC_DISPATCH(Band16)(in, in_j, out, out_i, n_i, stream);
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
