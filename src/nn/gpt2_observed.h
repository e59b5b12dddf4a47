// GPT-2's forward pass with its stages in view: gpt2_logits (kiln/nn/gpt2.h) calling
// `observe` on each stage's output as it is computed, for the training run's per-layer
// telemetry (src/train/layer_telemetry.cc). The stages are the embedding ("embedding": the
// token and position embeddings summed), each block ("h_0", "h_1", ...: the residual stream
// after it) and the final LayerNorm ("ln_f"); their params are wte and wpe, h[i] and ln_f.
#pragma once

#include <functional>
#include <string>

#include "kiln/array.h"
#include "kiln/nn/gpt2.h"
#include "kiln/tree.h"

namespace kiln::nn {

using Gpt2Observer = std::function<void(const std::string& stage, const Array& output)>;

// gpt2_logits, calling observe(stage, output) for every stage in order.
Array gpt2_logits_observed(const Gpt2Config& config, const Tree& params, const Array& tokens,
                           const Gpt2Observer& observe, CallSite site = {});

}  // namespace kiln::nn
