// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header mapping each tensor name to {dtype, shape, data_offsets},
// optional "__metadata__" (string to string), then the tensors' bytes, row-major, little
// endian. kiln writes tensors sorted by name with no padding between them, so the same
// arrays always give the same bytes; files are written to a temporary name, fsynced and
// renamed, so a reader never sees half a file.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/tree.h"

namespace kiln {

using NamedArrays = std::vector<std::pair<std::string, Array>>;

// Names must be unique and non-empty. Waits for the arrays' values.
void save_safetensors(const std::filesystem::path& path, const NamedArrays& arrays,
                      const std::map<std::string, std::string>& metadata = {});
// A Tree's leaves under their paths ("dense_1/kernel").
void save_safetensors(const std::filesystem::path& path, const Tree& tree,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  NamedArrays arrays;  // in name order, on the default device
  std::map<std::string, std::string> metadata;
};
// Errors name the file and what is wrong (short header, bad JSON, unknown dtype, offsets
// outside the data or overlapping, shape/size mismatch).
SafetensorsFile load_safetensors(const std::filesystem::path& path);

}  // namespace kiln
