// pallas::call's compiled mode (src/pallas/compiled_kernel.cc) against interpret mode: every
// shipped kernel gives the interpreter's bits; the body is traced once per variant (and a
// jitted call's variants once for good); ragged blocks, output blocks revisited along the
// in-order axis and scratch behave as documented; what a compiled body cannot do is refused
// by name, and an error raised while the program runs names the grid point.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "kiln/random.h"
#include "kiln/vmap.h"
#include "pallas/kernel_call.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::pallas {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;

Array normal(uint64_t seed, Shape shape, DType dtype = DType::f32) {
  return astype(random::normal(random::key(seed), std::move(shape)), dtype);
}

// `f` run in interpret mode and compiled: the results, in that order.
std::pair<std::vector<Array>, std::vector<Array>> both_modes(
    const std::function<std::vector<Array>()>& f) {
  std::vector<Array> interpreted, compiled;
  {
    detail::ForcedMode mode(true);
    interpreted = f();
  }
  {
    detail::ForcedMode mode(false);
    compiled = f();
  }
  return {interpreted, compiled};
}

void expect_same_bits(const std::function<std::vector<Array>()>& f, const std::string& what) {
  auto [interpreted, compiled] = both_modes(f);
  ASSERT_EQ(interpreted.size(), compiled.size()) << what;
  for (size_t i = 0; i < interpreted.size(); ++i) {
    EXPECT_TRUE(same_bits(compiled[i], interpreted[i])) << what << ", result " << i;
  }
}

TEST(PallasCompiled, EveryShippedKernelGivesTheInterpretersBits) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    const std::string type(dtype_name(dtype));
    // Tiles that do not divide the arrays: ragged blocks along every axis.
    Array a = normal(1, {37, 29}, dtype), b = normal(2, {29, 53}, dtype);
    expect_same_bits([&] { return std::vector{matmul(a, b, {16, 16, 16})}; }, "matmul " + type);
    Array x = normal(3, {33, 100}, dtype);
    expect_same_bits([&] { return std::vector{softmax(x * 30.0, 8)}; }, "softmax " + type);
    Array scale = normal(4, {100}, dtype), bias = normal(5, {100}, dtype);
    expect_same_bits([&] { return std::vector{layer_norm(x, scale, bias, 1e-5, 8)}; },
                     "layer_norm " + type);
    Array labels = random::randint(random::key(6), Shape({33}), 0, 100);
    Array g = normal(7, {33});
    expect_same_bits(
        [&] {
          return std::vector{softmax_cross_entropy(x, labels, 8),
                             softmax_cross_entropy_grad(x, labels, g, 8)};
        },
        "softmax_cross_entropy " + type);
    Array q = normal(8, {2, 37, 16}, dtype), k = normal(9, {2, 37, 16}, dtype),
          v = normal(10, {2, 37, 16}, dtype), d_out = normal(11, {2, 37, 16}, dtype);
    for (bool causal : {false, true}) {
      expect_same_bits(
          [&] {
            AttentionGrads grads = flash_attention_grad(q, k, v, d_out, causal, {16, 8});
            return std::vector{flash_attention(q, k, v, causal, {16, 8}), grads.dq, grads.dk,
                               grads.dv};
          },
          "flash attention " + type + (causal ? ", causal" : ""));
    }
  }
}

// C = A @ B over a (2, 2, 3) grid, K last: the body branches on program_id(2) only, so its
// points make three variants (k = 0, 1, 2), whatever their row and column blocks.
struct CountedMatmul {
  int traces = 0;
  KernelBody body() {
    return [this](const Kernel& k) {
      ++traces;
      if (k.program_id(2) == 0) k.out(0).store(zeros(Shape({4, 4})));
      k.out(0).store(k.out(0).load() + kiln::matmul(k.in(0).load(), k.in(1).load()));
    };
  }
  Array operator()(const Array& a, const Array& b) {
    return call(body(), {AbstractValue(Shape({8, 8}), DType::f32)}, {2, 2, 3},
                {BlockSpec({4, 4},
                           [](const Index& g) {
                             return Index{g[0], g[2]};
                           }),
                 BlockSpec({4, 4},
                           [](const Index& g) {
                             return Index{g[2], g[1]};
                           })},
                {BlockSpec({4, 4},
                           [](const Index& g) {
                             return Index{g[0], g[1]};
                           })},
                {a, b}, {.name = "counted_matmul"})[0];
  }
};

TEST(PallasCompiled, TheBodyIsTracedOncePerVariantAndAJittedCallKeepsItsVariants) {
  Array a = normal(12, {8, 12}), b = normal(13, {12, 8});
  CountedMatmul eager;
  Array c = eager(a, b);
  EXPECT_EQ(eager.traces, 3);  // 12 points, 3 variants
  EXPECT_LT(max(abs(c - kiln::matmul(a, b))).item<double>(), 1e-5);
  (void)eager(a, b);
  EXPECT_EQ(eager.traces, 6);  // an eager call traces its variants for itself

  CountedMatmul traced;
  auto jitted = jit([&traced](const Array& x, const Array& y) { return traced(x, y); });
  Array first = jitted(a, b);
  // Tracing the jitted function checks the call without running the body; its first run
  // traces the 3 variants.
  const int after_first = traced.traces;
  EXPECT_EQ(after_first, 3);
  EXPECT_TRUE(same_bits(jitted(a, b), first));
  EXPECT_TRUE(same_bits(first, c));
  EXPECT_EQ(traced.traces, after_first);  // the variants are kept with the kernel
}

TEST(PallasCompiled, AJittedProgramRunsTheKernelAsOneOfItsCompiledSteps) {
  // Compiled mode: the program around the kernel is planned and fused like any other (the
  // kernel a step of it); in interpret mode it runs equation by equation.
  Array x = normal(18, {33, 100});
  auto f = [](const Array& z) { return softmax(z * 2.0 + 1.0, 8) * 3.0; };
  auto compiled = jit(f);
  Compiled plan = compiled.compile(x);
  EXPECT_GT(plan.memory_plan().num_buffers, 0);
  EXPECT_NE(plan.steps_text().find("pallas_call"), std::string::npos) << plan.steps_text();
  detail::ForcedMode interpret(true);
  auto interpreted = jit(f);
  EXPECT_EQ(interpreted.compile(x).memory_plan().num_buffers, 0);
  EXPECT_TRUE(same_bits(interpreted(x), compiled(x)));
}

TEST(PallasCompiled, RaggedBlocksReadTheirFillWhateverTheBufferHeld) {
  // Rows in blocks of 4 over 10 rows: the last block has 2 rows inside. Output 1 keeps each
  // point's whole block, so the fill of the ragged one shows.
  Array x = astype(reshape(arange(30), {10, 3}), DType::f32);
  auto body = [](const Kernel& k) {
    Array block = k.in(0).load(/*fill=*/-1);
    k.out(0).store(block * 2.0);
    // Reading the output block back after a store: inside, what was stored; past the edge,
    // the fill, not what the store put there.
    k.out(1).store(reshape(k.out(0).load(/*fill=*/7), {1, 4, 3}));
  };
  auto run = [&] {
    return call(body, {x.aval(), AbstractValue(Shape({3, 4, 3}), DType::f32)}, {3},
                {BlockSpec({4, -1},
                           [](const Index& g) {
                             return Index{g[0], 0};
                           })},
                {BlockSpec({4, -1},
                           [](const Index& g) {
                             return Index{g[0], 0};
                           }),
                 BlockSpec({1, 4, -1},
                           [](const Index& g) {
                             return Index{g[0], 0, 0};
                           })},
                {x});
  };
  expect_same_bits(run, "ragged rows");
  std::vector<Array> out = run();
  EXPECT_TRUE(same_bits(out[0], x * 2.0));
  std::vector<float> last = slice(out[1], {2, 0, 0}, {3, 4, 3}).to_vector<float>();
  EXPECT_EQ(last, (std::vector<float>{48, 50, 52, 54, 56, 58, 7, 7, 7, 7, 7, 7}));
}

TEST(PallasCompiled, ScratchStartsAsZerosAtEachPointOfTheParallelAxes) {
  // Row sums of an 6 x 8 array in 2 x 4 blocks: grid (row blocks, column blocks), the column
  // axis in order. The body never clears its scratch: each row block still starts from zero.
  Array x = normal(14, {6, 8});
  auto body = [](const Kernel& k) {
    k.scratch(0).store(k.scratch(0).load() + sum(k.in(0).load(), {1}, true));
    if (k.program_id(1) == k.num_programs(1) - 1) k.out(0).store(k.scratch(0).load());
  };
  Array sums =
      call(body, {AbstractValue(Shape({6, 1}), DType::f32)}, {3, 2},
           {BlockSpec({2, 4},
                      [](const Index& g) {
                        return Index{g[0], g[1]};
                      })},
           {BlockSpec({2, 1},
                      [](const Index& g) {
                        return Index{g[0], 0};
                      })},
           {x}, {.name = "row_sums", .scratch = {AbstractValue(Shape({2, 1}), DType::f32)}})[0];
  Array expected =
      sum(slice(x, {0, 0}, {6, 4}), {1}, true) + sum(slice(x, {0, 4}, {6, 8}), {1}, true);
  EXPECT_TRUE(same_bits(sums, expected));
}

TEST(PallasCompiled, VmapAndJitRunTheCompiledKernel) {
  Array batch = normal(15, {3, 9, 16});
  auto softmax_rows = [](const Array& x) { return softmax(x, 4); };
  Array each = vmap(softmax_rows)(batch);
  Array flat = softmax(reshape(batch, {27, 16}), 4);
  EXPECT_TRUE(same_bits(each, reshape(flat, {3, 9, 16})));
  EXPECT_TRUE(same_bits(jit(vmap(softmax_rows))(batch), each));
}

TEST(PallasCompiled, WhatACompiledBodyCannotDoIsRefusedByName) {
  Array x = normal(16, {8, 4});
  BlockSpec rows({4, -1}, [](const Index& g) { return Index{g[0], 0}; });
  auto reads_on_host = [](const Kernel& k) {
    Array block = k.in(0).load();
    if (block.to_vector<float>()[0] > 0) k.out(0).store(block);
  };
  EXPECT_TRUE(fails_with([&] { call(reads_on_host, {x.aval()}, {2}, {rows}, {rows}, {x}); },
                         {"pallas kernel 'kernel' at grid point (0)", "is a traced value",
                          "set CallOptions::interpret"}));
  auto stores_input = [](const Kernel& k) { k.in(0).store(k.in(0).load() * 2.0); };
  EXPECT_TRUE(fails_with([&] { call(stores_input, {x.aval()}, {2}, {rows}, {rows}, {x}); },
                         {"input 0 is stored into; a compiled kernel's inputs are read-only"}));
  // Interpret mode runs the first body as it is written.
  Array copied = call(reads_on_host, {x.aval()}, {2}, {rows}, {rows}, {x}, {.interpret = true})[0];
  EXPECT_EQ(copied.shape(), x.shape());
}

TEST(PallasCompiled, AnErrorWhileTheProgramRunsNamesTheKernelAndThePoint) {
  Array table = normal(17, {5, 3});
  Array indices = from_host<int32_t>({0, 1, 2, 3, 4, 5}, Shape({6}));
  auto gather_rows = [&table](const Kernel& k) { k.out(0).store(take(table, k.in(0).load(), 0)); };
  EXPECT_TRUE(fails_with(
      [&] {
        call(gather_rows, {AbstractValue(Shape({6, 3}), DType::f32)}, {3},
             {BlockSpec({2}, [](const Index& g) { return Index{g[0]}; })},
             {BlockSpec({2, -1},
                        [](const Index& g) {
                          return Index{g[0], 0};
                        })},
             {indices}, {.name = "gather_rows"});
      },
      {"pallas kernel 'gather_rows' at grid point (2)", "index 5"}));
}

}  // namespace
}  // namespace kiln::pallas
