// NPY reader (npy.h). The header is a Python dict literal; it is parsed by a small
// recursive reader that accepts exactly what NumPy's writers produce (any key order, any
// amount of trailing space) and names the offending text otherwise. The data's size is
// checked against the file's size before anything is allocated.
#include "data/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "kiln/error.h"
#include "kiln/shape.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kMaxHeaderBytes = 10000;  // numpy.lib.format's default max_header_size

[[noreturn]] void fail_npy(const fs::path& path, std::string_view what) {
  fail(kUnknownSite, fmt::format("read_npy: '{}': {}", path.string(), what));
}

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Reads the dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const fs::path& path) : text_(text), path_(path) {}

  Header parse() {
    Header header;
    std::map<std::string, bool> seen;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        header.descr = string_literal();
      } else if (key == "fortran_order") {
        header.fortran_order = bool_literal();
      } else if (key == "shape") {
        header.shape = tuple_literal();
      } else {
        bad(
            fmt::format("unexpected key '{}' (an .npy header holds descr, fortran_order and "
                        "shape)",
                        key));
      }
      if (seen[key]) bad(fmt::format("key '{}' appears twice", key));
      seen[key] = true;
      skip_space();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}'");
    }
    expect('}');
    for (const char* key : {"descr", "fortran_order", "shape"}) {
      if (!seen[key]) bad(fmt::format("the header has no '{}'", key));
    }
    skip_space();
    if (at_ != text_.size()) bad("unexpected text after the dict");
    return header;
  }

 private:
  [[noreturn]] void bad(std::string_view what) const {
    fail_npy(path_, fmt::format("bad header {:?} at offset {}: {}", std::string(text_), at_, what));
  }
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t'))
      ++at_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(fmt::format("expected '{}'", c));
    ++at_;
  }
  std::string string_literal() {
    skip_space();
    char quote = peek();
    if (quote != '\'' && quote != '"') bad("expected a quoted string");
    size_t end = text_.find(quote, at_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string value(text_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return value;
  }
  bool bool_literal() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (text_.substr(at_).starts_with(word)) {
        at_ += std::strlen(word);
        return value;
      }
    }
    bad("expected True or False");
  }
  std::vector<int64_t> tuple_literal() {
    std::vector<int64_t> dims;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') bad("expected a non-negative integer dimension");
      int64_t dim = 0;
      while (peek() >= '0' && peek() <= '9') {
        int digit = peek() - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10) bad("dimension overflows");
        dim = dim * 10 + digit;
        ++at_;
      }
      if (peek() == 'L') ++at_;  // Python 2 longs in old files
      dims.push_back(dim);
      skip_space();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      if (peek() != ')') bad("expected ',' or ')'");
    }
    expect(')');
    return dims;
  }

  std::string_view text_;
  const fs::path& path_;
  size_t at_ = 0;
};

std::optional<DType> dtype_of_descr(std::string_view descr) {
  static const std::pair<std::string_view, DType> kDescrs[] = {
      {"|b1", DType::bool_}, {"|u1", DType::u8},  {"<i4", DType::i32}, {"<i8", DType::i64},
      {"<u4", DType::u32},   {"<f2", DType::f16}, {"<f4", DType::f32}, {"<f8", DType::f64}};
  for (auto [name, dtype] : kDescrs) {
    if (descr == name) return dtype;
  }
  // NumPy writes '|' for one-byte types but accepts '<' and '=' too.
  if (descr == "<u1" || descr == "=u1") return DType::u8;
  if (descr == "<b1" || descr == "=b1") return DType::bool_;
  return std::nullopt;
}

}  // namespace

void write_npy(const fs::path& path, const RawArray& array) {
  std::string descr;
  for (const char* candidate : {"|b1", "|u1", "<i4", "<i8", "<u4", "<f2", "<f4", "<f8"}) {
    if (dtype_of_descr(candidate) == array.dtype) descr = candidate;
  }
  if (descr.empty()) {
    fail(kUnknownSite, fmt::format("cannot write {}: NumPy has no dtype for {}", path.string(),
                                   dtype_name(array.dtype)));
  }
  std::string shape;
  for (int64_t dim : array.shape) shape += fmt::format("{}, ", dim);
  if (array.shape.size() > 1) shape.resize(shape.size() - 2);  // (3,) keeps its comma
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  // The magic, version and length (10 bytes) and the header end on a multiple of 64 bytes.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(array.bytes.data()), array.bytes.size());
  io::write_file_atomically(path, bytes);
}

RawArray read_npy(const fs::path& path) {
  std::error_code code;
  if (!fs::is_regular_file(path, code)) {
    fail_npy(path, fs::exists(path, code) ? "not a regular file" : "does not exist");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) fail_npy(path, "cannot be opened");
  uint64_t file_size = fs::file_size(path, code);
  char prefix[12] = {};
  file.read(prefix, 8);
  if (file.gcount() < 8 || std::string_view(prefix, 6) != kMagic) {
    fail_npy(path, "not an .npy file (it does not start with \\x93NUMPY)");
  }
  auto major = static_cast<uint8_t>(prefix[6]);
  auto minor = static_cast<uint8_t>(prefix[7]);
  if (minor != 0 || major < 1 || major > 3) {
    fail_npy(path, fmt::format("format version {}.{} is not one of 1.0, 2.0, 3.0", major, minor));
  }
  size_t length_bytes = major == 1 ? 2 : 4;
  file.read(prefix + 8, static_cast<std::streamsize>(length_bytes));
  if (static_cast<size_t>(file.gcount()) < length_bytes) fail_npy(path, "truncated header");
  uint64_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) {
    header_length |= uint64_t{static_cast<uint8_t>(prefix[8 + i])} << (8 * i);
  }
  if (header_length > kMaxHeaderBytes) {
    fail_npy(path, fmt::format("header of {} bytes is longer than {}, NumPy's limit", header_length,
                               kMaxHeaderBytes));
  }
  std::string header_text(header_length, '\0');
  file.read(header_text.data(), static_cast<std::streamsize>(header_length));
  if (static_cast<uint64_t>(file.gcount()) < header_length) {
    fail_npy(path, fmt::format("truncated header: {} of {} bytes", file.gcount(), header_length));
  }
  Header header = HeaderParser(header_text, path).parse();
  if (header.fortran_order) {
    fail_npy(path,
             "the array is in Fortran order; kiln reads C order (save "
             "numpy.ascontiguousarray(a))");
  }
  std::optional<DType> dtype = dtype_of_descr(header.descr);
  if (!dtype) {
    fail(kUnknownSite,
         fmt::format("read_npy: '{}': dtype '{}' is not one kiln reads", path.string(),
                     header.descr),
         "kiln reads |b1 |u1 <i4 <i8 <u4 <f2 <f4 <f8 (little-endian); convert with "
         "numpy.ascontiguousarray(a.astype('<f4')) before numpy.save");
  }
  RawArray array;
  array.dtype = *dtype;
  array.shape = header.shape;
  array.file = path.string();
  uint64_t elements = 1;
  for (int64_t dim : header.shape) {
    if (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dim)) {
      fail_npy(path, fmt::format("shape {} has more elements than fit in 64 bits",
                                 dims_to_string(header.shape)));
    }
    elements *= static_cast<uint64_t>(dim);
  }
  if (!strides_fit_int64(header.shape)) {
    fail_npy(path, fmt::format("shape {} has strides that do not fit in 64 bits",
                               dims_to_string(header.shape)));
  }
  uint64_t data_offset = 8 + length_bytes + header_length;
  uint64_t available = file_size > data_offset ? file_size - data_offset : 0;
  auto element_size = static_cast<uint64_t>(dtype_size(*dtype));
  if (elements > available / element_size || elements * element_size != available) {
    bool short_data = elements > available / element_size;
    fail_npy(path,
             fmt::format("{}: shape {} of {} needs {} elements of {} bytes, the file has "
                         "{} data bytes",
                         short_data ? "truncated" : "trailing bytes", dims_to_string(header.shape),
                         header.descr, elements, element_size, available));
  }
  array.bytes.resize(static_cast<size_t>(elements * element_size));
  file.read(reinterpret_cast<char*>(array.bytes.data()),
            static_cast<std::streamsize>(array.bytes.size()));
  if (static_cast<size_t>(file.gcount()) != array.bytes.size()) fail_npy(path, "read failed");
  return array;
}

}  // namespace kiln::data
