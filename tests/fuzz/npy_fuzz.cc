// NumPy .npy files through read_npy (the reader of data.dataset = "npy"). Property: what
// reads holds exactly product(shape) elements of its dtype, and each can be read.
#include <cstdint>

#include "data/npy.h"
#include "fuzz_support.h"
#include "kiln/dtype.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln::fuzz::InputFile input(".npy");
  const auto& path = input.write(data, size);
  kiln::data::RawArray array;
  if (!kiln::fuzz::parses([&] { array = kiln::data::read_npy(path); })) return 0;
  int64_t count = 1;
  for (int64_t d : array.shape) {
    if (d < 0) kiln::fuzz::finding("read_npy returned a negative dimension");
    count *= d;
  }
  auto bytes = static_cast<uint64_t>(count) * static_cast<uint64_t>(kiln::dtype_size(array.dtype));
  if (bytes != array.bytes.size()) {
    kiln::fuzz::finding("read_npy returned a different number of bytes than shape x dtype");
  }
  double sum = 0;  // every element readable (ASan checks each read)
  for (int64_t i = 0; i < count; ++i) sum += array.element(i);
  (void)sum;
  return 0;
}
