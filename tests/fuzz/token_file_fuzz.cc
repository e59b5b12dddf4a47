// Token files through read_token_file (the reader of the GPT-2 workload's data).
// Properties: what parses holds exactly the count its header gives, the file's size is
// that count's, every token is below the vocabulary the parse was given, and writing the
// tokens back gives a file that parses to the same tokens.
#include <cstdint>
#include <vector>

#include "data/token_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln::fuzz::InputFile input(".bin");
  static kiln::fuzz::InputFile output("-written.bin");
  const auto& path = input.write(data, size);
  // The vocabulary: GPT-2's padded one, or bytes when the input's last byte is odd.
  const int64_t vocab = size > 0 && (data[size - 1] & 1) ? 256 : 50304;
  std::vector<uint16_t> tokens;
  if (!kiln::fuzz::parses([&] { tokens = kiln::data::read_token_file(path, vocab); })) {
    return 0;
  }
  if (static_cast<size_t>(kiln::data::kTokenFileHeaderBytes) + 2 * tokens.size() != size) {
    kiln::fuzz::finding("parse_token_file accepted a file whose size is not its count's");
  }
  for (uint16_t token : tokens) {
    if (token >= vocab) kiln::fuzz::finding("parse_token_file returned a token >= vocab_size");
  }
  kiln::data::write_token_file(output.path(), tokens);
  if (kiln::data::read_token_file(output.path(), vocab) != tokens) {
    kiln::fuzz::finding("tokens written and read back differ");
  }
  return 0;
}
