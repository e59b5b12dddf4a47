// An array as a source file holds it: dtype, shape (the first axis indexes records) and
// the little-endian bytes in C order, plus the file it came from, for messages. The NPY and
// CSV readers produce it; contracts check it; the dataset converts it for batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::data {

struct RawArray {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;  // shape[0]: records
  std::vector<uint8_t> bytes;  // product(shape) * dtype_size(dtype)
  std::string file;

  int64_t records() const { return shape.empty() ? 1 : shape[0]; }
  // Elements per record (product of shape[1:]).
  int64_t record_size() const;
  // Element `index` (flat, C order) as a double (bool 0/1, f16/bf16 widened).
  double element(int64_t index) const;
};

}  // namespace kiln::data
