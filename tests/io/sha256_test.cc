// SHA-256 of bytes, text and files against the FIPS 180-2 examples.
#include "io/sha256.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/scratch_files.h"
#include "support/errors.h"

namespace kiln::io {
namespace {

using ::kiln::testing::error_of;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::write_string;
using ::testing::HasSubstr;

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string text = "abc";
  EXPECT_EQ(sha256_hex(std::as_bytes(std::span(text.data(), text.size()))), sha256_hex(text));
}

TEST(Sha256, FileMatchesBytesAcrossReadChunks) {
  ScratchDir dir;
  // One million 'a' (a FIPS example) plus more, so the file spans several 1 MiB reads.
  std::string million(1000000, 'a');
  write_string(dir / "million", million);
  EXPECT_EQ(sha256_file(dir / "million"),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  std::string big(3 * (1 << 20) + 17, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7919 % 256);
  write_string(dir / "big", big);
  EXPECT_EQ(sha256_file(dir / "big"), sha256_hex(big));
  write_string(dir / "empty", "");
  EXPECT_EQ(sha256_file(dir / "empty"), sha256_hex(""));
}

TEST(Sha256, MissingFile) {
  ScratchDir dir;
  std::string message = error_of([&] { sha256_file(dir / "absent"); });
  EXPECT_THAT(message, HasSubstr("sha256_file: cannot open '"));
  EXPECT_THAT(message, HasSubstr("absent': No such file or directory"));
}

}  // namespace
}  // namespace kiln::io
