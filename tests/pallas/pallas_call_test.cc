// pallas::call (kiln/pallas.h): in interpret mode, the order of the grid's points and ragged
// blocks (masked loads with their fill, masked stores) as the body sees them; in the
// default (compiled) mode, accumulation over an arbitrary axis in an output block and in
// scratch, the race check on parallel axes, and every bad input refused by name; the
// shipped kernels beside kiln's own ops. Compiled against interpreted: pallas_compiled_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/array_functions.h"
#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn/functional.h"
#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "kiln/random.h"
#include "kiln/tracing.h"
#include "pallas/kernel_call.h"
#include "pallas/plain_attention.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::pallas {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;

Array iota_f32(int64_t rows, int64_t cols) {
  return astype(reshape(arange(rows * cols), {rows, cols}), DType::f32);
}

BlockSpec rows_of(int64_t block) {
  return BlockSpec({block, -1}, [](const Index& g) { return Index{g[0], 0}; });
}

std::vector<double> values(const Array& x) {
  HostArray host = astype(x, DType::f64).to_host();
  return {host.as<double>().begin(), host.as<double>().end()};
}

TEST(PallasCall, RaggedBlocksLoadTheirFillAndStoreOnlyInside) {
  detail::ForcedMode interpret(true);  // the body reads its blocks on the host
  Array x = iota_f32(10, 3);
  std::vector<Dims> extents;
  std::vector<double> last_block;
  auto copy = [&](const Kernel& k) {
    extents.push_back(k.in(0).valid_extent());
    Array block = k.in(0).load(/*fill=*/-1);
    if (k.program_id(0) == k.num_programs(0) - 1) last_block = values(block);
    k.out(0).store(block * 2.0);
  };
  CallOptions options;
  options.semantics = {GridAxis::kParallel};
  Array y = call(copy, {x.aval()}, {3}, {rows_of(4)}, {rows_of(4)}, {x}, options)[0];
  EXPECT_TRUE(same_bits(y, x * 2.0));
  EXPECT_EQ(extents, (std::vector<Dims>{{4, 3}, {4, 3}, {2, 3}}));
  // Rows 8 and 9, then two rows of the fill.
  EXPECT_EQ(last_block, (std::vector<double>{24, 25, 26, 27, 28, 29, -1, -1, -1, -1, -1, -1}));
}

TEST(PallasCall, PointsRunInRowMajorOrderAndAReductionAccumulates) {
  detail::ForcedMode interpret(true);  // the body runs at every point, in order
  std::vector<Index> order;
  // Column sums of a 6 x 4 array: grid (column blocks, row blocks), the row axis last.
  Array x = iota_f32(6, 4);
  auto column_sums = [&](const Kernel& k) {
    order.push_back({k.program_id(0), k.program_id(1)});
    if (k.program_id(1) == 0) k.out(0).store(zeros(Shape({1, 2})));
    k.out(0).store(k.out(0).load() + sum(k.in(0).load(), {0}, true));
  };
  Array y = call(column_sums, {AbstractValue(Shape({1, 4}), DType::f32)}, {2, 3},
                 {BlockSpec({2, 2},
                            [](const Index& g) {
                              return Index{g[1], g[0]};
                            })},
                 {BlockSpec({1, 2},
                            [](const Index& g) {
                              return Index{0, g[0]};
                            })},
                 {x})[0];
  EXPECT_TRUE(same_bits(y, sum(x, {0}, true)));
  EXPECT_EQ(order, (std::vector<Index>{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}}));
}

TEST(PallasCall, AParallelAxisTheOutputDoesNotFollowIsARace) {
  Array x = iota_f32(4, 4);
  auto body = [](const Kernel& k) { k.out(0).store(k.in(0).load()); };
  // Both points of parallel axis 0 write output block (0, 0).
  EXPECT_TRUE(fails_with(
      [&] {
        call(body, {AbstractValue(Shape({2, 4}), DType::f32)}, {2}, {rows_of(2)},
             {BlockSpec({2, 4},
                        [](const Index&) {
                          return Index{0, 0};
                        })},
             {x}, CallOptions{.name = "racy", .semantics = {GridAxis::kParallel}});
      },
      {"pallas kernel 'racy'",
       "output 0 block (0, 0) is written at grid points that differ in a "
       "parallel axis"}));
}

TEST(PallasCall, BadSpecsAndGridsAreRefusedByName) {
  Array x = iota_f32(8, 8);
  auto body = [](const Kernel& k) { k.out(0).store(k.in(0).load()); };
  auto run = [&](Index grid, BlockSpec in, BlockSpec out, CallOptions options = {}) {
    options.name = "copy";
    return call(body, {x.aval()}, std::move(grid), {std::move(in)}, {std::move(out)}, {x}, options);
  };
  EXPECT_TRUE(fails_with([&] { run({2}, BlockSpec({4}), rows_of(4)); },
                         {"pallas kernel 'copy'", "BlockSpec of input 0 has 1 block dimension(s)",
                          "f32[8,8] has rank 2"}));
  EXPECT_TRUE(
      fails_with([&] { run({3}, rows_of(4), rows_of(4), {.semantics = {GridAxis::kParallel}}); },
                 {"index map of input 0 returned block (2, 0) at grid point (2)",
                  "outside [0, 2) (f32[8,8] in blocks of [4,8])"}));
  EXPECT_TRUE(fails_with([&] { run({0}, rows_of(4), rows_of(4)); }, {"grid axis 0 has extent 0"}));
  EXPECT_TRUE(fails_with(
      [&] {
        run({2, 1}, rows_of(4), rows_of(4),
            {.semantics = {GridAxis::kArbitrary, GridAxis::kParallel}});
      },
      {"grid axis 0 runs in order (arbitrary) but axis 1 after it is parallel"}));
  EXPECT_TRUE(fails_with(
      [&] {
        run({2}, rows_of(4), rows_of(4),
            {.scratch = {AbstractValue(Shape({1024, 1024}), DType::f32)},
             .scratch_limit_bytes = 1 << 20});
      },
      {"scratch of 4194304 bytes, more than the limit of 1048576 bytes"}));
  EXPECT_TRUE(fails_with(
      [&] {
        run({2}, BlockSpec({4, 8}), rows_of(4));
      },
      {"BlockSpec of input 0 has no index map", "grid has rank 1"}));
  // Inside the body: the grid point is named.
  auto wrong_store = [](const Kernel& k) { k.out(0).store(zeros(Shape({3, 8}))); };
  EXPECT_TRUE(
      fails_with([&] { call(wrong_store, {x.aval()}, {2}, {rows_of(4)}, {rows_of(4)}, {x}); },
                 {"at grid point (0): output 0 stores f32[3,8] into a block of shape [4,8]"}));
  auto missing = [](const Kernel& k) { k.out(0).store(k.in(1).load()); };
  EXPECT_TRUE(fails_with([&] { call(missing, {x.aval()}, {2}, {rows_of(4)}, {rows_of(4)}, {x}); },
                         {"in(1) of 1 buffer"}));
  EXPECT_TRUE(fails_with([&] { call(body, {x.aval()}, {2}, {}, {rows_of(4)}, {x}); },
                         {"0 in_specs for 1 inputs"}));
  EXPECT_TRUE(fails_with(
      [&] {
        call(body, {x.aval()}, {2}, {rows_of(4)}, {rows_of(4)}, {x}, {.name = "a \"quoted\" name"});
      },
      {"a name is printed quoted in program text"}));
  // Checked when the call is made, inside jit too, before any body runs.
  auto traced = [&](const Array& a) {
    return call(body, {x.aval()}, {3}, {rows_of(4)}, {rows_of(4)}, {a},
                {.name = "copy", .semantics = {GridAxis::kParallel}})[0];
  };
  EXPECT_TRUE(fails_with([&] { (void)jit(traced)(x); },
                         {"pallas kernel 'copy'", "returned block (2, 0) at grid point (2)"}));
}

TEST(PallasKernels, MatmulAndSoftmaxAgreeWithTheOps) {
  Array a = random::normal(random::key(1), {37, 29});
  Array b = random::normal(random::key(2), {29, 53});
  Array c = pallas::matmul(a, b, MatmulBlocks{16, 16, 8});
  HostArray got = astype(c, DType::f64).to_host();
  HostArray want = kiln::matmul(astype(a, DType::f64), astype(b, DType::f64)).to_host();
  for (size_t i = 0; i < got.as<double>().size(); ++i) {
    EXPECT_NEAR(got.as<double>()[i], want.as<double>()[i], 1e-4);
  }
  EXPECT_EQ(pallas::matmul(zeros(Shape({3, 0})), zeros(Shape({0, 2}))).shape(), Shape({3, 2}));
  Array x = random::normal(random::key(3), {9, 33}) * 20.0;
  Array p = softmax(x, 4);
  Array e = exp(x - max(x, {1}, true));
  Array q = e / sum(e, {1}, true);
  HostArray ph = p.to_host(), qh = q.to_host();
  for (size_t i = 0; i < ph.as<float>().size(); ++i) {
    EXPECT_NEAR(ph.as<float>()[i], qh.as<float>()[i], 1e-6);
  }
  EXPECT_TRUE(
      fails_with([&] { pallas::matmul(a, a); }, {"pallas::matmul: f32[37,29] @ f32[37,29]"}));
  EXPECT_TRUE(
      fails_with([&] { softmax(astype(x, DType::i32)); }, {"pallas::softmax: x is i32[9,33]"}));
}

TEST(PallasKernels, LayerNormAndSoftmaxCrossEntropyAgreeWithTheOps) {
  Array x = random::normal(random::key(7), {11, 24}) * 3.0 + 2.0;
  Array scale = random::normal(random::key(8), {24});
  Array bias = random::normal(random::key(9), {24});
  Array got = pallas::layer_norm(x, scale, bias, 1e-5, 4);
  Array want = nn::layer_norm(x, scale, bias, 1e-5);
  std::vector<double> g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5) << i;
  Array labels = from_host<int32_t>({3, 0, 23, 7, 7, 1, 2, 9, 11, 22, 5}, Shape({11}));
  Array loss = pallas::softmax_cross_entropy(x, labels, 4);
  Array log_p = x - max(x, {1}, true) - log(sum(exp(x - max(x, {1}, true)), {1}, true));
  Array want_loss = -squeeze(take_along_axis(log_p, expand_dims(labels, 1), 1), {1});
  EXPECT_EQ(loss.shape(), Shape({11}));
  g = values(loss);
  w = values(want_loss);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5) << i;
  // Bad input names the kernel, the argument and what was expected.
  EXPECT_TRUE(fails_with([&] { pallas::layer_norm(x, bias.astype(DType::bf16), bias); },
                         {"pallas::layer_norm: scale is bf16[24]; expected f32[24]"}));
  EXPECT_TRUE(fails_with([&] { pallas::layer_norm(x, scale, bias, -1.0); },
                         {"eps must be finite and not negative, got -1"}));
  EXPECT_TRUE(fails_with([&] { pallas::layer_norm(x, scale, bias, 1e-5, -2); },
                         {"block_rows must be positive (or kAutoBlockRows), got -2"}));
  EXPECT_TRUE(fails_with([&] { pallas::softmax_cross_entropy(x, labels, -1); },
                         {"pallas::softmax_cross_entropy: block_rows must be positive"}));
  // kAutoBlockRows (the default) gives the bits of the rows it picks: 8 rows of 24 logits.
  EXPECT_TRUE(
      same_bits(pallas::layer_norm(x, scale, bias), pallas::layer_norm(x, scale, bias, 1e-5, 8)));
  Array bad = from_host<int32_t>({3, 0, 24, 7, 7, 1, 2, 9, 11, 22, 5}, Shape({11}));
  EXPECT_TRUE(fails_with([&] { pallas::softmax_cross_entropy(x, bad); },
                         {"the label of row 2 is 24, outside [0, 24)"}));
  EXPECT_TRUE(fails_with([&] { pallas::softmax_cross_entropy(x, astype(labels, DType::f32)); },
                         {"labels are f32[11]; expected i32 or i64 [11]"}));
  EXPECT_EQ(
      pallas::softmax_cross_entropy(zeros(Shape({0, 5})), zeros(Shape({0}), DType::i32)).shape(),
      Shape({0}));
  // The backward pass is the gradient of the forward's sum weighted by the upstream cotangent.
  Array upstream = random::normal(random::key(10), {11});
  Array dlogits = pallas::softmax_cross_entropy_grad(x, labels, upstream, 4);
  Array want_grad = grad([&](const Array& z) {
    Array lp = z - max(stop_gradient(z), {1}, true);
    lp = lp - log(sum(exp(lp), {1}, true));
    return sum(upstream * -squeeze(take_along_axis(lp, expand_dims(labels, 1), 1), {1}));
  })(x);
  g = values(dlogits);
  w = values(want_grad);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-6) << i;
  EXPECT_TRUE(fails_with([&] { pallas::softmax_cross_entropy_grad(x, labels, zeros(Shape({10}))); },
                         {"pallas::softmax_cross_entropy_grad: g is f32[10]; expected f32[11]"}));
  EXPECT_TRUE(fails_with([&] { pallas::softmax_cross_entropy_grad(x, bad, zeros(Shape({11}))); },
                         {"softmax_cross_entropy_grad: the label of row 2 is 24"}));
}

TEST(PallasKernels, FlashAttentionIsTheSoftmaxOfItsScoresWithoutTheMatrix) {
  Array q = random::normal(random::key(4), {2, 21, 8});
  Array k = random::normal(random::key(5), {2, 21, 8});
  Array v = random::normal(random::key(6), {2, 21, 8});
  for (bool causal : {false, true}) {
    Array got = flash_attention(q, k, v, causal, AttentionBlocks{8, 4});
    Array want = plain_attention(q, k, v, causal);
    std::vector<double> g = values(got), w = values(want);
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5) << i;
  }
  EXPECT_TRUE(
      fails_with([&] { flash_attention(q, k, v.astype(DType::bf16), false); },
                 {"pallas::flash_attention: q f32[2,21,8], k f32[2,21,8], v bf16[2,21,8]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        flash_attention(q, k, v, false, AttentionBlocks{0, 4});
      },
      {"blocks 0 x 4 must be positive"}));
  // The backward pass: the gradients of sum(attention * d_out), as kiln's autodiff has them.
  Array d_out = random::normal(random::key(7), {2, 21, 8});
  for (bool causal : {false, true}) {
    AttentionGrads grads = flash_attention_grad(q, k, v, d_out, causal, AttentionBlocks{8, 4});
    auto objective = [&](const Array& qq, const Array& kk, const Array& vv) {
      return sum(plain_attention(qq, kk, vv, causal) * d_out);
    };
    std::vector<std::pair<Array, Array>> pairs = {
        {grads.dq, grad([&](const Array& x) { return objective(x, k, v); })(q)},
        {grads.dk, grad([&](const Array& x) { return objective(q, x, v); })(k)},
        {grads.dv, grad([&](const Array& x) { return objective(q, k, x); })(v)}};
    for (const auto& [got_grad, want_grad] : pairs) {
      std::vector<double> g = values(got_grad), w = values(want_grad);
      for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5) << i;
    }
  }
  EXPECT_TRUE(fails_with(
      [&] {
        flash_attention_grad(q, k, v, zeros(Shape({2, 21, 4})), false);
      },
      {"pallas::flash_attention_grad: d_out is f32[2,21,4]; expected "
       "f32[2,21,8]"}));
}

}  // namespace
}  // namespace kiln::pallas
