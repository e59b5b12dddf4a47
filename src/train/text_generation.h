// `kiln generate`: text sampled from a trained language-model run. The run's final weights
// (params.safetensors, checked against the SHA-256 run.json records) and its config give
// the model; the prompt is encoded with the run's tokenizer (bytes: a `text` dataset), and
// each new token is drawn from the model's distribution at the last position of a window
// of the trained context, the prompt and what was drawn so far.
//
// One compiled program draws every token: the window always has the trained length (a
// shorter sequence is padded at the end, which causal attention never lets the earlier
// positions see) and the position to read is an argument, so the first token compiles it
// and the rest reuse it. Token i is drawn with random::fold_in(random::key(seed), i): the
// same run, prompt and options give the same text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace kiln::train {

struct GenerateOptions {
  std::string prompt;
  int64_t tokens = 200;      // new tokens to draw
  double temperature = 0.8;  // the logits are divided by it; 0: always the likeliest token
  int64_t top_k = 0;         // draw among the k likeliest tokens only (0: all)
  uint64_t seed = 0;
};

// Called with each new token's text as it is drawn (a byte: not always a whole UTF-8
// character).
using TextSink = std::function<void(std::string_view)>;

// The prompt followed by the drawn text. Errors name the run and what is missing: no
// final weights (the run has not completed), weights that do not match run.json, a run
// that is not a byte-level language model, an empty prompt.
std::string generate_text(const std::filesystem::path& run_dir, const GenerateOptions& options,
                          const TextSink& sink = {});

}  // namespace kiln::train
