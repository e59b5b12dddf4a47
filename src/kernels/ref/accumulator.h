// How the reference kernels accumulate: every element widened once into an accumulator,
// so that a sum or a dot product rounds once, at the end. Floats accumulate in double;
// integers in a uint64_t that wraps (two's complement modulo 2^64, which agrees with every
// narrower width once wrapped back); bool in a 0/1 byte (only max/min accept bool).
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/element_convert.h"

namespace kiln::ref {

template <typename S>
using accum_t = std::conditional_t<std::is_same_v<S, bool>, uint8_t,
                                   std::conditional_t<std::is_integral_v<S>, uint64_t, double>>;

template <typename S>
accum_t<S> to_accum(S value) {
  if constexpr (std::is_same_v<S, bool>) {
    return value ? 1 : 0;
  } else if constexpr (std::is_integral_v<S>) {
    // Sign-extends, so the uint64_t arithmetic is the two's complement one.
    return static_cast<uint64_t>(static_cast<int64_t>(value));
  } else {
    return static_cast<double>(widen(value));
  }
}

// Rounds (floats) or wraps (ints) an accumulator into the result's storage type D.
template <typename D, typename A>
D from_accum(A acc) {
  if constexpr (std::is_same_v<A, uint64_t>) {
    return convert_element<D>(static_cast<int64_t>(acc));
  } else {
    return convert_element<D>(acc);
  }
}

}  // namespace kiln::ref
