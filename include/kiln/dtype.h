// Element types of kiln arrays, their properties, and the 16-bit float formats.
//
//   kiln::DType t = kiln::DType::bf16;
//   kiln::dtype_name(t);   // "bf16"
//   kiln::dtype_size(t);   // 2
//   kiln::bf16 h = kiln::bf16::from_float(1.0f / 3.0f);   // rounds to nearest even
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t { bool_, u8, i32, i64, u32, f16, bf16, f32, f64 };

inline constexpr int kNumDTypes = 9;
inline constexpr DType kAllDTypes[kNumDTypes] = {DType::bool_, DType::u8,  DType::i32,
                                                 DType::i64,   DType::u32, DType::f16,
                                                 DType::bf16,  DType::f32, DType::f64};

std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
int dtype_size(DType dtype);
bool is_floating(DType dtype);
bool is_integer(DType dtype);   // signed or unsigned, not bool
bool is_unsigned(DType dtype);  // u8, u32
bool is_signed_integer(DType dtype);

// IEEE 754 binary16. Conversion from float rounds to nearest, ties to even; overflow goes
// to infinity, values below the smallest subnormal round to (signed) zero, and NaN stays
// NaN (quiet, sign and top payload bits kept).
struct f16 {
  uint16_t bits = 0;
  static f16 from_float(float value);
  float to_float() const;
  static constexpr f16 from_bits(uint16_t b) { return f16{b}; }
  friend bool operator==(f16, f16) = default;
};

// bfloat16: the top half of a binary32. Conversion rounds to nearest, ties to even, like
// JAX/XLA (not truncation); NaN stays a quiet NaN.
struct bf16 {
  uint16_t bits = 0;
  static bf16 from_float(float value);
  float to_float() const;
  static constexpr bf16 from_bits(uint16_t b) { return bf16{b}; }
  friend bool operator==(bf16, bf16) = default;
};

// The C++ type that stores one element of each dtype.
template <DType T>
struct StorageOf;
template <>
struct StorageOf<DType::bool_> {
  using type = bool;
};
template <>
struct StorageOf<DType::u8> {
  using type = uint8_t;
};
template <>
struct StorageOf<DType::i32> {
  using type = int32_t;
};
template <>
struct StorageOf<DType::i64> {
  using type = int64_t;
};
template <>
struct StorageOf<DType::u32> {
  using type = uint32_t;
};
template <>
struct StorageOf<DType::f16> {
  using type = f16;
};
template <>
struct StorageOf<DType::bf16> {
  using type = bf16;
};
template <>
struct StorageOf<DType::f32> {
  using type = float;
};
template <>
struct StorageOf<DType::f64> {
  using type = double;
};
template <DType T>
using storage_t = typename StorageOf<T>::type;

// The dtype whose storage is the C++ type T (for from_host and friends).
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<bool>() {
  return DType::bool_;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint32_t>() {
  return DType::u32;
}
template <>
constexpr DType dtype_of<f16>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}

// Calls fn(std::integral_constant<DType, d>{}) for the runtime dtype d; the kernels use it
// to instantiate one loop per dtype.
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::bool_:
      return fn(std::integral_constant<DType, DType::bool_>{});
    case DType::u8:
      return fn(std::integral_constant<DType, DType::u8>{});
    case DType::i32:
      return fn(std::integral_constant<DType, DType::i32>{});
    case DType::i64:
      return fn(std::integral_constant<DType, DType::i64>{});
    case DType::u32:
      return fn(std::integral_constant<DType, DType::u32>{});
    case DType::f16:
      return fn(std::integral_constant<DType, DType::f16>{});
    case DType::bf16:
      return fn(std::integral_constant<DType, DType::bf16>{});
    case DType::f32:
      return fn(std::integral_constant<DType, DType::f32>{});
    case DType::f64:
      return fn(std::integral_constant<DType, DType::f64>{});
  }
  __builtin_unreachable();
}

}  // namespace kiln
