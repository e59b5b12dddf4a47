// Token files: a corpus already tokenized, as the GPT-2 workload reads it. The format is
// llm.c's, so that files its data scripts wrote (and any tool that writes that format)
// work as they are: a header of 256 little-endian int32 (magic 20240520, version 1, the
// number of tokens, the rest 0), then the tokens as little-endian uint16. docs/transformer.md,
// *Data*.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace kiln::data {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 256 * 4;

// Reads `path` and checks it: errors (kiln::Error) name the file and what is wrong: missing
// or unreadable, shorter than the header, another magic number (naming what the bytes look
// like), another version, a token count that disagrees with the file's size, and, when
// vocab_size > 0, the first token >= vocab_size with its position.
std::vector<uint16_t> read_token_file(const std::filesystem::path& path, int64_t vocab_size = 0);

// The same checks on a file's bytes already in memory (`name` for messages).
std::vector<uint16_t> parse_token_file(std::span<const uint8_t> bytes, const std::string& name,
                                       int64_t vocab_size = 0);

// Writes `tokens` to `path` atomically (a temporary file renamed over it): a reader never
// sees half a file, and an existing file is kept if the write fails.
void write_token_file(const std::filesystem::path& path, std::span<const uint16_t> tokens);

}  // namespace kiln::data
