// Layers as plain functions of arrays, for code that holds its own parameters (as a JAX
// user writes with jax.nn and Flax's functional core): normalisation and attention. The
// modules of kiln/nn/module.h call the same functions.
//
//   Array y = nn::layer_norm(x, scale, bias);                       // over the last axis
//   Array out = nn::dot_product_attention(q, k, v, {.is_causal = true});
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "kiln/array.h"
#include "kiln/shape.h"

namespace kiln::nn {

// (x - mean) / sqrt(var + epsilon) over `axes` (empty: every axis), the variance the mean
// of squared deviations (two passes: exact when the mean is large against the spread,
// where jax.nn.standardize's default mean(x^2) - mean(x)^2 loses digits).
Array standardize(const Array& x, Dims axes = {-1}, double epsilon = 1e-5, CallSite site = {});

// Flax's LayerNorm over the last axis: standardize(x) * scale + bias, scale and bias of
// the last axis's size (either may be left out). epsilon is Flax's default.
Array layer_norm(const Array& x, const std::optional<Array>& scale = std::nullopt,
                 const std::optional<Array>& bias = std::nullopt, double epsilon = 1e-6,
                 CallSite site = {});
// Flax's RMSNorm over the last axis: x / sqrt(mean(x^2) + epsilon) * scale.
Array rms_norm(const Array& x, const std::optional<Array>& scale = std::nullopt,
               double epsilon = 1e-6, CallSite site = {});

// How dot_product_attention computes (JAX's `implementation` argument): kPlain builds the
// [T, S] logits and their softmax; kFlash runs pallas::flash_attention, which never holds
// them (peak memory O(T) per head; docs/kernels.md) and takes self-attention of one length
// with is_causal or no mask at all, the default scale, and f32, bf16 or f16; any other
// option is refused by name.
enum class AttentionImplementation : uint8_t { kPlain, kFlash };

struct AttentionOptions {
  // Added to the logits; broadcasts to [batch, heads, query length, key length].
  std::optional<Array> bias = std::nullopt;
  // Bool, broadcasting like bias: true where a query may attend to a key.
  std::optional<Array> mask = std::nullopt;
  // Query i attends to keys 0..i (the mask's lower triangle, aligned at the first key).
  bool is_causal = false;
  // Multiplies the logits; 1 / sqrt(head size) when not given.
  std::optional<double> scale = std::nullopt;
  // i32 [batch]: the valid length of each example's queries and keys; positions past it are
  // padding. A padded query's output is zero, and no query attends to a padded key.
  std::optional<Array> query_seq_lengths = std::nullopt;
  std::optional<Array> key_value_seq_lengths = std::nullopt;
  // (left, right): query i attends to keys i - left .. i + right only (sliding-window
  // attention; with is_causal, right is 0 in effect).
  std::optional<std::pair<int64_t, int64_t>> local_window_size = std::nullopt;
  AttentionImplementation implementation = AttentionImplementation::kPlain;
};

// jax.nn.dot_product_attention: softmax(q k^T * scale + bias, masked) v for query
// [batch, T, N heads, H] (or [T, N, H]) and key, value [batch, S, K heads, H] with N a
// multiple of K (grouped-query attention: each key head serves N / K query heads). Masked
// logits become a large negative number (as JAX does), so a query that may attend to
// nothing averages the values evenly. Returns [batch, T, N, H]. Logits and softmax are
// computed in at least f32 (bf16/f16 inputs) and in f64 for f64 inputs (JAX computes the
// softmax in f32 even then).
Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const AttentionOptions& options = {}, CallSite site = {});

}  // namespace kiln::nn
