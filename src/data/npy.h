// Reader for NumPy .npy files (format versions 1.0, 2.0 and 3.0), C order, in every dtype
// kiln has except bf16, which NumPy has no descr for: |b1 |u1 <i4 <i8 <u4 <f2 <f4 <f8.
#pragma once

#include <filesystem>

#include "data/raw_array.h"

namespace kiln::data {

// Reads `path`. Errors (kiln::Error) name the file and what is wrong: missing, bad magic,
// unknown version, a header that is not the dict NumPy writes (keys descr, fortran_order,
// shape), longer than 10000 bytes (NumPy's own limit), Fortran order, a descr kiln has no
// dtype for (big-endian, i8, i16, u16, u64, complex, structured, object), a shape whose
// size overflows, data shorter or longer than the shape says.
RawArray read_npy(const std::filesystem::path& path);

// Writes `array` as a version 1.0 .npy file that NumPy (and read_npy) reads, atomically (a
// reader never sees half a file). Every dtype read_npy reads; bf16 has no descr and is an
// error.
void write_npy(const std::filesystem::path& path, const RawArray& array);

}  // namespace kiln::data
