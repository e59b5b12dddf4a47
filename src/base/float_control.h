// The floating-point control state kernels run under, per thread: IEEE (the default:
// subnormal numbers computed exactly) or flush-to-zero (subnormal inputs read as zero and
// subnormal results written as zero; on x86 the MXCSR FTZ and DAZ bits). On x86 every
// operation that meets a subnormal costs a microcode assist of about a hundred cycles, so
// a training step whose gradients or optimizer moments underflow runs measurably slower
// under IEEE (docs/performance.md). The state is captured by ComputePool::parallel_for and
// applied to the chunks that other threads run, so a kernel's result never depends on
// which thread ran which chunk. Elsewhere than x86-64 these are no-ops.
#pragma once

#include <cstdint>

namespace kiln {

// The calling thread's control word: the mode bits of MXCSR on x86-64 (rounding, masks,
// flush-to-zero; not the sticky exception flags), 0 elsewhere.
uint32_t float_control();
void set_float_control(uint32_t control);
// `control` with flush-to-zero and denormals-are-zero set, or cleared.
uint32_t with_flush_denormals(uint32_t control, bool flush);

// Sets the calling thread's control word for a scope and restores it after.
class ScopedFloatControl {
 public:
  explicit ScopedFloatControl(uint32_t control) : previous_(float_control()) {
    if (control != previous_) set_float_control(control);
  }
  ~ScopedFloatControl() {
    if (float_control() != previous_) set_float_control(previous_);
  }
  ScopedFloatControl(const ScopedFloatControl&) = delete;
  ScopedFloatControl& operator=(const ScopedFloatControl&) = delete;

 private:
  uint32_t previous_;
};

}  // namespace kiln
