// safetensors files written from host copies of arrays (kiln/safetensors.h writes from
// device arrays): the background savepoint writer holds only host bytes, taken at a step
// boundary, and must not touch the device while training goes on. The bytes are the same
// as save_safetensors gives for the same arrays.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kiln/array.h"

namespace kiln::io {

struct HostTensor {
  std::string name;
  HostArray array;
};

// Names must be unique and non-empty; each tensor's bytes must match its type's size.
void write_safetensors_from_host(const std::filesystem::path& path,
                                 const std::vector<HostTensor>& tensors,
                                 const std::map<std::string, std::string>& metadata = {});

}  // namespace kiln::io
