// SHA-256 digests (OpenSSL EVP) as lowercase hex strings: the identity of checkpoints, run
// artifacts and data files. Hashing a file streams it in large chunks, so a big file is
// never held in memory whole.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace kiln::io {

std::string sha256_hex(std::span<const std::byte> bytes);
std::string sha256_hex(std::string_view text);
// A missing or unreadable file is a kiln::Error naming it.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace kiln::io
