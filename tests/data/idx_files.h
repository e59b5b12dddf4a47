// Test helpers for the data layer: writers of raw, plain and gzip-compressed files (IDX
// files are built byte by byte in the tests).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/scratch_dir.h"

namespace kiln::testing {

using Bytes = std::vector<uint8_t>;

inline void write_bytes(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline Bytes gzip_bytes(const Bytes& bytes) {
  uLongf size = compressBound(static_cast<uLong>(bytes.size())) + 32;
  Bytes out(size);
  z_stream stream{};
  // windowBits 15 + 16: a gzip wrapper rather than zlib's.
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  stream.next_in = const_cast<Bytes::value_type*>(bytes.data());
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// An IDX u8 file's bytes: magic 00 00 08 <rank>, big-endian dims, then the values.
inline Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& values,
                       uint8_t type_code = 0x08) {
  Bytes bytes = {0, 0, type_code, static_cast<uint8_t>(dims.size())};
  for (uint32_t dim : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<uint8_t>(dim >> shift));
  }
  bytes.insert(bytes.end(), values.begin(), values.end());
  return bytes;
}

inline Bytes iota_bytes(size_t count, uint8_t modulo = 251) {
  Bytes values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<uint8_t>(i % modulo);
  return values;
}

}  // namespace kiln::testing
