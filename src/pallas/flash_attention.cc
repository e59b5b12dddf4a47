// pallas::flash_attention (kiln/pallas.h): the online softmax over key blocks. Scratch per
// query block: m, the rows' largest score so far; l, the sum of exp(score - m); acc, the sum
// of exp(score - m) v. A new key block with maximum m' rescales l and acc by exp(m - m'),
// so the result, acc / l at the last key block, is the softmax's without its matrix. The
// backward pass (FlashAttention-2's) recomputes the probabilities block by block from the
// forward's logsumexp, in two kernels: dK and dV per key block, dQ per query block.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/custom_vjp.h"
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

void check_attention_inputs(const Array& q, const Array& k, const Array& v, AttentionBlocks blocks,
                            CallSite site) {
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
}

// The scores of query block i against key block j, scaled, with the keys past the sequence's
// end, the queries past it (a ragged last block of either) and, if causal, the keys after
// each query set to -inf.
Array masked_scores(const Array& qb, const Array& kb, int64_t i, int64_t j, int64_t bq, int64_t bk,
                    int64_t t, bool causal, double scale) {
  const double minus_inf = -std::numeric_limits<double>::infinity();
  Array scores = kiln::matmul(qb, transpose(kb)) * scale;  // [bq, bk]
  // A block wholly inside the sequence and, if causal, wholly at or below the diagonal
  // masks nothing: only the diagonal's blocks and the ragged last ones pay for the mask.
  const bool ragged = (i + 1) * bq > t || (j + 1) * bk > t;
  const bool crosses_diagonal = causal && (j + 1) * bk - 1 > i * bq;
  if (!ragged && !crosses_diagonal) return scores;
  Array rows = iota(Shape({bq, bk}), DType::i32, 0) + static_cast<double>(i * bq);
  Array cols = iota(Shape({bq, bk}), DType::i32, 1) + static_cast<double>(j * bk);
  Array end = full(Shape({bq, bk}), static_cast<double>(t), DType::i32);
  Array masked = bitwise_or(greater_equal(cols, end), greater_equal(rows, end));
  if (causal) masked = bitwise_or(masked, greater(cols, rows));
  return where(masked, full(Shape({bq, bk}), minus_inf), scores);
}

// The forward pass: the output (in `out_dtype`) and each query row's logsumexp of its scores
// (f32 [BH, T]), which the backward pass reads instead of recomputing the softmax's
// statistics. The backward pass asks for the output in f32: delta = rowsum(d_out * out)
// cancels against dP, and an output rounded to bf16 would carry that rounding into dS.
std::vector<Array> attention_forward(const Array& q, const Array& k, const Array& v, bool causal,
                                     AttentionBlocks blocks, DType out_dtype, CallSite site) {
  const int64_t bh = q.shape()[0], t = q.shape()[1], d = q.shape()[2];
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
      Array qb = reshape(astype(kernel.in(0).load(), DType::f32), {bq, d});
      Array kb = reshape(astype(kernel.in(1).load(), DType::f32), {bk, d});
      Array vb = reshape(astype(kernel.in(2).load(), DType::f32), {bk, d});
      Array scores = masked_scores(qb, kb, i, j, bq, bk, t, causal, scale);
      Array m_old = m.load();
      Array m_new = maximum(m_old, max(scores, {1}, true));
      // Every row inside the sequence has a key here (the first key block holds key 0, which
      // no query masks), so m_new is finite from the first block on and exp(m_old - m_new)
      // is 0, not NaN. Rows past the end (a ragged block) stay at -inf: their p is NaN,
      // and they are never stored.
      Array p = exp(scores - m_new);
      Array rescale = exp(m_old - m_new);
      l.store(l.load() * rescale + sum(p, {1}, true));
      acc.store(acc.load() * rescale + kiln::matmul(p, vb));
      m.store(m_new);
    }
    if (j == k_steps - 1) {
      kernel.out(0).store(reshape(acc.load() / l.load(), {1, bq, d}));
      kernel.out(1).store(reshape(m.load() + log(l.load()), {1, bq}));
    }
  };
  CallOptions options;
  options.name = "flash_attention";
  options.scratch = {AbstractValue(Shape({bq, 1}), DType::f32),
                     AbstractValue(Shape({bq, 1}), DType::f32),
                     AbstractValue(Shape({bq, d}), DType::f32)};
  auto q_map = [](const Index& g) { return Index{g[0], g[1], 0}; };
  auto kv_map = [](const Index& g) { return Index{g[0], g[2], 0}; };
  auto row_map = [](const Index& g) { return Index{g[0], g[1]}; };
  return call(
      body, {AbstractValue(q.shape(), out_dtype), AbstractValue(Shape({bh, t}), DType::f32)},
      {bh, cdiv(t, bq), k_steps},
      {BlockSpec({1, bq, -1}, q_map), BlockSpec({1, bk, -1}, kv_map),
       BlockSpec({1, bk, -1}, kv_map)},
      {BlockSpec({1, bq, -1}, q_map), BlockSpec({1, bq}, row_map)}, {q, k, v}, options, site);
}

// The backward kernels for the output's cotangent, from the forward pass's output (in f32)
// and logsumexp (defined below flash_attention_grad, which runs the forward pass for them).
AttentionGrads attention_backward(const Array& q, const Array& k, const Array& v,
                                  const Array& d_out, const Array& out, const Array& lse,
                                  bool causal, AttentionBlocks blocks, CallSite site);

}  // namespace

namespace {

using AttentionFn = std::function<Array(const Array&, const Array&, const Array&)>;

// The forward kernel with the backward kernels as its VJP: one custom function per setting
// (the custom_vjp registers once per argument structure, so it is made once and kept).
const AttentionFn& differentiable_attention(bool causal, AttentionBlocks blocks) {
  static std::mutex mutex;
  static auto* functions = new std::map<std::tuple<bool, int64_t, int64_t>, AttentionFn>;
  std::lock_guard lock(mutex);
  auto [it, added] = functions->try_emplace({causal, blocks.q, blocks.k});
  if (added) {
    it->second = custom_vjp(
        "flash_attention",
        [causal, blocks](const Array& q, const Array& k, const Array& v) {
          // The output in f32 and the logsumexp are kept for the backward pass, which then
          // does not run the forward kernel again.
          std::vector<Array> forward =
              attention_forward(q, k, v, causal, blocks, DType::f32, CallSite());
          Array out = astype(forward[0], q.dtype());
          return std::pair{out, std::vector<Array>{q, k, v, forward[0], forward[1]}};
        },
        [causal, blocks](const std::vector<Array>& saved, const Array& d_out) {
          AttentionGrads grads = attention_backward(saved[0], saved[1], saved[2], d_out, saved[3],
                                                    saved[4], causal, blocks, CallSite());
          return std::tuple{grads.dq, grads.dk, grads.dv};
        });
  }
  return it->second;
}

}  // namespace

Array flash_attention(const Array& q, const Array& k, const Array& v, bool causal,
                      AttentionBlocks blocks, CallSite site) {
  check_attention_inputs(q, k, v, blocks, site);
  if (q.shape()[0] == 0 || q.shape()[1] == 0 || q.shape()[2] == 0) {
    return zeros(q.shape(), q.dtype());
  }
  return differentiable_attention(causal, blocks)(q, k, v);
}

AttentionGrads flash_attention_grad(const Array& q, const Array& k, const Array& v,
                                    const Array& d_out, bool causal, AttentionBlocks blocks,
                                    CallSite site) {
  check_attention_inputs(q, k, v, blocks, site);
  if (!d_out.defined() || d_out.shape() != q.shape() || d_out.dtype() != q.dtype()) {
    fail(site, fmt::format("pallas::flash_attention_grad: d_out is {}; expected {}, the "
                           "cotangent of the output",
                           d_out.defined() ? d_out.aval().to_string() : "an empty Array",
                           q.aval().to_string()));
  }
  const int64_t bh = q.shape()[0], t = q.shape()[1], d = q.shape()[2];
  if (bh == 0 || t == 0 || d == 0) {
    Array zero = zeros(q.shape(), q.dtype());
    return AttentionGrads{zero, zero, zero};
  }
  std::vector<Array> forward = attention_forward(q, k, v, causal, blocks, DType::f32, site);
  return attention_backward(q, k, v, d_out, forward[0], forward[1], causal, blocks, site);
}

namespace {

AttentionGrads attention_backward(const Array& q, const Array& k, const Array& v,
                                  const Array& d_out, const Array& out, const Array& lse,
                                  bool causal, AttentionBlocks blocks, CallSite site) {
  const int64_t bh = q.shape()[0], t = q.shape()[1], d = q.shape()[2];
  const int64_t bq = blocks.q, bk = blocks.k;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // delta = rowsum(d_out * out), with the forward's logsumexp: the softmax's backward needs
  // no row statistics of its own (FlashAttention-2's backward).
  Array delta = sum(astype(d_out, DType::f32) * out, {2});
  // What both kernels compute for query block i and key block j: the blocks of q, k and
  // d_out they read, the probabilities and dS = P * (dP - delta), in f32.
  struct BlockValues {
    Array q, k, d_out, p, ds;
  };
  auto block_values = [=](const Kernel& kernel, int64_t i, int64_t j) {
    BlockValues b;
    b.q = reshape(astype(kernel.in(0).load(), DType::f32), {bq, d});
    b.k = reshape(astype(kernel.in(1).load(), DType::f32), {bk, d});
    Array vb = reshape(astype(kernel.in(2).load(), DType::f32), {bk, d});
    b.d_out = reshape(astype(kernel.in(3).load(), DType::f32), {bq, d});
    Array row_lse = reshape(kernel.in(4).load(), {bq, 1});
    Array row_delta = reshape(kernel.in(5).load(), {bq, 1});
    b.p = exp(masked_scores(b.q, b.k, i, j, bq, bk, t, causal, scale) - row_lse);
    b.ds = b.p * (kiln::matmul(b.d_out, transpose(vb)) - row_delta);
    return b;
  };
  std::vector<Array> inputs = {q, k, v, d_out, lse, delta};

  // dK and dV: each key block runs through the query blocks in order (the last grid axis).
  const int64_t q_steps = cdiv(t, bq);
  auto kv_body = [=](const Kernel& kernel) {
    const int64_t j = kernel.program_id(1), i = kernel.program_id(2);
    const Ref& dk = kernel.scratch(0);
    const Ref& dv = kernel.scratch(1);
    if (i == 0) {
      dk.store(zeros(Shape({bk, d})));
      dv.store(zeros(Shape({bk, d})));
    }
    if (!(causal && j * bk > (i + 1) * bq - 1)) {
      BlockValues b = block_values(kernel, i, j);
      dv.store(dv.load() + kiln::matmul(transpose(b.p), b.d_out));
      dk.store(dk.load() + kiln::matmul(transpose(b.ds), b.q) * scale);
    }
    if (i == q_steps - 1) {
      kernel.out(0).store(reshape(dk.load(), {1, bk, d}));
      kernel.out(1).store(reshape(dv.load(), {1, bk, d}));
    }
  };
  auto q_of_kv_grid = [](const Index& g) { return Index{g[0], g[2], 0}; };
  auto kv_of_kv_grid = [](const Index& g) { return Index{g[0], g[1], 0}; };
  auto row_of_kv_grid = [](const Index& g) { return Index{g[0], g[2]}; };
  CallOptions kv_options;
  kv_options.name = "flash_attention_dkdv";
  kv_options.scratch = {AbstractValue(Shape({bk, d}), DType::f32),
                        AbstractValue(Shape({bk, d}), DType::f32)};
  std::vector<Array> dkdv =
      call(kv_body, {AbstractValue(k.shape(), k.dtype()), AbstractValue(v.shape(), v.dtype())},
           {bh, cdiv(t, bk), q_steps},
           {BlockSpec({1, bq, -1}, q_of_kv_grid), BlockSpec({1, bk, -1}, kv_of_kv_grid),
            BlockSpec({1, bk, -1}, kv_of_kv_grid), BlockSpec({1, bq, -1}, q_of_kv_grid),
            BlockSpec({1, bq}, row_of_kv_grid), BlockSpec({1, bq}, row_of_kv_grid)},
           {BlockSpec({1, bk, -1}, kv_of_kv_grid), BlockSpec({1, bk, -1}, kv_of_kv_grid)}, inputs,
           kv_options, site);

  // dQ: each query block runs through the key blocks in order.
  const int64_t k_steps = cdiv(t, bk);
  auto q_body = [=](const Kernel& kernel) {
    const int64_t i = kernel.program_id(1), j = kernel.program_id(2);
    const Ref& dq = kernel.scratch(0);
    if (j == 0) dq.store(zeros(Shape({bq, d})));
    if (!(causal && j * bk > (i + 1) * bq - 1)) {
      BlockValues b = block_values(kernel, i, j);
      dq.store(dq.load() + kiln::matmul(b.ds, b.k) * scale);
    }
    if (j == k_steps - 1) kernel.out(0).store(reshape(dq.load(), {1, bq, d}));
  };
  auto q_of_q_grid = [](const Index& g) { return Index{g[0], g[1], 0}; };
  auto kv_of_q_grid = [](const Index& g) { return Index{g[0], g[2], 0}; };
  auto row_of_q_grid = [](const Index& g) { return Index{g[0], g[1]}; };
  CallOptions q_options;
  q_options.name = "flash_attention_dq";
  q_options.scratch = {AbstractValue(Shape({bq, d}), DType::f32)};
  Array dq = call(q_body, {AbstractValue(q.shape(), q.dtype())}, {bh, cdiv(t, bq), k_steps},
                  {BlockSpec({1, bq, -1}, q_of_q_grid), BlockSpec({1, bk, -1}, kv_of_q_grid),
                   BlockSpec({1, bk, -1}, kv_of_q_grid), BlockSpec({1, bq, -1}, q_of_q_grid),
                   BlockSpec({1, bq}, row_of_q_grid), BlockSpec({1, bq}, row_of_q_grid)},
                  {BlockSpec({1, bq, -1}, q_of_q_grid)}, inputs, q_options, site)[0];
  return AttentionGrads{dq, dkdv[0], dkdv[1]};
}

}  // namespace

}  // namespace kiln::pallas
