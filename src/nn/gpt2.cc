// GPT-2 as functions of a params Tree (include/kiln/nn/gpt2.h), composed of public ops only:
// what a user would write, so that its speed is the speed of kiln's natural code path.
#include "kiln/nn/gpt2.h"

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/checkpoint.h"
#include "kiln/nn/activations.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/losses.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "nn/gpt2_observed.h"
#include "nn/module_impl.h"

namespace kiln::nn {
namespace {

// GPT-2's LayerNorm epsilon (PyTorch's default; Flax's is 1e-6).
constexpr double kLayerNormEpsilon = 1e-5;
constexpr double kInitStddev = 0.02;

// Hands out parameter keys in a fixed order: the i-th parameter drawn gets fold_in(key, i).
class KeySequence {
 public:
  explicit KeySequence(Array key) : key_(std::move(key)) {}
  Array next(CallSite site) { return random::fold_in(key_, count_++, site); }

 private:
  Array key_;
  uint32_t count_ = 0;
};

Tree dense_init(KeySequence& keys, int64_t in, int64_t out, double stddev, CallSite site) {
  Array kernel = random::normal(keys.next(site), Shape{in, out}, DType::f32, site) * stddev;
  return Tree::dict({{"kernel", kernel}, {"bias", zeros(Shape{out}, DType::f32)}}, site);
}

Tree norm_init(int64_t channels, CallSite site) {
  return Tree::dict(
      {{"scale", ones(Shape{channels}, DType::f32)}, {"bias", zeros(Shape{channels}, DType::f32)}},
      site);
}

Array dense(const Tree& layer, const Array& x, CallSite site) {
  return add(matmul(x, layer["kernel"].leaf(site), site), layer["bias"].leaf(site), site);
}

Array norm(const Tree& layer, const Array& x, CallSite site) {
  return layer_norm(x, layer["scale"].leaf(site), layer["bias"].leaf(site), kLayerNormEpsilon,
                    site);
}

Array attention(const Gpt2Config& config, const Tree& attn, const Array& x, CallSite site) {
  int64_t batch = x.shape()[0], length = x.shape()[1], channels = config.channels;
  Shape heads{batch, length, config.heads, channels / config.heads};
  std::vector<Array> qkv = split(dense(attn["c_attn"], x, site), 3, 2, site);
  Array y = dot_product_attention(reshape(qkv[0], heads, site), reshape(qkv[1], heads, site),
                                  reshape(qkv[2], heads, site),
                                  {.is_causal = true, .implementation = config.attention}, site);
  return dense(attn["c_proj"], reshape(y, Shape{batch, length, channels}, site), site);
}

Array mlp(const Tree& layer, const Array& x, CallSite site) {
  return dense(layer["c_proj"], gelu(dense(layer["c_fc"], x, site), true, site), site);
}

void check_token_array(const Gpt2Config& config, const Array& tokens, CallSite site) {
  if (!tokens.defined()) fail(site, "nn::gpt2: tokens is an empty Array");
  if (!is_integer(tokens.dtype()) || tokens.rank() != 2) {
    fail(site,
         fmt::format("nn::gpt2: tokens must be an integer array [batch, length], got {}",
                     tokens.aval().to_string()),
         "token ids are i32 (or any integer dtype), one row per sequence");
  }
  if (tokens.shape()[1] > config.max_context) {
    fail(site,
         fmt::format("nn::gpt2: a context of {} tokens is longer than the model's maximum, {}",
                     tokens.shape()[1], config.max_context),
         "cut the sequences to max_context tokens (the position embedding has no row past it)");
  }
}

}  // namespace

void Gpt2Config::check(CallSite site) const {
  auto positive = [&](const char* name, int64_t value) {
    if (value <= 0) fail(site, fmt::format("Gpt2Config: {} must be positive, got {}", name, value));
  };
  positive("layers", layers);
  positive("heads", heads);
  positive("channels", channels);
  positive("vocab_size", vocab_size);
  positive("padded_vocab_size", padded_vocab_size);
  positive("max_context", max_context);
  if (channels % heads != 0) {
    fail(site, fmt::format("Gpt2Config: channels ({}) must be a multiple of heads ({})", channels,
                           heads));
  }
  if (padded_vocab_size < vocab_size) {
    fail(site, fmt::format("Gpt2Config: padded_vocab_size ({}) is smaller than vocab_size ({})",
                           padded_vocab_size, vocab_size));
  }
}

std::string Gpt2Config::to_string() const {
  std::string text = fmt::format("GPT-2(layers {}, heads {}, C {}, vocab {}/{}, context {}", layers,
                                 heads, channels, vocab_size, padded_vocab_size, max_context);
  if (remat == Gpt2Remat::kBlocks) text += ", remat blocks";
  if (remat == Gpt2Remat::kBlocksSaveDots) text += ", remat blocks saving matmuls";
  if (attention == AttentionImplementation::kFlash) text += ", flash attention";
  return text + ")";
}

Tree gpt2_init(const Gpt2Config& config, const Array& key, CallSite site) {
  config.check(site);
  KeySequence keys(key);
  int64_t c = config.channels;
  // The projections that write into the residual stream: each block adds two, so their
  // variance is divided by the number of additions.
  double residual_stddev = kInitStddev / std::sqrt(2.0 * static_cast<double>(config.layers));
  Array wte =
      random::normal(keys.next(site), Shape{config.padded_vocab_size, c}, DType::f32, site) *
      kInitStddev;
  Array wpe =
      random::normal(keys.next(site), Shape{config.max_context, c}, DType::f32, site) * kInitStddev;
  std::vector<Tree> blocks;
  for (int64_t l = 0; l < config.layers; ++l) {
    Tree c_attn = dense_init(keys, c, 3 * c, kInitStddev, site);
    Tree attn_proj = dense_init(keys, c, c, residual_stddev, site);
    Tree c_fc = dense_init(keys, c, 4 * c, kInitStddev, site);
    Tree mlp_proj = dense_init(keys, 4 * c, c, residual_stddev, site);
    blocks.push_back(
        Tree::dict({{"ln_1", norm_init(c, site)},
                    {"attn", Tree::dict({{"c_attn", c_attn}, {"c_proj", attn_proj}}, site)},
                    {"ln_2", norm_init(c, site)},
                    {"mlp", Tree::dict({{"c_fc", c_fc}, {"c_proj", mlp_proj}}, site)}},
                   site));
  }
  return Tree::dict(
      {{"wte", wte}, {"wpe", wpe}, {"h", Tree::list(blocks)}, {"ln_f", norm_init(c, site)}}, site);
}

Array gpt2_logits_observed(const Gpt2Config& config, const Tree& params, const Array& tokens,
                           const Gpt2Observer& observe, CallSite site) {
  config.check(site);
  check_token_array(config, tokens, site);
  int64_t length = tokens.shape()[1];
  const Array& wte = params["wte"].leaf(site);
  Array positions = slice(params["wpe"].leaf(site), {0, 0}, {length, config.channels}, {}, site);
  Array x = add(take(wte, tokens, 0, std::nullopt, site), positions, site);
  if (observe) observe("embedding", x);
  auto block_fn = [&config, site](const Array& in, const Tree& block) {
    Array y = add(in, attention(config, block["attn"], norm(block["ln_1"], in, site), site), site);
    return add(y, mlp(block["mlp"], norm(block["ln_2"], y, site), site), site);
  };
  const Tree& blocks = params["h"];
  for (int64_t l = 0; l < config.layers; ++l) {
    switch (config.remat) {
      case Gpt2Remat::kNone:
        x = block_fn(x, blocks[l]);
        break;
      case Gpt2Remat::kBlocks:
        x = checkpoint(block_fn, save_nothing(), site)(x, blocks[l]);
        break;
      case Gpt2Remat::kBlocksSaveDots:
        x = checkpoint(block_fn, save_dot_outputs(), site)(x, blocks[l]);
        break;
    }
    if (observe) observe(fmt::format("h_{}", l), x);
  }
  x = norm(params["ln_f"], x, site);
  if (observe) observe("ln_f", x);
  return matmul(x, transpose(wte, {1, 0}, site), site);
}

Array gpt2_logits(const Gpt2Config& config, const Tree& params, const Array& tokens,
                  CallSite site) {
  return gpt2_logits_observed(config, params, tokens, Gpt2Observer(), site);
}

Array gpt2_loss(const Gpt2Config& config, const Tree& params, const Array& tokens,
                const Array& targets, CallSite site) {
  return softmax_cross_entropy(gpt2_logits(config, params, tokens, site), targets, {}, site);
}

namespace {

class Gpt2Module : public Layer {
 public:
  explicit Gpt2Module(const Gpt2Config& config) : config_(config) {}

  std::string_view kind() const override { return "gpt2"; }
  std::string describe() const override { return config_.to_string(); }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    if (!is_integer(input.dtype) || input.shape.rank() != 2) {
      fail(scope.site,
           fmt::format("{}{} expects integer tokens [batch, length], got {}", scope.prefix(),
                       describe(), input.to_string()),
           "token ids are i32, one row per sequence");
    }
    if (input.shape[1] > config_.max_context) {
      fail(scope.site,
           fmt::format("{}{}: a context of {} tokens is longer than the model's maximum, {}",
                       scope.prefix(), describe(), input.shape[1], config_.max_context),
           "cut the sequences to max_context tokens (the position embedding has no row past it)");
    }
    return AbstractValue(Shape{input.shape[0], input.shape[1], config_.padded_vocab_size},
                         DType::f32);
  }

  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    AbstractValue output = output_type(input, scope);
    return LayerInit{Variables{gpt2_init(config_, key, scope.site), Tree()}, output};
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& /*options*/,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    return ApplyResult{gpt2_logits(config_, variables.params, x, scope.site), variables.state};
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    output_type(input, scope);
    int64_t c = config_.channels;
    int64_t norm = 2 * c;
    int64_t block =
        2 * norm + (c * 3 * c + 3 * c) + (c * c + c) + (c * 4 * c + 4 * c) + (4 * c * c + c);
    return (config_.padded_vocab_size + config_.max_context) * c + config_.layers * block + norm;
  }

 private:
  Gpt2Config config_;
};

}  // namespace

Module Gpt2(const Gpt2Config& config, CallSite site) {
  config.check(site);
  return Module(std::make_shared<Gpt2Module>(config));
}

void check_tokens(const Gpt2Config& config, const Array& tokens, CallSite site) {
  check_token_array(config, tokens, site);
  std::vector<int64_t> values = astype(tokens, DType::i64, site).to_vector<int64_t>(site);
  int64_t length = tokens.shape()[1];
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= config.vocab_size) {
      int64_t position = static_cast<int64_t>(i);
      fail(site,
           fmt::format("nn::gpt2: token {} at [{}, {}] is outside the vocabulary [0, {})",
                       values[i], position / length, position % length, config.vocab_size),
           "token ids come from the tokenizer the model was configured for (vocab_size)");
    }
  }
}

}  // namespace kiln::nn
