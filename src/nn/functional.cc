// Normalisation and attention as functions of arrays (include/kiln/nn/functional.h),
// composed of kiln ops so that grad, vmap and jit go through them.
#include "kiln/nn/functional.h"

#include <cmath>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "kiln/nn/activations.h"
#include "kiln/ops.h"
#include "kiln/pallas.h"

namespace kiln::nn {
namespace {

void check_float(std::string_view op, std::string_view name, const Array& x, CallSite site) {
  if (!x.defined()) fail(site, fmt::format("nn::{}: {} is an empty Array", op, name));
  if (!is_floating(x.dtype())) {
    fail(site, fmt::format("nn::{}: {} must be a floating-point array, got {}", op, name,
                           x.aval().to_string()));
  }
}

// scale or bias: a vector of the last axis's size.
void check_feature_vector(std::string_view op, std::string_view name, const Array& x,
                          const Array& v, CallSite site) {
  check_float(op, name, v, site);
  if (v.rank() != 1 || v.shape()[0] != x.shape()[x.rank() - 1]) {
    fail(site, fmt::format("nn::{}: {} must be [{}] (the last axis of x, {}), got {}", op, name,
                           x.shape()[x.rank() - 1], x.aval().to_string(), v.aval().to_string()));
  }
}

void check_last_axis(std::string_view op, const Array& x, CallSite site) {
  check_float(op, "x", x, site);
  if (x.rank() == 0) {
    fail(site,
         fmt::format("nn::{}: x must have at least one axis, got {}", op, x.aval().to_string()));
  }
}

Array scalar_like(const Array& x, double value, CallSite site) {
  return full(Shape{}, value, x.dtype(), device_of(x), site);
}

// [batch, T, heads, H], adding a batch axis of 1 to [T, heads, H].
Array with_batch(std::string_view name, const Array& x, CallSite site) {
  check_float("dot_product_attention", name, x, site);
  if (x.rank() == 3) return reshape(x, Shape{1, x.shape()[0], x.shape()[1], x.shape()[2]}, site);
  if (x.rank() != 4) {
    fail(site, fmt::format("nn::dot_product_attention: {} must be [batch, length, heads, head "
                           "size] or [length, heads, head size], got {}",
                           name, x.aval().to_string()));
  }
  return x;
}

// bias or mask, broadcast to [B, N, T, S], regrouped as [B, K, G, T, S].
Array grouped(std::string_view name, const Array& t, const Shape& logits_shape, int64_t heads,
              int64_t groups, CallSite site) {
  const Shape& s = logits_shape;  // [B, N, T, S]
  if (!t.defined())
    fail(site, fmt::format("nn::dot_product_attention: {} is an empty Array", name));
  Array full_shape = t;
  if (t.rank() > 4) {
    fail(site, fmt::format("nn::dot_product_attention: {} has {} axes; it broadcasts to [batch, "
                           "heads, query length, key length]",
                           name, t.rank()));
  }
  try {
    full_shape = broadcast_to(t, s, site);
  } catch (const Error&) {
    fail(site, fmt::format("nn::dot_product_attention: {} {} does not broadcast to the logits "
                           "[batch, heads, query length, key length] = {}",
                           name, t.aval().to_string(), s.to_string()));
  }
  return reshape(full_shape, Shape{s[0], heads / groups, groups, s[2], s[3]}, site);
}

}  // namespace

Array standardize(const Array& x, Dims axes, double epsilon, CallSite site) {
  check_float("standardize", "x", x, site);
  if (axes.empty()) {
    for (int64_t i = 0; i < x.rank(); ++i) axes.push_back(i);
  }
  Array centered = sub(x, mean(x, axes, true, site), site);
  Array variance = mean(mul(centered, centered, site), axes, true, site);
  return mul(centered, rsqrt(add(variance, scalar_like(x, epsilon, site), site), site), site);
}

Array layer_norm(const Array& x, const std::optional<Array>& scale,
                 const std::optional<Array>& bias, double epsilon, CallSite site) {
  check_last_axis("layer_norm", x, site);
  Array y = standardize(x, {x.rank() - 1}, epsilon, site);
  if (scale) {
    check_feature_vector("layer_norm", "scale", x, *scale, site);
    y = mul(y, *scale, site);
  }
  if (bias) {
    check_feature_vector("layer_norm", "bias", x, *bias, site);
    y = add(y, *bias, site);
  }
  return y;
}

Array rms_norm(const Array& x, const std::optional<Array>& scale, double epsilon, CallSite site) {
  check_last_axis("rms_norm", x, site);
  Array mean_square = mean(mul(x, x, site), {x.rank() - 1}, true, site);
  Array y = mul(x, rsqrt(add(mean_square, scalar_like(x, epsilon, site), site), site), site);
  if (scale) {
    check_feature_vector("rms_norm", "scale", x, *scale, site);
    y = mul(y, *scale, site);
  }
  return y;
}

namespace {

// dot_product_attention through pallas::flash_attention, for q, k, v [batch, T, heads, H]
// already checked against each other: the heads join the batch ([batch x heads, T, H]) and
// come back after.
Array flash_attention(const Array& q, const Array& k, const Array& v,
                      const AttentionOptions& options, int64_t query_rank, CallSite site) {
  auto refuse = [&](std::string_view what) {
    fail(site,
         fmt::format("nn::dot_product_attention: implementation kFlash does not take {}", what),
         "use AttentionImplementation::kPlain for it");
  };
  if (options.bias) refuse("a bias");
  if (options.mask) refuse("a mask (is_causal is the mask it takes)");
  if (options.query_seq_lengths || options.key_value_seq_lengths) refuse("sequence lengths");
  if (options.local_window_size) refuse("a local window");
  const int64_t batch = q.shape()[0], t = q.shape()[1], heads = q.shape()[2], h = q.shape()[3];
  if (options.scale && *options.scale != 1.0 / std::sqrt(static_cast<double>(h))) {
    refuse(fmt::format("a scale other than 1 / sqrt(head size {}) (got {})", h, *options.scale));
  }
  if (k.shape()[1] != t || k.shape()[2] != heads) {
    refuse(
        fmt::format("keys of another length or head count than the queries (query {}, key "
                    "{}): it is self-attention without grouped heads",
                    q.aval().to_string(), k.aval().to_string()));
  }
  if (q.dtype() == DType::f64) refuse("f64 (it computes in f32: f32, bf16 or f16)");
  auto heads_first = [&](const Array& x) {
    return reshape(transpose(x, {0, 2, 1, 3}, site), Shape{batch * heads, t, h}, site);
  };
  Array out = pallas::flash_attention(heads_first(q), heads_first(k), heads_first(v),
                                      options.is_causal, {}, site);
  out = transpose(reshape(out, Shape{batch, heads, t, h}, site), {0, 2, 1, 3}, site);
  return query_rank == 3 ? reshape(out, Shape{t, heads, h}, site) : out;
}

}  // namespace

Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const AttentionOptions& options, CallSite site) {
  Array q = with_batch("query", query, site);
  Array k = with_batch("key", key, site);
  Array v = with_batch("value", value, site);
  int64_t batch = q.shape()[0], T = q.shape()[1], N = q.shape()[2], H = q.shape()[3];
  int64_t S = k.shape()[1], K = k.shape()[2];
  if (k.shape() != v.shape() || k.shape()[0] != batch || k.shape()[3] != H) {
    fail(site, fmt::format("nn::dot_product_attention: key {} and value {} must both be [batch "
                           "{}, key length, key heads, head size {}] for query {}",
                           key.aval().to_string(), value.aval().to_string(), batch, H,
                           query.aval().to_string()));
  }
  if (K == 0 || N % K != 0) {
    fail(site, fmt::format("nn::dot_product_attention: the query's {} heads must be a multiple of "
                           "the key's {} (grouped-query attention)",
                           N, K));
  }
  if (options.implementation == AttentionImplementation::kFlash) {
    return flash_attention(q, k, v, options, query.rank(), site);
  }
  int64_t G = N / K;
  // Logits and softmax in f32 at least: bf16/f16 logits lose the softmax's small terms.
  DType compute = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Array qc = astype(reshape(q, Shape{batch, T, K, G, H}, site), compute, site);
  Array kc = astype(k, compute, site);
  double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(H));
  Array logits = mul(einsum("BTKGH,BSKH->BKGTS", qc, kc, site),
                     full(Shape{}, scale, compute, device_of(qc), site), site);
  Shape logits_shape{batch, N, T, S};
  if (options.bias) {
    Array bias = astype(grouped("bias", *options.bias, logits_shape, N, G, site), compute, site);
    logits = add(logits, bias, site);
  }
  std::optional<Array> allowed;
  if (options.mask) {
    if (options.mask->defined() && options.mask->dtype() != DType::bool_) {
      fail(site, fmt::format("nn::dot_product_attention: mask must be bool, got {}",
                             options.mask->aval().to_string()));
    }
    allowed = grouped("mask", *options.mask, logits_shape, N, G, site);
  }
  if (options.is_causal) {
    Array causal = greater_equal(iota(Shape{T, S}, DType::i32, 0, device_of(qc), site),
                                 iota(Shape{T, S}, DType::i32, 1, device_of(qc), site), site);
    allowed = allowed ? bitwise_and(*allowed, causal, site) : causal;
  }
  if (options.local_window_size) {
    auto [left, right] = *options.local_window_size;
    if (left < 0 || right < 0) {
      fail(site, fmt::format("nn::dot_product_attention: local_window_size ({}, {}) must not be "
                             "negative",
                             left, right));
    }
    Array query_pos = iota(Shape{T, S}, DType::i64, 0, device_of(qc), site);
    Array key_pos = iota(Shape{T, S}, DType::i64, 1, device_of(qc), site);
    auto offset = [&](int64_t by) {
      return add(key_pos, full(Shape{}, static_cast<double>(by), DType::i64, device_of(qc), site),
                 site);
    };
    Array window = bitwise_and(less_equal(query_pos, offset(left), site),
                               greater_equal(query_pos, offset(-right), site), site);
    allowed = allowed ? bitwise_and(*allowed, window, site) : window;
  }
  Array query_valid;  // [B, T]: false at a padded query
  auto positions_below = [&](std::string_view name, const Array& lengths, int64_t length) {
    if (lengths.dtype() != DType::i32 || lengths.shape() != Shape{batch}) {
      fail(site, fmt::format("nn::dot_product_attention: {} must be i32[{}] (one length per "
                             "example), got {}",
                             name, batch, lengths.aval().to_string()));
    }
    Array position = iota(Shape{batch, length}, DType::i32, 1, device_of(qc), site);
    return less(position, broadcast_in_dim(lengths, Shape{batch, length}, {0}, site), site);
  };
  if (options.query_seq_lengths || options.key_value_seq_lengths) {
    // [B, T, S] -> [B, 1, 1, T, S] against the logits' [B, K, G, T, S].
    Array padding = full(Shape{batch, T, S}, 1, DType::bool_, device_of(qc), site);
    if (options.query_seq_lengths) {
      query_valid = positions_below("query_seq_lengths", *options.query_seq_lengths, T);
      padding = bitwise_and(padding,
                            broadcast_in_dim(query_valid, Shape{batch, T, S}, {0, 1}, site), site);
    }
    if (options.key_value_seq_lengths) {
      Array key_valid = positions_below("key_value_seq_lengths", *options.key_value_seq_lengths, S);
      padding =
          bitwise_and(padding, broadcast_in_dim(key_valid, Shape{batch, T, S}, {0, 2}, site), site);
    }
    Array grouped_padding = reshape(padding, Shape{batch, 1, 1, T, S}, site);
    allowed = allowed ? bitwise_and(*allowed, grouped_padding, site) : grouped_padding;
  }
  if (allowed) {
    // JAX's large negative number: finite in f32, so a fully masked row stays finite.
    double lowest = -0.7 * static_cast<double>(std::numeric_limits<float>::max());
    Array floor = full(Shape{}, lowest, compute, device_of(qc), site);
    logits = where(broadcast_to(*allowed, logits.shape(), site), logits,
                   broadcast_to(floor, logits.shape(), site), site);
  }
  Array probs = astype(softmax(logits, -1, site), v.dtype(), site);
  Array encoded = einsum("BKGTS,BSKH->BTKGH", probs, v, site);
  if (query_valid.defined()) {
    // A padded query's output is zero (as JAX), not the average its masked row computes.
    Array keep = broadcast_in_dim(query_valid, encoded.shape(), {0, 1}, site);
    encoded = where(keep, encoded, zeros_like(encoded, site), site);
  }
  Shape out_shape = query.rank() == 3 ? Shape{T, N, H} : Shape{batch, T, N, H};
  return reshape(encoded, out_shape, site);
}

}  // namespace kiln::nn
