// GPT-2 (Radford et al., 2019) as plain functions of a params Tree, written the way a user
// writes it with kiln's public API: the token embedding read with take(), causal attention
// with nn::dot_product_attention, GELU's tanh form, the output projection tied to the token
// embedding, and the loss nn::softmax_cross_entropy. The layout and initialisation are
// GPT-2's (and llm.c's): pre-LayerNorm blocks, N(0, 0.02) weights, the two projections that
// feed the residual stream scaled by 1 / sqrt(2 * layers), zero biases, unit LayerNorm
// scales.
//
//   nn::Gpt2Config config = nn::Gpt2Config::small();
//   Tree params = nn::gpt2_init(config, random::key(0));
//   Array loss = nn::gpt2_loss(config, params, tokens, targets);  // tokens i32 [B, T]
//
// Params tree: wte [padded_vocab, C], wpe [max_context, C], h: a list of `layers` blocks
// {ln_1, attn: {c_attn, c_proj}, ln_2, mlp: {c_fc, c_proj}} (dense layers {kernel [in, out],
// bias}, norms {scale, bias}), ln_f. Logits cover the padded vocabulary, as llm.c's do: the
// extra rows of wte are trained towards never being predicted.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/array.h"
#include "kiln/error.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/module.h"
#include "kiln/tree.h"

namespace kiln::nn {

// What a training step keeps of each block's forward pass for the backward pass
// (docs/transformer.md, *Memory*): the activations of every block are most of a step's
// memory at long contexts.
enum class Gpt2Remat {
  kNone,            // every intermediate value: the fastest, the most memory
  kBlocks,          // each block's input only; the backward pass recomputes the block
                    // (checkpoint(block, save_nothing()))
  kBlocksSaveDots,  // each block's input and its matmul results; the rest recomputed
                    // (checkpoint(block, save_dot_outputs()))
};

struct Gpt2Config {
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t channels = 768;  // C, a multiple of heads
  int64_t vocab_size = 50257;
  // The embedding's rows: vocab_size rounded up (to a multiple of 128 in GPT-2's case) so
  // the output projection's GEMM has a friendly size.
  int64_t padded_vocab_size = 50304;
  int64_t max_context = 1024;
  Gpt2Remat remat = Gpt2Remat::kNone;
  // kFlash: the causal self-attention through pallas::flash_attention (no [T, T] matrix).
  AttentionImplementation attention = AttentionImplementation::kPlain;

  // GPT-2 124M.
  static Gpt2Config gpt2_124m() { return {}; }
  // A model small enough to train on a laptop in minutes (byte-level vocabulary).
  static Gpt2Config small() { return {4, 4, 256, 256, 256, 256}; }

  // Fails naming the field when a size is not positive or does not fit the others.
  void check(CallSite site = {}) const;
  std::string to_string() const;  // "GPT-2(layers 12, heads 12, C 768, vocab 50257/50304, ...)"
};

// Every parameter drawn from random::fold_in(key, i), i counting the params in the order
// of the tree above, so a model's weights do not depend on how its init is scheduled.
Tree gpt2_init(const Gpt2Config& config, const Array& key, CallSite site = {});

// Logits f32 [B, T, padded_vocab] for tokens, an integer array [B, T] with T <=
// max_context. A token outside [0, padded_vocab) is an error at the next synchronization
// (take's mode error); check_tokens reports one outside [0, vocab) before it gets here.
Array gpt2_logits(const Gpt2Config& config, const Tree& params, const Array& tokens,
                  CallSite site = {});

// Mean cross-entropy of predicting targets [B, T] (the tokens shifted by one).
Array gpt2_loss(const Gpt2Config& config, const Tree& params, const Array& tokens,
                const Array& targets, CallSite site = {});

// The same model as an nn::Module, for code that trains any Module (kiln train's
// model.kind = "gpt2"): input integer tokens [B, T] with T <= max_context, output the
// logits f32 [B, T, padded_vocab]; init is gpt2_init (its params tree as above), no state.
Module Gpt2(const Gpt2Config& config, CallSite site = {});

// Reads the tokens (a host synchronization) and fails naming the first one outside
// [0, vocab_size) with its position: for data sources, before a batch reaches the model.
void check_tokens(const Gpt2Config& config, const Array& tokens, CallSite site = {});

}  // namespace kiln::nn
