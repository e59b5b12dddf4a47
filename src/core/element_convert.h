// Conversion of one element between dtypes, with the semantics convert_element_type
// documents: floats to integers truncate toward zero, saturate at the integer's range and
// map NaN to 0; integers wrap modulo 2^bits; anything to bool is `!= 0` (NaN is true);
// floats narrow with round-to-nearest-even. Shared by every kernel that converts.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/dtype.h"

namespace kiln {

// The type elementwise kernels compute in: 16-bit floats widen to float.
template <typename S>
using compute_t = std::conditional_t<std::is_same_v<S, f16> || std::is_same_v<S, bf16>, float, S>;

template <typename S>
inline compute_t<S> widen(S value) {
  if constexpr (std::is_same_v<S, f16> || std::is_same_v<S, bf16>) {
    return value.to_float();
  } else {
    return value;
  }
}

// double -> float rounding to odd: the low bit records inexactness, so a second rounding
// to a narrower format (f16/bf16) gives the same result as rounding the double directly.
inline float round_to_odd_float(double value) {
  float rounded = static_cast<float>(value);
  if (std::isnan(value) || static_cast<double>(rounded) == value) return rounded;
  if (std::fabs(static_cast<double>(rounded)) > std::fabs(value)) {
    rounded = std::nextafter(rounded, 0.0f);
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(rounded) | 1u);
}

template <typename D, typename S>
inline D convert_element(S value) {
  if constexpr (std::is_same_v<D, S>) {
    return value;
  } else if constexpr (std::is_same_v<D, f16> || std::is_same_v<D, bf16>) {
    if constexpr (std::is_same_v<S, double> || std::is_same_v<S, int64_t>) {
      return D::from_float(round_to_odd_float(static_cast<double>(value)));
    } else if constexpr (std::is_same_v<S, bool>) {
      return D::from_float(value ? 1.0f : 0.0f);
    } else {
      return D::from_float(static_cast<float>(widen(value)));
    }
  } else if constexpr (std::is_same_v<S, f16> || std::is_same_v<S, bf16>) {
    return convert_element<D>(value.to_float());
  } else if constexpr (std::is_same_v<D, bool>) {
    return value != S{0};
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(value);
  } else if constexpr (std::is_floating_point_v<S>) {
    // Float to integer: NaN -> 0, truncate, saturate.
    if (std::isnan(value)) return D{0};
    using Limits = std::numeric_limits<D>;
    if (value <= static_cast<S>(Limits::lowest())) return Limits::lowest();
    if (value >= static_cast<S>(Limits::max())) return Limits::max();
    return static_cast<D>(value);
  } else {
    return static_cast<D>(value);  // integer/bool to integer: modular (C++20 two's complement)
  }
}

}  // namespace kiln
