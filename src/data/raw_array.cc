// Element access of RawArray, for validation (raw_array.h).
#include "data/raw_array.h"

#include <cstring>

namespace kiln::data {
namespace {

template <class T>
T load(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace

int64_t RawArray::record_size() const {
  int64_t size = 1;
  for (size_t axis = 1; axis < shape.size(); ++axis) size *= shape[axis];
  return size;
}

double RawArray::element(int64_t index) const {
  const uint8_t* at = bytes.data() + index * dtype_size(dtype);
  switch (dtype) {
    case DType::bool_:
      return *at != 0 ? 1.0 : 0.0;
    case DType::u8:
      return *at;
    case DType::i32:
      return load<int32_t>(at);
    case DType::i64:
      return static_cast<double>(load<int64_t>(at));
    case DType::u32:
      return load<uint32_t>(at);
    case DType::f16:
      return f16::from_bits(load<uint16_t>(at)).to_float();
    case DType::bf16:
      return bf16::from_bits(load<uint16_t>(at)).to_float();
    case DType::f32:
      return load<float>(at);
    case DType::f64:
      return load<double>(at);
  }
  return 0;
}

}  // namespace kiln::data
