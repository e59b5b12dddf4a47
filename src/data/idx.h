// Reader for IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed. The
// dataset (dataset.h) reads Fashion-MNIST and other IDX pairs through it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/raw_array.h"
#include "kiln/shape.h"

namespace kiln::data {

// An IDX file's contents: u8 elements (the only element type the MNIST files use; other
// type codes are rejected with an error naming the file and the code).
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, product(dims) elements
  int64_t rows_in_file = 0;     // dims[0] as the file's header gives it (before a row limit)
};

// Reads `path` (gzip-compressed when it ends in .gz). Errors name the file and what is
// wrong: missing, not gzip, bad magic, unsupported type code, truncated (expected vs
// actual bytes), trailing bytes. `max_rows` > 0 reads only the first max_rows entries of
// the first axis (dims[0] becomes at most max_rows): the rest of the file is neither
// decompressed nor checked, so a truncation or trailing bytes beyond them go unnoticed.
IdxArray read_idx(const std::filesystem::path& path, int64_t max_rows = 0);

// The same file as u8 records (the dataset's and `kiln predict`'s form of it).
RawArray read_idx_records(const std::filesystem::path& path, int64_t max_rows = 0,
                          int64_t* rows_in_file = nullptr);

}  // namespace kiln::data
