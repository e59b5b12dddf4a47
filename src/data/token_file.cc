// Token files (token_file.h).
#include "data/token_file.h"

#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "io/bounded_read.h"
#include "kiln/error.h"

namespace kiln::data {
namespace {

// 2^31 tokens (4 GiB): larger than any corpus this reads whole into memory.
constexpr size_t kMaxTokenFileBytes = (size_t{1} << 32) + kTokenFileHeaderBytes;

[[noreturn]] void fail_tokens(const std::string& name, std::string_view what,
                              std::string_view remedy = "") {
  fail(kUnknownSite, fmt::format("token file '{}': {}", name, what), std::string(remedy));
}

int32_t int32_at(std::span<const uint8_t> bytes, size_t index) {
  uint32_t value = 0;
  for (size_t b = 0; b < 4; ++b) value |= static_cast<uint32_t>(bytes[4 * index + b]) << (8 * b);
  return static_cast<int32_t>(value);
}

// What a file that is not a token file most likely is, from its first bytes.
std::string looks_like(std::span<const uint8_t> bytes) {
  auto starts_with = [&](std::string_view prefix) {
    return bytes.size() >= prefix.size() &&
           std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
  };
  if (starts_with("\x93NUMPY")) return " (it looks like a NumPy .npy file)";
  if (starts_with("\x1f\x8b")) return " (it looks like a gzip file: decompress it first)";
  if (bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0 && bytes[2] >= 8 && bytes[2] <= 0x0e) {
    return " (it looks like an IDX file)";
  }
  return "";
}

}  // namespace

std::vector<uint16_t> parse_token_file(std::span<const uint8_t> bytes, const std::string& name,
                                       int64_t vocab_size) {
  const std::string remedy =
      "a token file is a header of 256 little-endian int32 (20240520, 1, the token count, "
      "zeros) and the tokens as uint16, as llm.c's data scripts write (and data::write_token_file)";
  if (bytes.size() < static_cast<size_t>(kTokenFileHeaderBytes)) {
    fail_tokens(name,
                fmt::format("{} bytes, shorter than the {}-byte header", bytes.size(),
                            kTokenFileHeaderBytes),
                remedy);
  }
  if (int32_at(bytes, 0) != kTokenFileMagic) {
    fail_tokens(name,
                fmt::format("the magic number is {}, not {}{}", int32_at(bytes, 0), kTokenFileMagic,
                            looks_like(bytes)),
                remedy);
  }
  if (int32_at(bytes, 1) != kTokenFileVersion) {
    fail_tokens(name,
                fmt::format("version {} (kiln reads version {}: uint16 tokens)", int32_at(bytes, 1),
                            kTokenFileVersion),
                remedy);
  }
  int64_t count = int32_at(bytes, 2);
  size_t payload = bytes.size() - static_cast<size_t>(kTokenFileHeaderBytes);
  if (count < 0 || static_cast<uint64_t>(count) * 2 != payload) {
    fail_tokens(name,
                fmt::format("the header says {} tokens ({} bytes) but {} bytes follow it", count,
                            count * 2, payload),
                "the file is truncated or was written with another count; write it again");
  }
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  const uint8_t* data = bytes.data() + kTokenFileHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<uint16_t>(data[2 * i] | (data[2 * i + 1] << 8));
    if (vocab_size > 0 && tokens[i] >= vocab_size) {
      fail_tokens(name,
                  fmt::format("token {} at position {} (byte {}) is outside the vocabulary "
                              "[0, {})",
                              tokens[i], i, kTokenFileHeaderBytes + 2 * static_cast<int64_t>(i),
                              vocab_size),
                  "the file was tokenized for another vocabulary than the model's");
    }
  }
  return tokens;
}

std::vector<uint16_t> read_token_file(const std::filesystem::path& path, int64_t vocab_size) {
  std::string bytes = io::read_regular_file(path, kMaxTokenFileBytes);
  return parse_token_file(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      path.string(), vocab_size);
}

void write_token_file(const std::filesystem::path& path, std::span<const uint16_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    fail(kUnknownSite,
         fmt::format("write_token_file: '{}': {} tokens do not fit the header's int32 count",
                     path.string(), tokens.size()),
         "split the corpus into several files");
  }
  std::vector<std::byte> bytes(static_cast<size_t>(kTokenFileHeaderBytes) + 2 * tokens.size());
  auto put_int32 = [&](size_t index, int32_t value) {
    for (size_t b = 0; b < 4; ++b) {
      bytes[4 * index + b] =
          static_cast<std::byte>((static_cast<uint32_t>(value) >> (8 * b)) & 0xff);
    }
  };
  put_int32(0, kTokenFileMagic);
  put_int32(1, kTokenFileVersion);
  put_int32(2, static_cast<int32_t>(tokens.size()));
  std::byte* data = bytes.data() + kTokenFileHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    data[2 * i] = static_cast<std::byte>(tokens[i] & 0xff);
    data[2 * i + 1] = static_cast<std::byte>(tokens[i] >> 8);
  }
  io::write_file_atomically(path, std::span<const std::byte>(bytes));
}

}  // namespace kiln::data
