// IDX files, plain and gzip-compressed, through read_idx (the reader the Fashion-MNIST
// loader uses). The first input byte picks the form (even: plain .idx, odd: .gz) and a row
// limit; the rest is the file. Property: what reads has as many values as its dims say.
#include <cstdint>

#include "data/idx.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static kiln::fuzz::InputFile plain(".idx");
  static kiln::fuzz::InputFile gzipped(".gz");
  bool gz = (data[0] & 1) != 0;
  int64_t max_rows = (data[0] >> 1) & 3;  // 0 (all rows), 1, 2 or 3
  const auto& path = (gz ? gzipped : plain).write(data + 1, size - 1);
  kiln::data::IdxArray idx;
  if (!kiln::fuzz::parses([&] { idx = kiln::data::read_idx(path, max_rows); })) return 0;
  // The product below cannot overflow only because the reader refuses dims whose strides
  // do not fit in an int64 (zero sizes included: they still have strides).
  if (!kiln::strides_fit_int64(idx.dims)) {
    kiln::fuzz::finding("read_idx returned dims whose strides overflow an int64");
  }
  int64_t count = 1;
  for (int64_t d : idx.dims) count *= d;
  if (count != static_cast<int64_t>(idx.values.size())) {
    kiln::fuzz::finding("read_idx returned a different number of values than its dims");
  }
  if (max_rows > 0 && !idx.dims.empty() && idx.dims[0] > max_rows) {
    kiln::fuzz::finding("read_idx returned more rows than max_rows");
  }
  return 0;
}
