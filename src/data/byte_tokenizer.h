// The byte-level tokenizer: each byte of UTF-8 text is one token (vocabulary 256), so any
// text round-trips exactly and nothing needs a vocabulary file. The tokens of GPT-2's own
// BPE vocabulary are for a later tokenizer; a model trained on bytes uses vocab_size 256.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data {

inline constexpr int64_t kByteVocabularySize = 256;

std::vector<uint16_t> encode_bytes(std::string_view text);
// Fails naming the first token that is not a byte (>= 256) and its position.
std::string decode_bytes(std::span<const uint16_t> tokens);

}  // namespace kiln::data
