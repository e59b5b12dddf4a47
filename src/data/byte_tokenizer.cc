// The byte-level tokenizer (byte_tokenizer.h).
#include "data/byte_tokenizer.h"

#include <fmt/format.h>

#include "kiln/error.h"

namespace kiln::data {

std::vector<uint16_t> encode_bytes(std::string_view text) {
  std::vector<uint16_t> tokens;
  tokens.reserve(text.size());
  for (char c : text) tokens.push_back(static_cast<uint8_t>(c));
  return tokens;
}

std::string decode_bytes(std::span<const uint16_t> tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= kByteVocabularySize) {
      fail(kUnknownSite,
           fmt::format("decode_bytes: token {} at position {} is not a byte (the byte-level "
                       "vocabulary is [0, 256))",
                       tokens[i], i),
           "decode with the tokenizer the tokens came from");
    }
    text.push_back(static_cast<char>(tokens[i]));
  }
  return text;
}

}  // namespace kiln::data
