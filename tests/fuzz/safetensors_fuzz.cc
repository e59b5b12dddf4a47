// safetensors files through load_safetensors (header and payload). Property: what loads
// saves (save_safetensors) and loads again to the same names, dtypes, shapes, bytes and
// metadata.
#include <cstdint>

#include "fuzz_support.h"
#include "kiln/safetensors.h"

namespace {

bool same_bytes(const kiln::Array& a, const kiln::Array& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  return a.to_host().bytes == b.to_host().bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln::fuzz::InputFile input(".safetensors");
  static kiln::fuzz::InputFile rewritten(".rewritten.safetensors");
  kiln::SafetensorsFile file;
  const auto& path = input.write(data, size);
  if (!kiln::fuzz::parses([&] { file = kiln::load_safetensors(path); })) return 0;
  kiln::SafetensorsFile again;
  bool round_trip = kiln::fuzz::parses([&] {
    kiln::save_safetensors(rewritten.path(), file.arrays, file.metadata);
    again = kiln::load_safetensors(rewritten.path());
  });
  if (!round_trip) kiln::fuzz::finding("a loaded file could not be saved and loaded again");
  if (again.metadata != file.metadata) kiln::fuzz::finding("metadata changed in a round trip");
  if (again.arrays.size() != file.arrays.size()) kiln::fuzz::finding("tensor count changed");
  for (size_t i = 0; i < file.arrays.size(); ++i) {
    if (again.arrays[i].first != file.arrays[i].first ||
        !same_bytes(again.arrays[i].second, file.arrays[i].second)) {
      kiln::fuzz::finding("a tensor changed in a round trip");
    }
  }
  return 0;
}
