// See float_control.h.
#include "base/float_control.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace kiln {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kFlushToZero = 0x8000;       // MXCSR.FTZ: subnormal results become 0
constexpr uint32_t kDenormalsAreZero = 0x0040;  // MXCSR.DAZ: subnormal inputs read as 0
// The sticky exception flags (invalid, denormal, divide-by-zero, overflow, underflow,
// precision): status, not mode, so they are neither compared nor carried.
constexpr uint32_t kStatusFlags = 0x003f;
#endif

}  // namespace

uint32_t float_control() {
#if defined(__x86_64__)
  return _mm_getcsr() & ~kStatusFlags;
#else
  return 0;
#endif
}

void set_float_control(uint32_t control) {
#if defined(__x86_64__)
  _mm_setcsr((control & ~kStatusFlags) | (_mm_getcsr() & kStatusFlags));
#else
  (void)control;
#endif
}

uint32_t with_flush_denormals(uint32_t control, bool flush) {
#if defined(__x86_64__)
  constexpr uint32_t bits = kFlushToZero | kDenormalsAreZero;
  return flush ? control | bits : control & ~bits;
#else
  (void)flush;
  return control;
#endif
}

}  // namespace kiln
