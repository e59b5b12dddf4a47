// The kernels kiln ships, written as a user writes one (kiln/pallas.h): the body reads its
// blocks with load(), computes with ordinary array operations, writes with store().
#include <string>

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
    const Ref& acc = kernel.scratch(0);
    if (kernel.program_id(2) == 0) acc.store(zeros(acc.block_type().shape));
    // Ragged K blocks load as zeros, which add nothing.
    Array x = astype(kernel.in(0).load(), DType::f32);
    Array y = astype(kernel.in(1).load(), DType::f32);
    acc.store(acc.load() + kiln::matmul(x, y));
    if (kernel.program_id(2) == k_steps - 1) kernel.out(0).store(acc.load());
  };
  CallOptions options;
  options.name = "matmul";
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

Array softmax(const Array& x, int64_t block_rows, CallSite site) {
  check_float(x, "softmax", "x", site);
  if (x.shape().rank() != 2) {
    fail(site, fmt::format("pallas::softmax: x is {}; expected [rows, n]", x.aval().to_string()));
  }
  if (block_rows < 1) {
    fail(site, fmt::format("pallas::softmax: block_rows must be positive, got {}", block_rows));
  }
  const int64_t rows = x.shape()[0], n = x.shape()[1];
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

}  // namespace kiln::pallas
