// A kernel as a primitive of programs (kiln/pallas.h): pallas_call under jit with eager's
// bits, in program text and parsed back, under vmap as one more grid axis the body does not
// see (squeezed block dimensions), differentiated through the custom_vjp its author gives
// (flash attention's), costed by its estimate, and refused by name where it cannot go.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/program.h"
#include "kiln/cost.h"
#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "kiln/random.h"
#include "kiln/tracing.h"
#include "kiln/vmap.h"
#include "pallas/kernel_call.h"
#include "pallas/plain_attention.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "transforms/eval.h"

namespace kiln::pallas {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;

BlockSpec pairs_of_rows() {
  return BlockSpec({2, -1}, [](const Index& g) { return Index{g[0], 0}; });
}

// Adds 100 x program_id(0) to each block of rows: a kernel whose result depends on which
// grid point ran it, so a batch axis that shifted the body's axes would show.
Array add_block_numbers(const Array& x) {
  auto body = [](const Kernel& k) {
    k.out(0).store(k.in(0).load() + 100.0 * static_cast<double>(k.program_id(0)));
  };
  return call(body, {x.aval()}, {cdiv(x.dim(0), 2)}, {pairs_of_rows()}, {pairs_of_rows()}, {x},
              {.name = "add_block_numbers", .semantics = {GridAxis::kParallel}})[0];
}

Array some_rows(uint64_t seed, int64_t rows, int64_t cols) {
  return random::normal(random::key(seed), {rows, cols});
}

// Example i of `xs` along `axis`.
Array example(const Array& xs, int64_t i, int64_t axis) {
  Dims start(static_cast<size_t>(xs.rank()), 0), limit = xs.shape().dims();
  start[static_cast<size_t>(axis)] = i;
  limit[static_cast<size_t>(axis)] = i + 1;
  return squeeze(slice(xs, start, limit), {axis});
}

void expect_close(const Array& got, const Array& want, double tolerance) {
  ASSERT_EQ(got.shape(), want.shape());
  HostArray g = astype(got, DType::f64).to_host(), w = astype(want, DType::f64).to_host();
  for (size_t i = 0; i < g.as<double>().size(); ++i) {
    EXPECT_NEAR(g.as<double>()[i], w.as<double>()[i], tolerance) << "element " << i;
  }
}

TEST(PallasPrimitive, JitRunsTheKernelsWithEagerBits) {
  Array x = some_rows(1, 10, 24), w = some_rows(2, 24, 9);
  Array scale = random::normal(random::key(3), {24}), bias = random::normal(random::key(4), {24});
  auto f = [&](const Array& a) {
    Array normed = pallas::layer_norm(a, scale, bias, 1e-5, 4);
    return pallas::softmax(pallas::matmul(normed, w, MatmulBlocks{4, 4, 8}), 3) * 2.0;
  };
  Array eager = f(x);
  EXPECT_TRUE(same_bits(jit(f)(x), eager));
  EXPECT_TRUE(same_bits(jit(f)(x * 1.0), eager));  // the compiled program again
}

TEST(PallasPrimitive, ProgramTextPrintsTheCallAndParsesBack) {
  Array x = some_rows(5, 7, 3);
  TracedProgram traced = make_program([](const Array& a) { return add_block_numbers(a) * 3.0; }, x);
  std::string text = print_program(*traced.program);
  EXPECT_THAT(text, ::testing::HasSubstr("pallas_call[name=\"add_block_numbers\" id="));
  Program parsed = parse_program(text);
  EXPECT_EQ(print_program(parsed), text);
  std::vector<Array> out = eval_program(parsed, std::vector<Array>{x}, CallSite());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(same_bits(out[0], add_block_numbers(x) * 3.0));
  // A kernel call names an id this process gave out; another's is refused by name.
  std::string foreign = text;
  size_t at = foreign.find("id=") + 3;
  foreign.replace(at, foreign.find(']', at) - at, "987654");
  EXPECT_TRUE(fails_with([&] { (void)parse_program(foreign); },
                         {"pallas_call id=987654 names no kernel call of this process"}));
}

TEST(PallasPrimitive, VmapRunsTheKernelOverALeadingGridAxisTheBodyDoesNotSee) {
  // Batched on axis 1, so the rule moves it to the front first.
  Array xs = random::normal(random::key(6), {5, 3, 4});
  Array batched = vmap([](const Array& x) { return add_block_numbers(x); }, {1})(xs);
  std::vector<Array> each;
  for (int64_t i = 0; i < 3; ++i) each.push_back(add_block_numbers(example(xs, i, 1)));
  EXPECT_TRUE(same_bits(batched, stack(each, 0)));
  // A reduction over the grid's last axis with scratch (the tiled matmul): each example's
  // scratch starts as zeros, and an unbatched operand is shared by every example.
  Array as = random::normal(random::key(7), {4, 9, 13}), b = some_rows(8, 13, 6);
  auto product = [&](const Array& a) { return pallas::matmul(a, b, MatmulBlocks{4, 4, 4}); };
  Array products = vmap(product)(as);
  std::vector<Array> one_by_one;
  for (int64_t i = 0; i < 4; ++i) one_by_one.push_back(product(example(as, i, 0)));
  EXPECT_TRUE(same_bits(products, stack(one_by_one, 0)));
  // vmap of vmap: two hidden axes; and under jit.
  Array grid = random::normal(random::key(9), {2, 3, 6, 5});
  auto twice = vmap(vmap([](const Array& x) { return pallas::softmax(x, 4); }));
  Array nested = twice(grid);
  Array flat = pallas::softmax(reshape(grid, {36, 5}), 4);
  EXPECT_TRUE(same_bits(nested, reshape(flat, {2, 3, 6, 5})));
  EXPECT_TRUE(same_bits(jit(twice)(grid), nested));
  // An empty batch runs no grid point.
  Array none = vmap([](const Array& x) { return add_block_numbers(x); })(zeros(Shape({0, 4, 2})));
  EXPECT_EQ(none.shape(), Shape({0, 4, 2}));
}

TEST(PallasPrimitive, SqueezedBlockDimensionsAreLeftOutOfTheBlockTheBodySees) {
  Array x = random::normal(random::key(10), {3, 4, 5});
  std::vector<Shape> seen;
  auto body = [&](const Kernel& k) {
    Array block = k.in(0).load();
    seen.push_back(block.shape());
    EXPECT_EQ(k.in(0).block_type().shape, Shape({2, 5}));
    EXPECT_EQ(k.in(0).valid_extent(), (Dims{2, 5}));
    k.out(0).store(block * 2.0);
  };
  BlockSpec spec({kSqueezed, 2, -1}, [](const Index& g) { return Index{g[0], g[1], 0}; });
  CallOptions options{.name = "double", .semantics = {GridAxis::kParallel, GridAxis::kParallel}};
  Array y = call(body, {x.aval()}, {3, 2}, {spec}, {spec}, {x}, options)[0];
  EXPECT_TRUE(same_bits(y, x * 2.0));
  // Compiled: the six points read their blocks alike, so one trace serves them all.
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], Shape({2, 5}));
  options.interpret = true;
  y = call(body, {x.aval()}, {3, 2}, {spec}, {spec}, {x}, options)[0];
  EXPECT_TRUE(same_bits(y, x * 2.0));
  EXPECT_EQ(seen.size(), 7u);
  auto wrong = [](const Kernel& k) { k.out(0).store(zeros(Shape({1, 2, 5}))); };
  EXPECT_TRUE(fails_with(
      [&] {
        call(wrong, {x.aval()}, {3, 2}, {spec}, {spec}, {x});
      },
      {"output 0 stores f32[1,2,5] into a block of shape [2,5]"}));
}

TEST(PallasPrimitive, GradFlowsThroughFlashAttentionsCustomVjp) {
  Array q = random::normal(random::key(11), {2, 9, 4});
  Array k = random::normal(random::key(12), {2, 9, 4});
  Array v = random::normal(random::key(13), {2, 9, 4});
  Array weights = random::normal(random::key(14), {2, 9, 4});
  for (bool causal : {false, true}) {
    auto plain = [&](const Array& qq, const Array& kk, const Array& vv) {
      return sum(plain_attention(qq, kk, vv, causal) * weights);
    };
    auto fused = [&](const Array& qq, const Array& kk, const Array& vv) {
      return sum(flash_attention(qq, kk, vv, causal, AttentionBlocks{4, 2}) * weights);
    };
    auto [want_q, want_k, want_v] = grad<0, 1, 2>(plain)(q, k, v);
    auto [got_q, got_k, got_v] = grad<0, 1, 2>(fused)(q, k, v);
    expect_close(got_q, want_q, 1e-5);
    expect_close(got_k, want_k, 1e-5);
    expect_close(got_v, want_v, 1e-5);
    auto [jit_q, jit_k, jit_v] = jit(grad<0, 1, 2>(fused))(q, k, v);
    EXPECT_TRUE(same_bits(jit_q, got_q) && same_bits(jit_k, got_k) && same_bits(jit_v, got_v));
    // And against finite differences (f32, so a step and tolerances to match).
    check_grads(fused, std::tuple{q, k, v}, {.eps = 1e-2, .rtol = 2e-2, .atol = 2e-2});
  }
}

TEST(PallasPrimitive, AKernelWithoutCustomVjpIsRefusedByGradWithTheWayOut) {
  Array x = some_rows(15, 4, 6);
  EXPECT_TRUE(
      fails_with([&] { (void)grad([](const Array& a) { return sum(pallas::softmax(a)); })(x); },
                 {"cannot differentiate through pallas_call: it is not differentiable",
                  "wrap the call in custom_vjp with its backward kernel"}));
}

TEST(PallasPrimitive, ATracedCallChecksItsLabelsWhenItRuns) {
  Array logits = some_rows(16, 5, 7);
  Array bad = from_host<int32_t>({1, 2, 7, 0, 3}, Shape({5}));
  auto loss = [](const Array& z, const Array& labels) {
    return pallas::softmax_cross_entropy(z, labels, 2);
  };
  // Compiled, the gather of the logits at the labels refuses it as the program runs.
  EXPECT_TRUE(fails_with([&] { (void)jit(loss)(logits, bad).block_until_ready(); },
                         {"pallas kernel 'softmax_cross_entropy' at grid point (1)",
                          "index 7 at indices[0,0] is out of range for axis 1 of size 7"}));
  {
    // Interpreted, the body reads the labels and names the row.
    detail::ForcedMode interpret(true);
    EXPECT_TRUE(fails_with([&] { (void)jit(loss)(logits, bad).block_until_ready(); },
                           {"the label of row 2 is 7, outside [0, 7)"}));
  }
  Array good = from_host<int32_t>({1, 2, 6, 0, 3}, Shape({5}));
  EXPECT_TRUE(same_bits(jit(loss)(logits, good), loss(logits, good)));
}

TEST(PallasPrimitive, CostAnalysisUsesTheKernelsEstimate) {
  Array a = some_rows(17, 16, 8), b = some_rows(18, 8, 12);
  CostReport report = cost_analysis(
      [](const Array& x, const Array& y) {
        return pallas::matmul(x, y, MatmulBlocks{8, 4, 4});
      },
      a, b);
  ASSERT_EQ(report.equations.size(), 1u);
  EXPECT_EQ(report.equations[0].primitive, "pallas_call");
  EXPECT_EQ(report.total.flops, 2.0 * 16 * 8 * 12);
  EXPECT_EQ(report.total.bytes_read, 4.0 * (16 * 8 + 8 * 12));
  EXPECT_EQ(report.total.bytes_written, 4.0 * 16 * 12);
  // Without an estimate: no FLOPs, the operands' and results' bytes.
  CostReport plain = cost_analysis([](const Array& x) { return add_block_numbers(x); }, a);
  EXPECT_EQ(plain.total.flops, 0.0);
  EXPECT_EQ(plain.total.bytes_read, 4.0 * 16 * 8);
}

}  // namespace
}  // namespace kiln::pallas
