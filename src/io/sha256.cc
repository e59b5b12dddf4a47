// SHA-256 through OpenSSL's EVP interface; see sha256.h.
#include "io/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/error.h"

namespace kiln::io {
namespace {

// One digest in progress; the context is freed however the hashing ends.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    KILN_CHECK(ctx_ != nullptr && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1,
               "OpenSSL could not start a SHA-256 digest");
  }
  void update(const void* data, size_t size) {
    KILN_CHECK(EVP_DigestUpdate(ctx_.get(), data, size) == 1);
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    KILN_CHECK(EVP_DigestFinal_ex(ctx_.get(), digest, &length) == 1);
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text(2 * length, '0');
    for (unsigned int i = 0; i < length; ++i) {
      text[2 * i] = kDigits[digest[i] >> 4];
      text[2 * i + 1] = kDigits[digest[i] & 15];
    }
    return text;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

struct CloseFile {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

}  // namespace

std::string sha256_hex(std::span<const std::byte> bytes) {
  Sha256 digest;
  digest.update(bytes.data(), bytes.size());
  return digest.hex();
}

std::string sha256_hex(std::string_view text) {
  Sha256 digest;
  digest.update(text.data(), text.size());
  return digest.hex();
}

std::string sha256_file(const std::filesystem::path& path) {
  std::unique_ptr<std::FILE, CloseFile> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    fail(kUnknownSite,
         fmt::format("sha256_file: cannot open '{}': {}", path.string(), std::strerror(errno)));
  }
  Sha256 digest;
  std::vector<char> buffer(size_t{1} << 20);
  while (size_t got = std::fread(buffer.data(), 1, buffer.size(), file.get())) {
    digest.update(buffer.data(), got);
  }
  if (std::ferror(file.get())) {
    fail(kUnknownSite,
         fmt::format("sha256_file: error reading '{}': {}", path.string(), std::strerror(errno)));
  }
  return digest.hex();
}

}  // namespace kiln::io
