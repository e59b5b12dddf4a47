// Test helper for the data layer: .npy files built byte by byte.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "data/idx_files.h"

namespace kiln::testing {

// An .npy file: magic, version, header length, the dict padded with spaces to a multiple
// of 64 bytes and ended by '\n' (extra_spaces more first, as current NumPy writes), data.
inline Bytes npy_bytes(const std::string& dict, const Bytes& data, int major = 1,
                       size_t extra_spaces = 0) {
  size_t length_bytes = major == 1 ? 2 : 4;
  std::string header = dict + std::string(extra_spaces, ' ');
  size_t total = 8 + length_bytes + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  Bytes bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (size_t i = 0; i < length_bytes; ++i)
    bytes.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

template <class T>
Bytes bytes_of(const std::vector<T>& values) {
  Bytes bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

inline std::string npy_dict(const std::string& descr, const std::string& shape,
                            bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

}  // namespace kiln::testing
