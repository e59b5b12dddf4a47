// finfo and iinfo. The float limits follow from each format's mantissa and exponent widths
// (IEEE 754 binary16/32/64, and bfloat16: binary32's exponent with 7 mantissa bits), so one
// formula serves all four; tests/core/dtype_info_test.cc checks them against the formats'
// bit patterns and std::numeric_limits, and against jnp.finfo.
#include "kiln/dtype_info.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/element_convert.h"

namespace kiln {
namespace {

// 10^-precision is not a binary fraction; NumPy and JAX give it rounded to the dtype, as
// convert_element_type rounds (f64 -> f16/bf16 directly, without double rounding).
double rounded_to(DType dtype, double value) {
  return visit_dtype(dtype, [value](auto tag) -> double {
    using Stored = storage_t<decltype(tag)::value>;
    return static_cast<double>(widen(convert_element<Stored>(value)));
  });
}

FloatInfo float_info(DType dtype, int bits, int nmant, int nexp) {
  FloatInfo info;
  info.dtype = dtype;
  info.bits = bits;
  info.nmant = nmant;
  info.nexp = nexp;
  info.maxexp = 1 << (nexp - 1);
  info.minexp = 2 - info.maxexp;
  info.precision = static_cast<int>(std::floor(nmant * std::log10(2.0)));
  info.eps = std::ldexp(1.0, -nmant);
  info.epsneg = std::ldexp(1.0, -nmant - 1);
  // The largest finite value: every mantissa bit set, the largest exponent.
  info.max = std::ldexp(2.0 - info.eps, info.maxexp - 1);
  info.min = -info.max;
  info.tiny = std::ldexp(1.0, info.minexp);
  info.smallest_subnormal = std::ldexp(1.0, info.minexp - nmant);
  info.resolution = rounded_to(dtype, std::pow(10.0, -info.precision));
  return info;
}

}  // namespace

FloatInfo finfo(DType dtype, CallSite site) {
  switch (dtype) {
    case DType::f16:
      return float_info(dtype, 16, 10, 5);
    case DType::bf16:
      return float_info(dtype, 16, 7, 8);
    case DType::f32:
      return float_info(dtype, 32, 23, 8);
    case DType::f64:
      return float_info(dtype, 64, 52, 11);
    default:
      fail(site, fmt::format("finfo: {} is not a floating dtype", dtype_name(dtype)),
           is_integer(dtype) ? "iinfo gives an integer dtype's range"
                             : "finfo takes f16, bf16, f32 or f64");
  }
}

IntInfo iinfo(DType dtype, CallSite site) {
  auto range = [dtype]<typename T>(T) {
    return IntInfo{.dtype = dtype,
                   .bits = static_cast<int>(sizeof(T) * 8),
                   .min = static_cast<int64_t>(std::numeric_limits<T>::min()),
                   .max = static_cast<int64_t>(std::numeric_limits<T>::max())};
  };
  switch (dtype) {
    case DType::u8:
      return range(uint8_t{});
    case DType::i32:
      return range(int32_t{});
    case DType::i64:
      return range(int64_t{});
    case DType::u32:
      return range(uint32_t{});
    default:
      fail(site, fmt::format("iinfo: {} is not an integer dtype", dtype_name(dtype)),
           is_floating(dtype) ? "finfo gives a floating dtype's limits"
                              : "iinfo takes u8, u32, i32 or i64");
  }
}

}  // namespace kiln
