// Conversions between binary32 and the 16-bit float formats (f16, bf16).
// Written on the bit patterns so that rounding, subnormals, overflow and NaN are exact and
// do not depend on the compiler's or CPU's float16 support.
#include <bit>
#include <cstdint>

#include "kiln/dtype.h"

namespace kiln {

bf16 bf16::from_float(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep sign and the top payload bits, force the quiet bit so the payload cannot
    // collapse to an infinity.
    return bf16{static_cast<uint16_t>((bits >> 16) | 0x0040u)};
  }
  // Round to nearest even on the 16 dropped bits; a carry into the exponent correctly
  // produces the next binade or infinity.
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return bf16{static_cast<uint16_t>((bits + rounding_bias) >> 16)};
}

float bf16::to_float() const {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

f16 f16::from_float(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude >= 0x7f800000u) {  // Inf or NaN
    if (magnitude == 0x7f800000u) return f16{static_cast<uint16_t>(sign | 0x7c00u)};
    uint16_t payload = static_cast<uint16_t>((magnitude >> 13) & 0x03ffu);
    return f16{static_cast<uint16_t>(sign | 0x7c00u | 0x0200u | payload)};
  }
  // Finite values at or above 65520 round to infinity (65504 is the largest f16).
  if (magnitude >= 0x477ff000u) return f16{static_cast<uint16_t>(sign | 0x7c00u)};

  int32_t exponent = static_cast<int32_t>(magnitude >> 23) - 127;
  if (exponent >= -14) {
    // Normal f16: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
    uint32_t rebiased = magnitude - (112u << 23);
    uint32_t rounding_bias = 0x0fffu + ((rebiased >> 13) & 1u);
    return f16{static_cast<uint16_t>(sign | ((rebiased + rounding_bias) >> 13))};
  }
  if (exponent < -25) return f16{sign};  // below half the smallest subnormal: signed zero
  // Subnormal f16: value = m * 2^-24 with m < 1024; shift the full significand (with its
  // implicit bit) into place and round to nearest even on the bits shifted out.
  uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
  int shift = -exponent - 1;  // 14..24: aligns 2^exponent with the f16 unit 2^-24
  uint32_t kept = significand >> shift;
  uint32_t dropped = significand & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (dropped > half || (dropped == half && (kept & 1u))) ++kept;
  return f16{static_cast<uint16_t>(sign | kept)};
}

float f16::to_float() const {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x03ffu;
  uint32_t out;
  if (exponent == 0x1fu) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {
    // Subnormal: normalise into a binary32 normal number.
    int shift = std::countl_zero(mantissa) - 21;  // leading zeros within the 10-bit field
    mantissa = (mantissa << shift) & 0x03ffu;
    out = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

}  // namespace kiln
