// pallas::flash_attention (kiln/pallas.h): the online softmax over key blocks. Scratch per
// query block: m, the rows' largest score so far; l, the sum of exp(score - m); acc, the sum
// of exp(score - m) v. A new key block with maximum m' rescales l and acc by exp(m - m'),
// so the result, acc / l at the last key block, is the softmax's without its matrix.
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/pallas.h"

namespace kiln::pallas {
namespace {

void check_attention_input(const Array& x, std::string_view name, CallSite site) {
  if (!x.defined() || x.shape().rank() != 3 ||
      !(x.dtype() == DType::f32 || x.dtype() == DType::bf16 || x.dtype() == DType::f16)) {
    fail(site, fmt::format("pallas::flash_attention: {} is {}; expected [batch x heads, T, D] "
                           "in f32, bf16 or f16",
                           name, x.defined() ? x.aval().to_string() : "an empty Array"));
  }
}

}  // namespace

Array flash_attention(const Array& q, const Array& k, const Array& v, bool causal,
                      AttentionBlocks blocks, CallSite site) {
  check_attention_input(q, "q", site);
  check_attention_input(k, "k", site);
  check_attention_input(v, "v", site);
  if (q.shape() != k.shape() || q.shape() != v.shape() || q.dtype() != k.dtype() ||
      q.dtype() != v.dtype()) {
    fail(site, fmt::format("pallas::flash_attention: q {}, k {}, v {} must have one shape and "
                           "dtype",
                           q.aval().to_string(), k.aval().to_string(), v.aval().to_string()));
  }
  if (blocks.q < 1 || blocks.k < 1) {
    fail(site, fmt::format("pallas::flash_attention: blocks {} x {} must be positive", blocks.q,
                           blocks.k));
  }
  const int64_t bh = q.shape()[0], t = q.shape()[1], d = q.shape()[2];
  if (bh == 0 || t == 0 || d == 0) return zeros(q.shape(), q.dtype());
  const int64_t bq = blocks.q, bk = blocks.k;
  const int64_t k_steps = cdiv(t, bk);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const double minus_inf = -std::numeric_limits<double>::infinity();

  auto body = [=](const Kernel& kernel) {
    const int64_t i = kernel.program_id(1), j = kernel.program_id(2);
    const Ref& m = kernel.scratch(0);
    const Ref& l = kernel.scratch(1);
    const Ref& acc = kernel.scratch(2);
    if (j == 0) {
      m.store(full(Shape({bq, 1}), minus_inf, DType::f32));
      l.store(zeros(Shape({bq, 1})));
      acc.store(zeros(Shape({bq, d})));
    }
    // With the causal mask, a key block wholly after the query block adds nothing.
    const bool skipped = causal && j * bk > (i + 1) * bq - 1;
    if (!skipped) {
      Array qb = reshape(astype(kernel.in(0).load(), DType::f32), {bq, d}) * scale;
      Array kb = reshape(astype(kernel.in(1).load(), DType::f32), {bk, d});
      Array vb = reshape(astype(kernel.in(2).load(), DType::f32), {bk, d});
      Array scores = kiln::matmul(qb, transpose(kb));  // [bq, bk]
      // Keys past the sequence's end (a ragged last block), and after the query if causal.
      Array rows = iota(Shape({bq, bk}), DType::i32, 0) + static_cast<double>(i * bq);
      Array cols = iota(Shape({bq, bk}), DType::i32, 1) + static_cast<double>(j * bk);
      Array masked = greater_equal(cols, full(Shape({bq, bk}), static_cast<double>(t), DType::i32));
      if (causal) masked = bitwise_or(masked, greater(cols, rows));
      scores = where(masked, full(Shape({bq, bk}), minus_inf), scores);
      Array m_old = m.load();
      Array m_new = maximum(m_old, max(scores, {1}, true));
      // Every row has a key here (the first key block holds key 0, which no query masks),
      // so m_new is finite from the first block on and exp(m_old - m_new) is 0, not NaN.
      Array p = exp(scores - m_new);
      Array rescale = exp(m_old - m_new);
      l.store(l.load() * rescale + sum(p, {1}, true));
      acc.store(acc.load() * rescale + kiln::matmul(p, vb));
      m.store(m_new);
    }
    if (j == k_steps - 1) {
      kernel.out(0).store(reshape(acc.load() / l.load(), {1, bq, d}));
    }
  };
  CallOptions options;
  options.name = "flash_attention";
  options.scratch = {AbstractValue(Shape({bq, 1}), DType::f32),
                     AbstractValue(Shape({bq, 1}), DType::f32),
                     AbstractValue(Shape({bq, d}), DType::f32)};
  auto q_map = [](const Index& g) { return Index{g[0], g[1], 0}; };
  auto kv_map = [](const Index& g) { return Index{g[0], g[2], 0}; };
  return call(body, {AbstractValue(q.shape(), q.dtype())}, {bh, cdiv(t, bq), k_steps},
              {BlockSpec({1, bq, -1}, q_map), BlockSpec({1, bk, -1}, kv_map),
               BlockSpec({1, bk, -1}, kv_map)},
              {BlockSpec({1, bq, -1}, q_map)}, {q, k, v}, options, site)[0];
}

}  // namespace kiln::pallas
