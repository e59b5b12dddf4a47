// DType names and properties.
#include "kiln/dtype.h"

namespace kiln {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bool_:
      return "bool";
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u32:
      return "u32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType dtype : kAllDTypes) {
    if (dtype_name(dtype) == name) return dtype;
  }
  return std::nullopt;
}

int dtype_size(DType dtype) {
  switch (dtype) {
    case DType::bool_:
    case DType::u8:
      return 1;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::i32:
    case DType::u32:
    case DType::f32:
      return 4;
    case DType::i64:
    case DType::f64:
      return 8;
  }
  return 0;
}

bool is_floating(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f32 || dtype == DType::f64;
}
bool is_unsigned(DType dtype) {
  return dtype == DType::u8 || dtype == DType::u32;
}
bool is_signed_integer(DType dtype) {
  return dtype == DType::i32 || dtype == DType::i64;
}
bool is_integer(DType dtype) {
  return is_unsigned(dtype) || is_signed_integer(dtype);
}

}  // namespace kiln
