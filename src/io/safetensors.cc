// safetensors save and load (see include/kiln/safetensors.h and research/formats.md §1).
// Saving streams the header and then each array's bytes into an atomically committed file;
// loading validates the whole header (types, shapes, sizes, offsets tiling the data
// section exactly) before reading any tensor.
#include "kiln/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; kiln copies host bytes as they are");

// The reference implementation's own limit; it also keeps a garbage length from making us
// allocate gigabytes for a header.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::bool_, "BOOL"}, {DType::u8, "U8"},   {DType::i32, "I32"},
    {DType::i64, "I64"},    {DType::u32, "U32"}, {DType::f16, "F16"},
    {DType::bf16, "BF16"},  {DType::f32, "F32"}, {DType::f64, "F64"}};
// Valid safetensors dtypes that have no kiln dtype: named as such rather than "unknown".
constexpr std::string_view kForeignDTypes[] = {
    "I8",      "I16",     "U16",     "U64",         "C64",         "F4",     "F6_E2M3",
    "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0"};

std::string_view safetensors_name(DType dtype) {
  for (const auto& entry : kDTypeNames) {
    if (entry.dtype == dtype) return entry.name;
  }
  return {};
}

std::string kiln_dtype_list() {
  std::string names;
  for (const auto& entry : kDTypeNames)
    names += fmt::format("{}{}", names.empty() ? "" : " ", entry.name);
  return names;
}

// --- save --------------------------------------------------------------------------------

[[noreturn]] void fail_save(const fs::path& path, std::string_view what) {
  fail(kUnknownSite, fmt::format("save_safetensors: '{}': {}", path.string(), what));
}

std::string header_text(const fs::path& path,
                        const std::vector<const NamedArrays::value_type*>& order,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  for (const auto* entry : order) {
    const Array& array = entry->second;
    std::string_view dtype = safetensors_name(array.dtype());
    if (dtype.empty()) {
      fail_save(path, fmt::format("array '{}' has dtype {}, which safetensors cannot store",
                                  entry->first, dtype_name(array.dtype())));
    }
    json shape = json::array();
    for (int64_t dim : array.shape().dims()) shape.push_back(dim);
    uint64_t end = offset + static_cast<uint64_t>(array.size_bytes());
    header[entry->first] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    // nlohmann's objects are std::maps: keys come out sorted, which makes the bytes
    // deterministic. Compact, no ASCII escaping (safetensors headers are UTF-8).
    text = header.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::exception& error) {
    fail_save(path,
              fmt::format("tensor names and metadata must be valid UTF-8 ({})", error.what()));
  }
  // Spaces up to a multiple of 8 bytes, so the data section starts 8-aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderBytes) {
    fail_save(path, fmt::format("the header would be {} bytes; safetensors readers accept at most "
                                "{}",
                                text.size(), kMaxHeaderBytes));
  }
  return text;
}

// --- load --------------------------------------------------------------------------------

[[noreturn]] void fail_load(const fs::path& path, std::string_view what) {
  fail(kUnknownSite, fmt::format("load_safetensors: '{}': {}", path.string(), what));
}

std::string_view json_kind(const json& value) {
  if (value.is_number_unsigned()) return "a non-negative integer";
  if (value.is_number_integer()) return "a negative integer";
  return value.type_name();
}

struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

DType parse_dtype(const fs::path& path, const std::string& name, const json& value) {
  if (!value.is_string()) {
    fail_load(path, fmt::format("tensor '{}': \"dtype\" must be a string, got {}", name,
                                json_kind(value)));
  }
  const auto& text = value.get_ref<const std::string&>();
  for (const auto& entry : kDTypeNames) {
    if (entry.name == text) return entry.dtype;
  }
  bool foreign = std::find(std::begin(kForeignDTypes), std::end(kForeignDTypes), text) !=
                 std::end(kForeignDTypes);
  fail_load(path, fmt::format("tensor '{}' has {} dtype \"{}\"; kiln reads {}", name,
                              foreign ? "safetensors" : "unknown", text, kiln_dtype_list()));
}

std::vector<uint64_t> parse_integers(const fs::path& path, const std::string& name,
                                     std::string_view field, const json& value) {
  if (!value.is_array()) {
    fail_load(path, fmt::format("tensor '{}': \"{}\" must be an array of non-negative integers, "
                                "got {}",
                                name, field, json_kind(value)));
  }
  std::vector<uint64_t> numbers;
  for (const json& item : value) {
    if (!item.is_number_unsigned()) {
      fail_load(path, fmt::format("tensor '{}': \"{}\" must hold non-negative integers, got {} "
                                  "({})",
                                  name, field, json_kind(item), item.dump()));
    }
    numbers.push_back(item.get<uint64_t>());
  }
  return numbers;
}

TensorEntry parse_tensor(const fs::path& path, const std::string& name, const json& value,
                         uint64_t data_size) {
  if (!value.is_object()) {
    fail_load(path, fmt::format("tensor '{}': expected an object with dtype, shape and "
                                "data_offsets, got {}",
                                name, json_kind(value)));
  }
  for (const auto& [field, ignored] : value.items()) {
    if (field != "dtype" && field != "shape" && field != "data_offsets") {
      fail_load(path, fmt::format("tensor '{}' has an unknown field \"{}\" (expected dtype, shape "
                                  "and data_offsets)",
                                  name, field));
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) {
      fail_load(path, fmt::format("tensor '{}' has no \"{}\" field", name, field));
    }
  }
  TensorEntry entry;
  entry.name = name;
  entry.dtype = parse_dtype(path, name, value["dtype"]);
  std::vector<uint64_t> dims = parse_integers(path, name, "shape", value["shape"]);
  uint64_t bytes = static_cast<uint64_t>(dtype_size(entry.dtype));
  bool overflow = false;
  for (uint64_t dim : dims) {
    overflow |= dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
                __builtin_mul_overflow(bytes, dim, &bytes);
    entry.shape.dims().push_back(static_cast<int64_t>(dim));
  }
  if (overflow || bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
      !strides_fit_int64(entry.shape.dims())) {
    fail_load(path, fmt::format("tensor '{}': shape {} has too many elements", name,
                                value["shape"].dump()));
  }
  std::vector<uint64_t> offsets = parse_integers(path, name, "data_offsets", value["data_offsets"]);
  if (offsets.size() != 2) {
    fail_load(path, fmt::format("tensor '{}': \"data_offsets\" must be [begin, end], got {}", name,
                                value["data_offsets"].dump()));
  }
  entry.begin = offsets[0];
  entry.end = offsets[1];
  std::string type = AbstractValue(entry.shape, entry.dtype).to_string();
  if (entry.end < entry.begin) {
    fail_load(path, fmt::format("tensor '{}': data_offsets [{}, {}] end before they begin", name,
                                entry.begin, entry.end));
  }
  if (entry.end > data_size) {
    fail_load(path, fmt::format("tensor '{}': data_offsets [{}, {}] run past the end of the data "
                                "section ({} bytes; is the file truncated?)",
                                name, entry.begin, entry.end, data_size));
  }
  if (entry.end - entry.begin != bytes) {
    fail_load(path,
              fmt::format("tensor '{}' is {}, which takes {} bytes, but its data_offsets "
                          "[{}, {}] hold {}",
                          name, type, bytes, entry.begin, entry.end, entry.end - entry.begin));
  }
  return entry;
}

// The tensors must tile the data section exactly, as the reference reader requires: no
// overlaps (two names sharing bytes), no holes, no bytes left over.
void check_tiling(const fs::path& path, std::vector<const TensorEntry*> entries,
                  uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  uint64_t expected = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry* entry : entries) {
    if (entry->begin < expected) {
      fail_load(path, fmt::format("tensors '{}' (bytes [{}, {}]) and '{}' (bytes [{}, {}]) overlap",
                                  previous->name, previous->begin, previous->end, entry->name,
                                  entry->begin, entry->end));
    }
    if (entry->begin > expected) {
      fail_load(path, fmt::format("bytes [{}, {}] of the data section belong to no tensor (before "
                                  "'{}'); safetensors data must be contiguous",
                                  expected, entry->begin, entry->name));
    }
    expected = entry->end;
    previous = entry;
  }
  if (expected != data_size) {
    fail_load(path, fmt::format("the data section has {} bytes but the tensors use only {}: {} "
                                "trailing bytes",
                                data_size, expected, data_size - expected));
  }
}

// Parses the header JSON, rejecting duplicate keys (which nlohmann would silently merge,
// last one winning) at any depth.
json parse_header(const fs::path& path, const std::string& text) {
  // nlohmann stops at a NUL as if the input ended, which would accept NUL padding and
  // anything after it.
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    fail_load(path, fmt::format("the header is not valid JSON: a NUL byte at offset {} (padding "
                                "must be spaces)",
                                nul));
  }
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto watch = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() &&
               !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, watch);
  } catch (const json::exception& error) {
    fail_load(path, fmt::format("the header is not valid JSON: {}", error.what()));
  }
  if (!duplicate.empty()) fail_load(path, fmt::format("the header names '{}' twice", duplicate));
  if (!header.is_object()) {
    fail_load(path, fmt::format("the header must be a JSON object, got {}", header.type_name()));
  }
  return header;
}

void read_exactly(std::ifstream& in, const fs::path& path, uint64_t offset, void* data,
                  uint64_t size) {
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(static_cast<char*>(data), static_cast<std::streamsize>(size));
  if (!in || static_cast<uint64_t>(in.gcount()) != size) {
    fail_load(path, fmt::format("could not read {} bytes at offset {}", size, offset));
  }
}

}  // namespace

void save_safetensors(const fs::path& path, const NamedArrays& arrays,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<const NamedArrays::value_type*> order;
  for (const auto& entry : arrays) {
    if (entry.first.empty()) fail_save(path, "a tensor name is empty");
    if (entry.first == kMetadataKey) {
      fail_save(path, "'__metadata__' is reserved for the metadata and cannot name a tensor");
    }
    if (!entry.second.defined()) {
      fail_save(path,
                fmt::format("array '{}' is undefined (a default-constructed Array)", entry.first));
    }
    order.push_back(&entry);
  }
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i]->first == order[i - 1]->first) {
      fail_save(path, fmt::format("the name '{}' is given twice", order[i]->first));
    }
  }
  std::string header = header_text(path, order, metadata);
  uint64_t length = header.size();
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(length >> (8 * i));
  io::write_file_atomically(path, [&](const io::ByteSink& sink) {
    sink(std::as_bytes(std::span(length_bytes)));
    sink(std::as_bytes(std::span(header.data(), header.size())));
    // One array on the host at a time; an array whose computation failed throws here and
    // the temporary file is removed.
    for (const auto* entry : order) {
      HostArray host = entry->second.to_host();
      sink(host.bytes);
    }
  });
}

void save_safetensors(const fs::path& path, const Tree& tree,
                      const std::map<std::string, std::string>& metadata) {
  if (tree.is_leaf()) {
    fail_save(path, fmt::format("the tree is a single leaf {}, which has no path to name it; put "
                                "it in a dict",
                                tree.leaf().aval().to_string()));
  }
  auto leaves = tree.leaves_with_paths();
  save_safetensors(path, NamedArrays(leaves.begin(), leaves.end()), metadata);
}

SafetensorsFile load_safetensors(const fs::path& path) {
  std::error_code error;
  if (!fs::exists(path, error)) fail_load(path, "no such file");
  if (!fs::is_regular_file(path, error)) fail_load(path, "is not a regular file");
  uint64_t file_size = fs::file_size(path, error);
  if (error) fail_load(path, fmt::format("cannot read its size: {}", error.message()));
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_load(path, fmt::format("cannot open: {}", std::strerror(errno)));

  if (file_size < 8) {
    fail_load(path, fmt::format("the file has {} bytes; a safetensors file starts with an 8-byte "
                                "header length",
                                file_size));
  }
  unsigned char length_bytes[8];
  read_exactly(in, path, 0, length_bytes, 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length_bytes[i];
  if (header_size > kMaxHeaderBytes) {
    fail_load(path, fmt::format("header length {} is over the {}-byte limit (not a safetensors "
                                "file?)",
                                header_size, kMaxHeaderBytes));
  }
  if (8 + header_size > file_size) {
    fail_load(path, fmt::format("header length {} runs past the end of the {}-byte file",
                                header_size, file_size));
  }
  std::string text(header_size, '\0');
  read_exactly(in, path, 8, text.data(), header_size);
  json header = parse_header(path, text);
  uint64_t data_start = 8 + header_size;
  uint64_t data_size = file_size - data_start;

  SafetensorsFile result;
  std::vector<TensorEntry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name != kMetadataKey) {
      entries.push_back(parse_tensor(path, name, value, data_size));
      continue;
    }
    if (!value.is_object()) {
      fail_load(path, fmt::format("\"__metadata__\" must be an object of strings, got {}",
                                  json_kind(value)));
    }
    for (const auto& [key, text_value] : value.items()) {
      if (!text_value.is_string()) {
        fail_load(path, fmt::format("\"__metadata__\" values must be strings; '{}' is {}", key,
                                    json_kind(text_value)));
      }
      result.metadata[key] = text_value.get<std::string>();
    }
  }
  std::vector<const TensorEntry*> pointers;
  for (const auto& entry : entries) pointers.push_back(&entry);
  check_tiling(path, pointers, data_size);

  std::vector<std::byte> buffer;
  for (const TensorEntry& entry : entries) {  // in name order: header.items() is sorted
    buffer.resize(std::max<uint64_t>(entry.end - entry.begin, 1));
    read_exactly(in, path, data_start + entry.begin, buffer.data(), entry.end - entry.begin);
    if (entry.dtype == DType::bool_) {
      for (uint64_t i = 0; i < entry.end - entry.begin; ++i) {
        if (buffer[i] != std::byte{0} && buffer[i] != std::byte{1}) {
          fail_load(path, fmt::format("BOOL tensor '{}' holds the byte {} at element {}; booleans "
                                      "are 0 or 1",
                                      entry.name, static_cast<int>(buffer[i]), i));
        }
      }
    }
    result.arrays.emplace_back(
        entry.name, from_host_bytes(buffer.data(), AbstractValue(entry.shape, entry.dtype), nullptr,
                                    kUnknownSite));
  }
  return result;
}

}  // namespace kiln
