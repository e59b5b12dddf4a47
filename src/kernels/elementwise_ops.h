// The scalar meaning of every elementwise primitive, written once. Reference kernels call
// these per element; fast kernels must agree with them (checked by tests/prims/op_table).
// Each op takes values in the compute type (float for 16-bit floats).
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/special_math.h"
#include "kiln/error.h"

namespace kiln::elementwise {

template <typename T>
using unsigned_of = std::make_unsigned_t<T>;

// Which compute types each op accepts; the constraints let kernels instantiate one loop per
// dtype and skip the combinations abstract evaluation already rejected.
template <typename T>
concept Float = std::floating_point<T>;
template <typename T>
concept Numeric = std::is_arithmetic_v<T> && !std::same_as<T, bool>;
template <typename T>
concept BoolOrInt = std::integral<T>;
template <typename T>
concept Integer = std::integral<T> && !std::same_as<T, bool>;
template <typename T>
concept Any = std::is_arithmetic_v<T>;

// Integer arithmetic wraps modulo 2^bits, as in XLA; computed in unsigned to avoid UB.
template <typename T>
T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<unsigned_of<T>>(a) + static_cast<unsigned_of<T>>(b));
}
template <typename T>
T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<unsigned_of<T>>(a) - static_cast<unsigned_of<T>>(b));
}
template <typename T>
T wrap_mul(T a, T b) {
  // uint8_t would promote to int; multiply in at least unsigned int.
  using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, unsigned_of<T>>;
  return static_cast<T>(static_cast<Wide>(static_cast<unsigned_of<T>>(a)) *
                        static_cast<Wide>(static_cast<unsigned_of<T>>(b)));
}

struct Neg {
  template <Numeric T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return wrap_sub(T{0}, x);
    else
      return -x;
  }
};
struct Abs {
  template <Numeric T>
  T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else if constexpr (std::is_integral_v<T>)
      return x < 0 ? wrap_sub(T{0}, x) : x;
    else
      return std::fabs(x);
  }
};
struct Sign {
  // Zero and NaN map to themselves (so -0 stays -0), as in XLA.
  template <Numeric T>
  T operator()(T x) const {
    if (x > T{0}) return T{1};
    if constexpr (std::is_signed_v<T>) {
      if (x < T{0}) return T{-1};
    }
    return x;
  }
};
struct Exp {
  template <Float T>
  T operator()(T x) const {
    return std::exp(x);
  }
};
struct Expm1 {
  template <Float T>
  T operator()(T x) const {
    return std::expm1(x);
  }
};
struct Log {
  template <Float T>
  T operator()(T x) const {
    return std::log(x);
  }
};
struct Log1p {
  template <Float T>
  T operator()(T x) const {
    return std::log1p(x);
  }
};
struct Sqrt {
  template <Float T>
  T operator()(T x) const {
    return std::sqrt(x);
  }
};
struct Rsqrt {
  template <Float T>
  T operator()(T x) const {
    return T{1} / std::sqrt(x);
  }
};
struct Tanh {
  template <Float T>
  T operator()(T x) const {
    return std::tanh(x);
  }
};
struct Logistic {
  // Stable at both ends: never evaluates exp of a large positive number.
  template <Float T>
  T operator()(T x) const {
    if (x >= T{0}) return T{1} / (T{1} + std::exp(-x));
    T e = std::exp(x);
    return e / (T{1} + e);
  }
};
struct Sin {
  template <Float T>
  T operator()(T x) const {
    return std::sin(x);
  }
};
struct Cos {
  template <Float T>
  T operator()(T x) const {
    return std::cos(x);
  }
};
struct Floor {
  template <Float T>
  T operator()(T x) const {
    return std::floor(x);
  }
};
struct Ceil {
  template <Float T>
  T operator()(T x) const {
    return std::ceil(x);
  }
};
struct Round {
  // Half to even (the default rounding mode), like numpy.round.
  template <Float T>
  T operator()(T x) const {
    return std::nearbyint(x);
  }
};
struct IsFinite {
  template <Float T>
  bool operator()(T x) const {
    return std::isfinite(x);
  }
};
struct Not {
  template <BoolOrInt T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>)
      return !x;
    else
      return static_cast<T>(~x);
  }
};
struct Erf {
  template <Float T>
  T operator()(T x) const {
    return special::erf(x);
  }
};
struct ErfInv {
  template <Float T>
  T operator()(T x) const {
    return special::erf_inv(x);
  }
};

struct Add {
  template <Numeric T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrap_add(a, b);
    else
      return a + b;
  }
};
struct Sub {
  template <Numeric T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrap_sub(a, b);
    else
      return a - b;
  }
};
struct Mul {
  template <Numeric T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrap_mul(a, b);
    else
      return a * b;
  }
};
[[noreturn]] void integer_division_by_zero();
struct Div {
  template <Numeric T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) integer_division_by_zero();
      if constexpr (std::is_signed_v<T>) {
        if (a == std::numeric_limits<T>::min() && b == T{-1}) return a;  // wraps, as in XLA
      }
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
struct Rem {
  template <Numeric T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) integer_division_by_zero();
      if constexpr (std::is_signed_v<T>) {
        if (b == T{-1}) return T{0};
      }
      return static_cast<T>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};
struct Pow {
  template <Float T>
  T operator()(T a, T b) const {
    return std::pow(a, b);
  }
};
struct Max {
  template <Numeric T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return a > b ? a : b;
  }
};
struct Min {
  template <Numeric T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return a < b ? a : b;
  }
};
struct And {
  template <BoolOrInt T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a && b;
    else
      return static_cast<T>(a & b);
  }
};
struct Or {
  template <BoolOrInt T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a || b;
    else
      return static_cast<T>(a | b);
  }
};
struct Xor {
  template <BoolOrInt T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a != b;
    else
      return static_cast<T>(a ^ b);
  }
};
struct Eq {
  template <Any T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct Ne {
  template <Any T>
  bool operator()(T a, T b) const {
    return a != b;
  }
};
struct Lt {
  template <Any T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct Le {
  template <Any T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct Gt {
  template <Any T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct Ge {
  template <Any T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};

// Shifts follow XLA: the amount is read as unsigned, and an amount of at least the bit
// width (a negative one included) shifts everything out: 0 for left and logical shifts,
// the sign fill for arithmetic ones. Computed in unsigned arithmetic (no UB).
template <Integer T>
bool shift_out_of_range(T amount) {
  return static_cast<unsigned_of<T>>(amount) >= sizeof(T) * 8;
}
struct ShiftLeft {
  template <Integer T>
  T operator()(T x, T amount) const {
    if (shift_out_of_range(amount)) return T{0};
    using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, unsigned_of<T>>;
    return static_cast<T>(static_cast<Wide>(static_cast<unsigned_of<T>>(x)) << amount);
  }
};
struct ShiftRightLogical {
  template <Integer T>
  T operator()(T x, T amount) const {
    if (shift_out_of_range(amount)) return T{0};
    return static_cast<T>(static_cast<unsigned_of<T>>(x) >> amount);
  }
};
struct ShiftRightArithmetic {
  template <Integer T>
  T operator()(T x, T amount) const {
    if constexpr (std::is_unsigned_v<T>) {
      // The sign bit of an unsigned type is its top bit, as in XLA.
      using S = std::make_signed_t<T>;
      return static_cast<T>(ShiftRightArithmetic{}(static_cast<S>(x), static_cast<S>(amount)));
    } else {
      T fill = x < 0 ? T{-1} : T{0};
      if (shift_out_of_range(amount)) return fill;
      return static_cast<T>(x >> amount);  // arithmetic for signed types since C++20
    }
  }
};

}  // namespace kiln::elementwise
