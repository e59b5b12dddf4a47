// Token files (data/token_file.h) and the byte-level tokenizer (data/byte_tokenizer.h):
// what is written reads back bit for bit, and every malformed file is a clear error naming
// the file and what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/token_file.h"
#include "support/errors.h"
#include "support/scratch_dir.h"

namespace kiln::data {
namespace {

using kiln::testing::fails_with;
using ::testing::HasSubstr;

std::vector<uint8_t> bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_int32(std::vector<uint8_t>& bytes, size_t index, int32_t value) {
  for (size_t b = 0; b < 4; ++b)
    bytes[4 * index + b] = (static_cast<uint32_t>(value) >> (8 * b)) & 0xff;
}

TEST(TokenFile, WritesLlmcsLayoutAndReadsItBack) {
  kiln::testing::ScratchDir dir;
  std::vector<uint16_t> tokens = {0, 1, 255, 256, 50256, 65535, 7};
  write_token_file(dir / "train.bin", tokens);
  std::vector<uint8_t> bytes = bytes_of(dir / "train.bin");
  ASSERT_EQ(bytes.size(), 1024u + 2 * tokens.size());
  // Header: magic 20240520, version 1 and the count as little-endian int32, then zeros.
  EXPECT_EQ(bytes[0] | bytes[1] << 8 | bytes[2] << 16 | bytes[3] << 24, 20240520);
  EXPECT_EQ(bytes[4], 1);
  EXPECT_EQ(bytes[8], tokens.size());
  for (size_t i = 12; i < 1024; ++i) ASSERT_EQ(bytes[i], 0) << i;
  EXPECT_EQ(bytes[1024 + 2 * 4], 50256 & 0xff);  // little-endian uint16
  EXPECT_EQ(bytes[1024 + 2 * 4 + 1], 50256 >> 8);
  EXPECT_EQ(read_token_file(dir / "train.bin"), tokens);
  EXPECT_EQ(read_token_file(dir / "train.bin", 65536), tokens);
  write_token_file(dir / "empty.bin", {});
  EXPECT_TRUE(read_token_file(dir / "empty.bin").empty());
}

TEST(TokenFile, MalformedFilesAreErrorsNamingTheFileAndTheProblem) {
  kiln::testing::ScratchDir dir;
  std::vector<uint16_t> tokens = {5, 6, 300, 7};
  write_token_file(dir / "good.bin", tokens);
  std::vector<uint8_t> good = bytes_of(dir / "good.bin");
  auto parse = [](std::vector<uint8_t> bytes, int64_t vocab = 0) {
    return [bytes, vocab] { parse_token_file(bytes, "corpus.bin", vocab); };
  };
  EXPECT_TRUE(fails_with(parse({1, 2, 3}),
                         {"token file 'corpus.bin': 3 bytes, shorter than the 1024-byte header"}));
  std::vector<uint8_t> magic = good;
  put_int32(magic, 0, 20240521);
  EXPECT_TRUE(fails_with(parse(magic), {"the magic number is 20240521, not 20240520"}));
  std::vector<uint8_t> npy(1100, 0);
  std::string npy_magic = "\x93NUMPY";
  std::copy(npy_magic.begin(), npy_magic.end(), npy.begin());
  EXPECT_TRUE(fails_with(parse(npy), {"looks like a NumPy .npy file"}));
  std::vector<uint8_t> version = good;
  put_int32(version, 1, 2);
  EXPECT_TRUE(fails_with(parse(version), {"version 2 (kiln reads version 1: uint16 tokens)"}));
  std::vector<uint8_t> truncated(good.begin(), good.end() - 1);
  EXPECT_TRUE(
      fails_with(parse(truncated), {"the header says 4 tokens (8 bytes) but 7 bytes follow it"}));
  std::vector<uint8_t> negative = good;
  put_int32(negative, 2, -1);
  EXPECT_TRUE(fails_with(parse(negative), {"the header says -1 tokens"}));
  EXPECT_TRUE(
      fails_with(parse(good, 256),
                 {"token 300 at position 2 (byte 1028) is outside the vocabulary [0, 256)"}));
  EXPECT_TRUE(fails_with([&] { read_token_file(dir / "missing.bin"); }, {"missing.bin"}));
  EXPECT_TRUE(fails_with([&] { read_token_file(dir.path()); }, {dir.path().string()}));
}

TEST(TokenFile, AWriteThatFailsIsAnErrorAndTouchesNoOtherFile) {
  kiln::testing::ScratchDir dir;
  write_token_file(dir / "keep.bin", std::vector<uint16_t>{1, 2, 3});
  EXPECT_THROW(write_token_file(dir.path() / "no_such_dir" / "x.bin", std::vector<uint16_t>{4}),
               Error);
  EXPECT_EQ(read_token_file(dir / "keep.bin"), (std::vector<uint16_t>{1, 2, 3}));
}

TEST(ByteTokenizer, EveryByteIsATokenAndTextRoundTrips) {
  std::string text = "In the beginning \xc3\xa9\n\x01\xff";
  std::vector<uint16_t> tokens = encode_bytes(text);
  ASSERT_EQ(tokens.size(), text.size());
  EXPECT_EQ(tokens[0], 'I');
  EXPECT_EQ(tokens.back(), 255);
  EXPECT_EQ(decode_bytes(tokens), text);
  std::vector<uint16_t> wide = {72, 105, 256};
  EXPECT_TRUE(fails_with([&] { decode_bytes(wide); }, {"token 256 at position 2 is not a byte"}));
}

}  // namespace
}  // namespace kiln::data
