// Sampling text from a run's final weights (text_generation.h).
#include "train/text_generation.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "data/byte_tokenizer.h"
#include "io/bounded_read.h"
#include "kiln/array_functions.h"
#include "kiln/error.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/safetensors.h"
#include "train/builders.h"
#include "train/config.h"
#include "train/run_weights.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

TrainConfig run_config(const fs::path& run_dir) {
  fs::path path = run_dir / "config.toml";
  std::error_code error;
  if (!fs::is_regular_file(path, error)) {
    fail(kUnknownSite,
         fmt::format("'{}' is not a run directory: it has no config.toml",
                     io::printable_path(run_dir)),
         "give a directory `kiln train` made, e.g. runs/gpt2_small/<run-id> (kiln runs list)");
  }
  TrainConfig config = load_config(path);
  if (config.model.kind != "gpt2" || config.data.dataset != "text") {
    fail(kUnknownSite,
         fmt::format("run '{}' is not a byte-level language model (model.kind = \"{}\", "
                     "data.dataset = \"{}\")",
                     io::printable_path(run_dir), config.model.kind, config.data.dataset),
         "kiln generate samples runs of model.kind = \"gpt2\" on a text dataset, whose "
         "tokenizer is the bytes (a token file's tokenizer is not part of kiln)");
  }
  return config;
}

}  // namespace

std::string generate_text(const fs::path& run_dir, const GenerateOptions& options,
                          const TextSink& sink) {
  if (options.prompt.empty()) {
    fail(kUnknownSite, "the prompt is empty; the model continues a text",
         "give --prompt TEXT, e.g. --prompt \"And God said\"");
  }
  if (options.tokens < 0 || options.temperature < 0 || options.top_k < 0) {
    fail(kUnknownSite, fmt::format("tokens ({}), temperature ({}) and top_k ({}) must be >= 0",
                                   options.tokens, options.temperature, options.top_k));
  }
  TrainConfig config = run_config(run_dir);
  nn::Gpt2Config gpt2 = gpt2_config(config.model.gpt2);
  const int64_t window = config.data.context;
  nn::Module model = build_model(config.model);
  AbstractValue input(Shape{1, window}, DType::i32);
  Tree params = final_variables(run_dir, model, input).params;

  const int64_t vocab = gpt2.vocab_size;
  const int64_t k = options.top_k > 0 ? std::min(options.top_k, vocab) : 0;
  const double temperature = options.temperature;
  auto draw = jit(
      [&model, vocab, k, temperature](const Tree& p, const Array& tokens, const Array& position,
                                      const Array& key) {
        Array logits = model.apply(nn::Variables{p, Tree()}, tokens).y;  // [1, window, padded]
        Array row = reshape(
            dynamic_slice(logits, stack({zeros({}, DType::i32), position, zeros({}, DType::i32)}),
                          {1, 1, logits.dim(2)}),
            Shape{logits.dim(2)});
        row = slice(row, {0}, {vocab});  // the padding rows are never drawn
        if (temperature == 0) return argmax(row, -1, DType::i32);
        row = row / temperature;
        if (k > 0) {
          Array kth = slice(top_k(row, k).first, {k - 1}, {k});
          row = where(row >= kth, row, full({}, -std::numeric_limits<double>::infinity()));
        }
        return random::categorical(key, row);
      },
      JitOptions().named("generate_token"));

  std::vector<uint16_t> sequence = data::encode_bytes(options.prompt);
  std::string text = options.prompt;
  Array root = random::key(options.seed);
  std::vector<int32_t> buffer(static_cast<size_t>(window), 0);
  for (int64_t i = 0; i < options.tokens; ++i) {
    // The last `window` tokens, left-aligned; the rest of the window is padding.
    size_t begin = sequence.size() > static_cast<size_t>(window) ? sequence.size() - window : 0;
    std::fill(buffer.begin(), buffer.end(), 0);
    std::copy(sequence.begin() + static_cast<std::ptrdiff_t>(begin), sequence.end(),
              buffer.begin());
    auto position = static_cast<int32_t>(sequence.size() - begin - 1);
    Array next = draw(params, from_host<int32_t>(buffer, Shape{1, window}),
                      full({}, static_cast<double>(position), DType::i32),
                      random::fold_in(root, static_cast<uint32_t>(i)));
    auto token = static_cast<uint16_t>(next.item<int32_t>());
    sequence.push_back(token);
    std::string piece = data::decode_bytes(std::span<const uint16_t>(&token, 1));
    text += piece;
    if (sink) sink(piece);
  }
  return text;
}

}  // namespace kiln::train
