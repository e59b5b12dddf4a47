// Highway implementation of kernels/cpu/threefry_simd.h: the 20 rounds of the scalar hash
// (kernels/threefry.h) on vectors of 32-bit lanes, with the rotations as compile-time
// constants. About eight times the scalar loop's rate on AVX2, which GCC does not
// vectorise at -O2.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/threefry_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cstring>

#include "kernels/cpu/threefry_simd.h"
#include "kernels/threefry.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <int kBits, class V>
HWY_INLINE void mix(V& x0, V& x1) {
  x0 = hn::Add(x0, x1);
  x1 = hn::Xor(hn::RotateRight<32 - kBits>(x1), x0);
}

// Four rounds with the rotations of the first (kFirstHalf) or second half of the cycle of
// eight, then the key injection `injection` (1..5).
template <bool kFirstHalf, class D, class V>
HWY_INLINE void four_rounds(D d, V& x0, V& x1, const V (&keys)[3], uint32_t injection) {
  if constexpr (kFirstHalf) {
    mix<13>(x0, x1);
    mix<15>(x0, x1);
    mix<26>(x0, x1);
    mix<6>(x0, x1);
  } else {
    mix<17>(x0, x1);
    mix<29>(x0, x1);
    mix<16>(x0, x1);
    mix<24>(x0, x1);
  }
  x0 = hn::Add(x0, keys[injection % 3]);
  x1 = hn::Add(hn::Add(x1, keys[(injection + 1) % 3]), hn::Set(d, injection));
}

template <class D, class V>
HWY_INLINE void hash(D d, V k0, V k1, V& x0, V& x1) {
  const V keys[3] = {k0, k1, hn::Xor(hn::Xor(k0, k1), hn::Set(d, 0x1BD11BDAu))};
  x0 = hn::Add(x0, keys[0]);
  x1 = hn::Add(x1, keys[1]);
  four_rounds<true>(d, x0, x1, keys, 1);
  four_rounds<false>(d, x0, x1, keys, 2);
  four_rounds<true>(d, x0, x1, keys, 3);
  four_rounds<false>(d, x0, x1, keys, 4);
  four_rounds<true>(d, x0, x1, keys, 5);
}

void Threefry2x32Run(const ThreefryRun& run, size_t n) {
  const hn::ScalableTag<uint32_t> d;
  const size_t lanes = hn::Lanes(d);
  auto load = [&](const uint32_t* p, size_t stride, size_t i) {
    return stride == 0 ? hn::Set(d, p[0]) : hn::LoadU(d, p + i);
  };
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto x0 = load(run.x0, run.s2, i), x1 = load(run.x1, run.s3, i);
    hash(d, load(run.k0, run.s0, i), load(run.k1, run.s1, i), x0, x1);
    hn::StoreU(x0, d, run.y0 + i);
    hn::StoreU(x1, d, run.y1 + i);
  }
  for (; i < n; ++i) {
    auto [a, b] = threefry::hash(run.k0[i * run.s0], run.k1[i * run.s1], run.x0[i * run.s2],
                                 run.x1[i * run.s3]);
    run.y0[i] = a;
    run.y1[i] = b;
  }
}

}  // namespace kiln::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(Threefry2x32Run);

void threefry2x32_run(const ThreefryRun& run, size_t n) {
  HWY_DYNAMIC_DISPATCH(Threefry2x32Run)(run, n);
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
