// The kernels kiln ships, written as a user writes one (kiln/pallas.h): the body reads its
// blocks with load(), computes with ordinary array operations, writes with store().
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/pallas.h"

namespace kiln::pallas {
namespace {

void check_float(const Array& x, std::string_view kernel, std::string_view what, CallSite site) {
  if (!x.defined() ||
      !(x.dtype() == DType::f32 || x.dtype() == DType::bf16 || x.dtype() == DType::f16)) {
    fail(site, fmt::format("pallas::{}: {} is {}; the kernel takes f32, bf16 or f16", kernel, what,
                           x.defined() ? x.aval().to_string() : "an empty Array"));
  }
}

}  // namespace

Array matmul(const Array& a, const Array& b, MatmulBlocks blocks, CallSite site) {
  check_float(a, "matmul", "a", site);
  check_float(b, "matmul", "b", site);
  if (a.shape().rank() != 2 || b.shape().rank() != 2 || a.shape()[1] != b.shape()[0] ||
      a.dtype() != b.dtype()) {
    fail(site, fmt::format("pallas::matmul: {} @ {}: expected a [M, K] and b [K, N] of one dtype",
                           a.aval().to_string(), b.aval().to_string()));
  }
  if (blocks.m < 1 || blocks.n < 1 || blocks.k < 1) {
    fail(site, fmt::format("pallas::matmul: blocks {} x {} x {} must be positive", blocks.m,
                           blocks.n, blocks.k));
  }
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  // No grid point would run: the product is all zeros (K = 0) or has no elements.
  if (m == 0 || n == 0 || k == 0) return zeros(Shape({m, n}), a.dtype());
  const int64_t k_steps = cdiv(k, blocks.k);
  auto body = [k_steps](const Kernel& kernel) {
    // Ragged K blocks load as zeros, which add nothing.
    Array x = astype(kernel.in(0).load(), DType::f32);
    Array y = astype(kernel.in(1).load(), DType::f32);
    Array product = kiln::matmul(x, y);
    // The first K step starts the sum and the last one stores it: no pass of zeros, and
    // no copy of the accumulator into the output.
    const int64_t step = kernel.program_id(2);
    Array sum = step == 0 ? product : kernel.scratch(0).load() + product;
    if (step == k_steps - 1) {
      kernel.out(0).store(sum);
    } else {
      kernel.scratch(0).store(sum);
    }
  };
  CallOptions options;
  options.name = "matmul";
  options.cost_estimate =
      Cost{.flops = 2.0 * static_cast<double>(m * n * k),
           .bytes_read = static_cast<double>(a.aval().size_bytes() + b.aval().size_bytes()),
           .bytes_written = static_cast<double>(m * n * dtype_size(a.dtype()))};
  options.scratch = {AbstractValue(Shape({blocks.m, blocks.n}), DType::f32)};
  return call(body, {AbstractValue(Shape({m, n}), a.dtype())},
              {cdiv(m, blocks.m), cdiv(n, blocks.n), k_steps},
              {BlockSpec({blocks.m, blocks.k},
                         [](const Index& g) {
                           return Index{g[0], g[2]};
                         }),
               BlockSpec({blocks.k, blocks.n},
                         [](const Index& g) {
                           return Index{g[2], g[1]};
                         })},
              {BlockSpec({blocks.m, blocks.n},
                         [](const Index& g) {
                           return Index{g[0], g[1]};
                         })},
              {a, b}, options, site)[0];
}

// kAutoBlockRows resolved; a negative count refused.
int64_t rows_per_block(int64_t block_rows, int64_t n, std::string_view kernel, CallSite site) {
  if (block_rows == kAutoBlockRows) return auto_block_rows(n);
  if (block_rows < 1) {
    fail(site, fmt::format("pallas::{}: block_rows must be positive (or kAutoBlockRows), got {}",
                           kernel, block_rows));
  }
  return block_rows;
}

int64_t auto_block_rows(int64_t n) {
  // Measured at n = 50,304 (kiln kernels bench softmax_cross_entropy --blocks 1 and 8): one
  // row a point 1.3x faster than eight, whose 1.6 MB blocks the passes after the first read
  // from memory again.
  constexpr int64_t kBlockElements = 16384;  // 64 KiB of f32
  return std::clamp<int64_t>(kBlockElements / std::max<int64_t>(n, 1), 1, 8);
}

Array softmax(const Array& x, int64_t block_rows, CallSite site) {
  check_float(x, "softmax", "x", site);
  if (x.shape().rank() != 2) {
    fail(site, fmt::format("pallas::softmax: x is {}; expected [rows, n]", x.aval().to_string()));
  }
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  block_rows = rows_per_block(block_rows, n, "softmax", site);
  if (rows == 0 || n == 0) return zeros(x.shape(), x.dtype());
  auto body = [](const Kernel& kernel) {
    Array z = astype(kernel.in(0).load(), DType::f32);
    Array shifted = z - max(z, {1}, /*keepdims=*/true);
    Array e = exp(shifted);
    kernel.out(0).store(e / sum(e, {1}, /*keepdims=*/true));
  };
  CallOptions options;
  options.name = "softmax";
  options.semantics = {GridAxis::kParallel};
  return call(body, {AbstractValue(x.shape(), x.dtype())}, {cdiv(rows, block_rows)},
              {BlockSpec({block_rows, -1},
                         [](const Index& g) {
                           return Index{g[0], 0};
                         })},
              {BlockSpec({block_rows, -1},
                         [](const Index& g) {
                           return Index{g[0], 0};
                         })},
              {x}, options, site)[0];
}

Array layer_norm(const Array& x, const Array& scale, const Array& bias, double eps,
                 int64_t block_rows, CallSite site) {
  check_float(x, "layer_norm", "x", site);
  if (x.shape().rank() != 2) {
    fail(site,
         fmt::format("pallas::layer_norm: x is {}; expected [rows, n]", x.aval().to_string()));
  }
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  for (const auto& [param, what] : {std::pair{&scale, "scale"}, std::pair{&bias, "bias"}}) {
    if (!param->defined() || param->shape() != Shape({n}) || param->dtype() != x.dtype()) {
      fail(site, fmt::format("pallas::layer_norm: {} is {}; expected {}[{}], x's dtype and last "
                             "axis",
                             what, param->defined() ? param->aval().to_string() : "an empty Array",
                             dtype_name(x.dtype()), n));
    }
  }
  block_rows = rows_per_block(block_rows, n, "layer_norm", site);
  if (!(eps >= 0) || !std::isfinite(eps)) {
    fail(site, fmt::format("pallas::layer_norm: eps must be finite and not negative, got {}", eps));
  }
  if (rows == 0 || n == 0) return zeros(x.shape(), x.dtype());
  auto body = [eps](const Kernel& kernel) {
    Array z = astype(kernel.in(0).load(), DType::f32);
    Array centred = z - mean(z, {1}, /*keepdims=*/true);
    Array variance = mean(centred * centred, {1}, /*keepdims=*/true);
    Array normed = centred * rsqrt(variance + eps);
    Array scale = astype(kernel.in(1).load(), DType::f32);
    Array bias = astype(kernel.in(2).load(), DType::f32);
    kernel.out(0).store(normed * scale + bias);
  };
  CallOptions options;
  options.name = "layer_norm";
  options.semantics = {GridAxis::kParallel};
  auto rows_of = [](const Index& g) { return Index{g[0], 0}; };
  auto whole = [](const Index&) { return Index{0}; };
  return call(
      body, {AbstractValue(x.shape(), x.dtype())}, {cdiv(rows, block_rows)},
      {BlockSpec({block_rows, -1}, rows_of), BlockSpec({-1}, whole), BlockSpec({-1}, whole)},
      {BlockSpec({block_rows, -1}, rows_of)}, {x, scale, bias}, options, site)[0];
}

// The checks both passes of softmax cross-entropy make before the kernel runs (the labels'
// values are checked by the body, checked_label_block); the labels as i32, and `block_rows`
// resolved.
Array checked_labels(const Array& logits, const Array& labels, int64_t& block_rows,
                     std::string_view kernel, CallSite site) {
  check_float(logits, kernel, "logits", site);
  if (logits.shape().rank() != 2) {
    fail(site, fmt::format("pallas::{}: logits are {}; expected [rows, n]", kernel,
                           logits.aval().to_string()));
  }
  const int64_t rows = logits.shape()[0];
  block_rows = rows_per_block(block_rows, logits.shape()[1], kernel, site);
  if (!labels.defined() || labels.shape() != Shape({rows}) ||
      !(labels.dtype() == DType::i32 || labels.dtype() == DType::i64)) {
    fail(site, fmt::format("pallas::{}: labels are {}; expected i32 or i64 [{}], one per row of "
                           "the logits {}",
                           kernel, labels.defined() ? labels.aval().to_string() : "an empty Array",
                           rows, logits.aval().to_string()));
  }
  // Labels given as values are checked now, naming the row; traced ones by the body.
  if (labels.impl()->is_concrete()) {
    std::vector<int64_t> values = astype(labels, DType::i64).to_vector<int64_t>();
    const int64_t n = logits.shape()[1];
    for (size_t r = 0; r < values.size(); ++r) {
      if (values[r] < 0 || values[r] >= n) {
        fail(site, fmt::format("pallas::{}: the label of row {} is {}, outside [0, {}) (the "
                               "logits' last axis)",
                               kernel, r, values[r], n));
      }
    }
  }
  return astype(labels, DType::i32);
}

// The labels' block of this grid point (block_rows rows of one per row), each checked
// against the n classes. In the body, so that a traced call checks them when it runs.
// `gathered`: the body gathers the logits at the labels (which refuses one outside [0, n)
// as the program runs), so a traced block needs no check of its own.
Array checked_label_block(const Kernel& kernel, int64_t n, std::string_view name,
                          bool gathered = false) {
  Array block = kernel.in(1).load();
  if (!block.impl()->is_concrete() && gathered) return block;
  if (!block.impl()->is_concrete()) {
    // A compiled body cannot read its labels on the host: a gather of [0, n) at the labels
    // is the labels themselves, and refuses one outside [0, n) as the program runs
    // (IndexMode::kError), the error naming the grid point.
    return take(iota(Shape({n}), DType::i32), block);
  }
  const int64_t valid = kernel.in(1).valid_extent()[0];
  const int64_t first_row = kernel.program_id(0) * block.shape()[0];
  std::vector<int32_t> host = block.to_vector<int32_t>();
  for (int64_t r = 0; r < valid; ++r) {
    int32_t label = host[static_cast<size_t>(r)];
    if (label < 0 || label >= n) {
      fail(kUnknownSite, fmt::format("pallas::{}: the label of row {} is {}, outside [0, {}) (the "
                                     "logits' last axis)",
                                     name, first_row + r, label, n));
    }
  }
  return block;
}

Array softmax_cross_entropy(const Array& logits, const Array& labels, int64_t block_rows,
                            CallSite site) {
  Array labels32 = checked_labels(logits, labels, block_rows, "softmax_cross_entropy", site);
  const int64_t rows = logits.shape()[0];
  if (rows == 0) return zeros(Shape({0}), DType::f32);
  const int64_t n = logits.shape()[1];
  auto body = [n](const Kernel& kernel) {
    Array z = astype(kernel.in(0).load(), DType::f32);
    Array row_max = max(z, {1}, /*keepdims=*/true);
    Array log_sum = log(sum(exp(z - row_max), {1})) + squeeze(row_max, {1});
    Array label =
        expand_dims(checked_label_block(kernel, n, "softmax_cross_entropy", /*gathered=*/true), 1);
    Array picked = squeeze(take_along_axis(z, label, 1), {1});
    kernel.out(0).store(log_sum - picked);
  };
  CallOptions options;
  options.name = "softmax_cross_entropy";
  options.semantics = {GridAxis::kParallel};
  auto rows_of = [](const Index& g) { return Index{g[0], 0}; };
  auto row = [](const Index& g) { return Index{g[0]}; };
  return call(body, {AbstractValue(Shape({rows}), DType::f32)}, {cdiv(rows, block_rows)},
              {BlockSpec({block_rows, -1}, rows_of), BlockSpec({block_rows}, row)},
              {BlockSpec({block_rows}, row)}, {logits, labels32}, options, site)[0];
}

Array softmax_cross_entropy_grad(const Array& logits, const Array& labels, const Array& g,
                                 int64_t block_rows, CallSite site) {
  Array labels32 = checked_labels(logits, labels, block_rows, "softmax_cross_entropy_grad", site);
  const int64_t rows = logits.shape()[0], n = logits.shape()[1];
  if (!g.defined() || g.shape() != Shape({rows}) || g.dtype() != DType::f32) {
    fail(site, fmt::format("pallas::softmax_cross_entropy_grad: g is {}; expected f32[{}], the "
                           "cotangent of each row's loss",
                           g.defined() ? g.aval().to_string() : "an empty Array", rows));
  }
  if (rows == 0 || n == 0) return zeros(logits.shape(), logits.dtype());
  auto body = [n](const Kernel& kernel) {
    Array z = astype(kernel.in(0).load(), DType::f32);
    Array e = exp(z - max(z, {1}, /*keepdims=*/true));
    Array p = e / sum(e, {1}, /*keepdims=*/true);
    Array label = expand_dims(checked_label_block(kernel, n, "softmax_cross_entropy_grad"), 1);
    int64_t block = z.shape()[0];
    Array onehot = astype(equal(iota(Shape({block, n}), DType::i32, 1), label), DType::f32);
    kernel.out(0).store((p - onehot) * expand_dims(kernel.in(2).load(), 1));
  };
  CallOptions options;
  options.name = "softmax_cross_entropy_grad";
  options.semantics = {GridAxis::kParallel};
  auto rows_of = [](const Index& i) { return Index{i[0], 0}; };
  auto row = [](const Index& i) { return Index{i[0]}; };
  return call(body, {AbstractValue(logits.shape(), logits.dtype())}, {cdiv(rows, block_rows)},
              {BlockSpec({block_rows, -1}, rows_of), BlockSpec({block_rows}, row),
               BlockSpec({block_rows}, row)},
              {BlockSpec({block_rows, -1}, rows_of)}, {logits, labels32, g}, options, site)[0];
}

}  // namespace kiln::pallas
