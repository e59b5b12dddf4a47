// IDX reader (see idx.h). Plain files are checked against their size before anything is
// allocated; gzip files are decompressed by zlib straight into the result vector, whose
// first allocation is bounded by what the compressed size can possibly expand to, so a
// header that lies about its dims cannot make us allocate more than the file could hold.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "kiln/error.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

constexpr uint8_t kTypeU8 = 0x08;
// deflate's best case is about 1032:1; a gzip file of c bytes cannot decompress to more.
constexpr uint64_t kMaxDeflateRatio = 1032;

[[noreturn]] void fail_file(const fs::path& path, std::string_view what) {
  fail(kUnknownSite, fmt::format("read_idx: '{}': {}", path.string(), what));
}

std::string_view type_name(uint8_t code) {
  switch (code) {
    case 0x08:
      return "u8";
    case 0x09:
      return "i8";
    case 0x0B:
      return "i16";
    case 0x0C:
      return "i32";
    case 0x0D:
      return "f32";
    case 0x0E:
      return "f64";
    default:
      return "";
  }
}

// A byte source: the plain file or the decompressed gzip stream. read() returns fewer
// bytes than asked only at the end of the data.
class Source {
 public:
  virtual ~Source() = default;
  virtual size_t read(void* data, size_t size) = 0;
};

class PlainSource : public Source {
 public:
  PlainSource(const fs::path& path) : path_(path), file_(std::fopen(path.c_str(), "rb")) {
    if (!file_) fail_file(path, fmt::format("cannot open: {}", std::strerror(errno)));
  }
  ~PlainSource() override { std::fclose(file_); }
  size_t read(void* data, size_t size) override {
    size_t got = std::fread(data, 1, size, file_);
    if (got < size && std::ferror(file_)) {
      fail_file(path_, fmt::format("read error: {}", std::strerror(errno)));
    }
    return got;
  }

 private:
  fs::path path_;
  std::FILE* file_;
};

// A gzip file decompressed with zlib's inflate. Unlike gzread, which treats a stream that
// stops early as a quiet end of data, this insists that every member ends with its
// trailer and lets inflate check it: a file missing its last bytes, or whose data does not
// match the trailer's CRC-32 and size, is an error naming the file. Concatenated members
// are one stream (as gunzip reads them).
class GzipSource : public Source {
 public:
  explicit GzipSource(const fs::path& path) : path_(path), file_(std::fopen(path.c_str(), "rb")) {
    if (!file_) fail_file(path, fmt::format("cannot open: {}", std::strerror(errno)));
    if (inflateInit2(&stream_, 15 + 16) != Z_OK) {
      std::fclose(file_);
      fail_file(path, "cannot start zlib");
    }
  }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;
  ~GzipSource() override {
    inflateEnd(&stream_);
    std::fclose(file_);
  }

  size_t read(void* data, size_t size) override {
    auto* out = static_cast<unsigned char*>(data);
    size_t total = 0;
    while (total < size && !finished_) {
      auto chunk = static_cast<uInt>(std::min<size_t>(size - total, UINT_MAX));
      stream_.next_out = out + total;
      stream_.avail_out = chunk;
      inflate_some();
      total += chunk - stream_.avail_out;
    }
    return total;
  }

 private:
  // Runs inflate until the output space is full or the stream has ended.
  void inflate_some() {
    while (stream_.avail_out > 0 && !finished_) {
      if (stream_.avail_in == 0 && !refill()) {
        fail_file(path_,
                  "truncated gzip data: the file ends inside the compressed stream, before its "
                  "trailer (the CRC-32 and size of the data)");
      }
      int code = inflate(&stream_, Z_NO_FLUSH);
      if (code == Z_STREAM_END) {
        // The trailer matched. Another member may follow; else this is the end.
        if (stream_.avail_in == 0 && !refill()) {
          finished_ = true;
        } else {
          inflateReset(&stream_);
        }
      } else if (code != Z_OK && code != Z_BUF_ERROR) {
        fail_file(path_,
                  fmt::format("corrupt gzip data: {}{}", stream_.msg ? stream_.msg : zError(code),
                              trailer_note(stream_.msg)));
      }
    }
  }

  // What a check failure means, for a message a user can act on.
  static std::string_view trailer_note(const char* message) {
    std::string_view text = message ? message : "";
    if (text == "incorrect data check") {
      return " (the CRC-32 of the decompressed data differs from the one in the file's trailer)";
    }
    if (text == "incorrect length check") {
      return " (the decompressed size differs from the one in the file's trailer)";
    }
    return "";
  }

  // Reads the next block of compressed bytes; false at the end of the file.
  bool refill() {
    size_t got = std::fread(input_.data(), 1, input_.size(), file_);
    if (got == 0 && std::ferror(file_)) {
      fail_file(path_, fmt::format("read error: {}", std::strerror(errno)));
    }
    // zlib would read a file without a gzip header as plain bytes; a .gz that is not gzip
    // is a mistake worth naming rather than parsing as IDX.
    if (!checked_header_) {
      checked_header_ = true;
      if (got < 2 || input_[0] != 0x1f || input_[1] != 0x8b) {
        fail_file(path_, "is not gzip-compressed (no gzip header), but its name ends in .gz");
      }
    }
    stream_.next_in = input_.data();
    stream_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }

  fs::path path_;
  std::FILE* file_;
  z_stream stream_{};
  std::vector<unsigned char> input_ = std::vector<unsigned char>(size_t{1} << 20);
  bool finished_ = false;
  bool checked_header_ = false;
};

uint32_t big_endian_u32(const unsigned char* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
         uint32_t{bytes[3]};
}

}  // namespace

IdxArray read_idx(const fs::path& path, int64_t max_rows) {
  std::error_code error;
  auto status = fs::status(path, error);
  if (!fs::exists(status)) fail_file(path, "no such file");
  if (!fs::is_regular_file(status)) fail_file(path, "is not a regular file");
  uint64_t file_size = fs::file_size(path, error);
  if (error) fail_file(path, fmt::format("cannot read its size: {}", error.message()));
  if (file_size == 0) fail_file(path, "is empty");

  bool gzipped = path.extension() == ".gz";
  std::unique_ptr<Source> source;
  if (gzipped) {
    source = std::make_unique<GzipSource>(path);
  } else {
    source = std::make_unique<PlainSource>(path);
  }

  unsigned char magic[4];
  size_t got = source->read(magic, 4);
  if (got < 4) {
    fail_file(path,
              fmt::format("truncated header: expected 4 bytes of magic number, found {}", got));
  }
  if (!gzipped && magic[0] == 0x1f && magic[1] == 0x8b) {
    fail_file(path, "is gzip-compressed but its name does not end in .gz");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    fail_file(path, fmt::format("bad magic number {:02x} {:02x} {:02x} {:02x}: an IDX file starts "
                                "with 00 00 <type> <rank>",
                                magic[0], magic[1], magic[2], magic[3]));
  }
  uint8_t type = magic[2];
  int rank = magic[3];
  if (type != kTypeU8) {
    std::string_view name = type_name(type);
    fail_file(path, name.empty()
                        ? fmt::format("unknown IDX type code 0x{:02x}", type)
                        : fmt::format("IDX type code 0x{:02x} ({}) is not supported; only 0x08 "
                                      "(u8) is",
                                      type, name));
  }
  if (rank == 0) fail_file(path, "rank 0 in the magic number; an IDX array has at least 1 dim");

  std::vector<unsigned char> dim_bytes(static_cast<size_t>(4 * rank));
  got = source->read(dim_bytes.data(), dim_bytes.size());
  if (got < dim_bytes.size()) {
    fail_file(path, fmt::format("truncated header: expected {} bytes of dims for rank {}, found {}",
                                dim_bytes.size(), rank, got));
  }
  IdxArray result;
  uint64_t count = 1;
  bool overflow = false;
  for (int i = 0; i < rank; ++i) {
    uint32_t dim = big_endian_u32(&dim_bytes[static_cast<size_t>(4 * i)]);
    result.dims.push_back(dim);
    overflow |= __builtin_mul_overflow(count, uint64_t{dim}, &count);
  }
  if (overflow || count > static_cast<uint64_t>(INT64_MAX) || !strides_fit_int64(result.dims)) {
    fail_file(path, fmt::format("dims {} have too many elements", dims_to_string(result.dims)));
  }
  result.rows_in_file = result.dims[0];
  // Only the first max_rows rows: the rest is never decompressed (0.45 s for the 60000
  // training images, against milliseconds for the first thousand).
  const bool partial = max_rows > 0 && max_rows < result.dims[0];
  if (partial) {
    count = count / static_cast<uint64_t>(result.dims[0]) * static_cast<uint64_t>(max_rows);
    result.dims[0] = max_rows;
  }

  uint64_t header = 4 + 4 * static_cast<uint64_t>(rank);
  uint64_t possible =
      gzipped ? file_size * kMaxDeflateRatio + 4096 : (file_size > header ? file_size - header : 0);
  result.values.resize(static_cast<size_t>(std::min(count, possible)));
  size_t have = source->read(result.values.data(), result.values.size());
  // Only a lying header gets here with have == size < count: read the rest to report it.
  while (have == result.values.size() && have < count) {
    result.values.resize(static_cast<size_t>(std::min<uint64_t>(count, 2 * have + 4096)));
    have += source->read(result.values.data() + have, result.values.size() - have);
  }
  if (have < count) {
    fail_file(path, fmt::format("truncated: expected {} bytes of data for dims {}, found {}", count,
                                dims_to_string(result.dims), have));
  }
  if (partial) return result;
  unsigned char extra[4096];
  if (size_t trailing = source->read(extra, sizeof extra); trailing > 0) {
    std::string amount = !gzipped                  ? fmt::format("{}", file_size - header - count)
                         : trailing < sizeof extra ? fmt::format("{}", trailing)
                                                   : fmt::format("at least {}", trailing);
    fail_file(path, fmt::format("{} bytes of trailing data after the {} bytes that dims {} need",
                                amount, count, dims_to_string(result.dims)));
  }
  return result;
}

RawArray read_idx_records(const std::filesystem::path& path, int64_t max_rows,
                          int64_t* rows_in_file) {
  IdxArray idx = read_idx(path, max_rows);
  if (rows_in_file != nullptr) *rows_in_file = idx.rows_in_file;
  return RawArray{DType::u8, idx.dims, std::move(idx.values), path.string()};
}

}  // namespace kiln::data
