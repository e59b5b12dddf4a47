// The numeric limits of a dtype, as jnp.finfo and jnp.iinfo give them.
//
//   kiln::finfo(kiln::DType::bf16).eps;   // 0.0078125 (2^-7)
//   kiln::finfo(kiln::DType::f16).max;    // 65504
//   kiln::iinfo(kiln::DType::u8).max;     // 255
#pragma once

#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

// A floating dtype's limits, each value exact in double (they are values of the dtype).
// The names are NumPy's.
struct FloatInfo {
  DType dtype = DType::f32;
  int bits = 0;                   // storage width
  int nmant = 0;                  // explicit mantissa bits
  int nexp = 0;                   // exponent bits
  int minexp = 0;                 // exponent of tiny: tiny = 2^minexp
  int maxexp = 0;                 // the smallest power of 2 that overflows: 2^maxexp
  int precision = 0;              // decimal digits the format keeps: floor(nmant * log10 2)
  double eps = 0;                 // 1's distance to the next larger value: 2^-nmant
  double epsneg = 0;              // 1's distance to the next smaller value: 2^-(nmant + 1)
  double max = 0;                 // the largest finite value
  double min = 0;                 // the most negative finite value, -max
  double tiny = 0;                // the smallest positive normal value (smallest_normal)
  double smallest_subnormal = 0;  // the smallest positive value: 2^(minexp - nmant)
  double resolution = 0;          // 10^-precision, rounded to the dtype as NumPy gives it
};

// An integer dtype's range.
struct IntInfo {
  DType dtype = DType::i32;
  int bits = 0;
  int64_t min = 0;
  int64_t max = 0;
};

// A non-floating dtype is an error naming it (iinfo takes the integers).
FloatInfo finfo(DType dtype, CallSite site = CallSite());
// A dtype that is not an integer (bool included, as in NumPy) is an error naming it.
IntInfo iinfo(DType dtype, CallSite site = CallSite());

}  // namespace kiln
