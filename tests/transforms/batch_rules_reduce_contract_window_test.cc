// Hand-written tests of the batching rules (src/transforms/batch_rules/), beside the
// op_table's generic "vmap equals a loop" column: batch axes that are not leading,
// unbatched operands, size-1 and empty batches, negative axes, the axis each rule leaves
// the batch on, and vmap of grad (per-example gradients) against a loop of grads. One
// test suite per family of primitives; this file: reductions, contractions and windows
// (batch_rules_shape_index_sort_test.cc holds layout, indexing and sort).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "prims/bind.h"
#include "prims/ids/window.h"
#include "support/text.h"
#include "transforms/batch_test_support.h"

// ----- reductions, contractions and windows ------------------------------------------------

namespace kiln::batch_rules_reduce_contract_window {
namespace {

using ::kiln::batch_test::example_of;
using ::kiln::batch_test::Fn;
using ::kiln::batch_test::values;
using ::kiln::batch_test::vmapped;
using ::kiln::testing::count_of;

using ::testing::HasSubstr;
using ::testing::Not;

// f applied example by example (operands with no axis are shared), stacked on axis 0.
Array loop(const Fn& f, const std::vector<Array>& xs, const std::vector<AxisSpec>& axes) {
  int64_t n = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (axes[i]) n = xs[i].dim(*axes[i]);
  }
  std::vector<Array> results;
  for (int64_t b = 0; b < n; ++b) {
    std::vector<Array> one;
    for (size_t i = 0; i < xs.size(); ++i)
      one.push_back(axes[i] ? example_of(xs[i], *axes[i], b) : xs[i]);
    results.push_back(f(one));
  }
  return stack(results, 0);
}

void expect_close(const Array& got, const Array& want, double tolerance = 1e-12) {
  ASSERT_EQ(got.aval().to_string(), want.aval().to_string());
  std::vector<double> g = astype(got, DType::f64).to_vector<double>();
  std::vector<double> w = astype(want, DType::f64).to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_NEAR(g[i], w[i], tolerance * (1 + std::abs(w[i]))) << "element " << i;
  }
}

// vmap(f) equals the loop over examples, for the given operand axes.
void expect_matches_loop(const Fn& f, const std::vector<Array>& xs,
                         const std::vector<AxisSpec>& axes, double tolerance = 1e-12) {
  SCOPED_TRACE(::testing::Message() << "in_axes[0] = " << (axes[0] ? *axes[0] : -1));
  expect_close(vmapped(f, xs, axes), loop(f, xs, axes), tolerance);
}

// x with a new axis of size `n` at `axis` (examples differ: a fresh array, not a broadcast).
Array batch_at(Shape example, int64_t n, int64_t axis, double seed = 0) {
  Dims sizes = example.dims();
  sizes.insert_at(static_cast<size_t>(axis), n);
  return values(Shape(sizes), DType::f64, seed);
}

// ----- reductions ------------------------------------------------------------------------

TEST(BatchReduce, NegativeAxesWithTheBatchInTheMiddle) {
  Array x = batch_at(Shape{3, 5}, 4, 1);  // [3, B, 5]
  expect_matches_loop([](auto in) { return sum(in[0], {-1}); }, {x}, {1});
  expect_matches_loop([](auto in) { return max(in[0], {0, -1}, true); }, {x}, {1});
  expect_matches_loop([](auto in) { return min(in[0], {-2}); }, {x}, {1});
  expect_matches_loop([](auto in) { return prod(in[0], {1}); }, {x}, {1});
  expect_matches_loop([](auto in) { return mean(in[0]); }, {x}, {1});
}

TEST(BatchReduce, ArgReductionsWithTheBatchLastAndFirst) {
  Array x = batch_at(Shape{5, 3}, 4, 2);  // [5, 3, B]
  expect_matches_loop([](auto in) { return argmax(in[0], -1); }, {x}, {2}, 0);
  expect_matches_loop([](auto in) { return argmin(in[0], 0, DType::i64); }, {x}, {2}, 0);
  Array first = batch_at(Shape{5, 3}, 4, 0);
  expect_matches_loop([](auto in) { return argmax(in[0], 1); }, {first}, {0}, 0);
  expect_matches_loop([](auto in) { return argmin(in[0], -2); }, {first}, {0}, 0);
}

TEST(BatchReduce, CumsumAlongTheAxesNextToTheBatch) {
  for (int64_t dim : {0, 1, 2}) {
    Array x = batch_at(Shape{4, 3}, 2, dim);
    expect_matches_loop([](auto in) { return cumsum(in[0], 0); }, {x}, {dim});
    expect_matches_loop([](auto in) { return cumsum(in[0], -1, true); }, {x}, {dim});
  }
}

TEST(BatchReduce, SizeOneAndEmptyBatches) {
  Array one = batch_at(Shape{3, 2}, 1, 1);
  expect_matches_loop([](auto in) { return sum(in[0], {0}); }, {one}, {1});
  expect_matches_loop([](auto in) { return argmax(in[0], 0); }, {one}, {1}, 0);
  Array empty = batch_at(Shape{3, 2}, 0, 1);  // [3, 0, 2]
  auto f = [](const Array& x) { return max(x, {1}); };
  EXPECT_EQ(vmap(f, {1})(empty).aval().to_string(), "f64[0,3]");
  EXPECT_EQ(vmap([](const Array& x) { return argmin(x, 0); }, {1})(empty).aval().to_string(),
            "i32[0,2]");
  EXPECT_EQ(vmap([](const Array& x) { return cumsum(x, 1); }, {1})(empty).aval().to_string(),
            "f64[0,3,2]");
}

TEST(BatchReduce, TheBatchStaysWhereTheReductionLeavesIt) {
  // Example [2, 3] summed over axis 0 with the batch on axis 2: the result is [3, B], so
  // asking for the batch on axis 1 needs no transpose anywhere.
  auto f = [](const Array& x) { return sum(x, {0}); };
  std::string text = make_program(vmap(f, {2}, {1}), batch_at(Shape{2, 3}, 4, 2)).to_string();
  EXPECT_EQ(count_of(text, "reduce_sum"), 1) << text;
  EXPECT_THAT(text, Not(HasSubstr("transpose"))) << text;
}

TEST(BatchReduce, PerExampleGradientsMatchALoopOfGradients) {
  auto loss = [](const Array& x) {
    Array rows = max(x, {1});            // [3]
    Array cols = prod(x, {0});           // [4]
    Array running = cumsum(x, 1, true);  // [3, 4]
    return sum(rows * rows) + sum(cols) + sum(running * x) + min(x);
  };
  for (int64_t dim : {0, 1}) {
    Array x = batch_at(Shape{3, 4}, 2, dim, 0.3);
    expect_matches_loop([&](auto in) { return grad(loss)(in[0]); }, {x}, {dim});
  }
}

// ----- contractions ----------------------------------------------------------------------

TEST(BatchContract, DotGeneralWithBothOperandsBatchedAnywhere) {
  auto mm = [](auto in) { return matmul(in[0], in[1]); };
  expect_matches_loop(mm, {batch_at(Shape{2, 3}, 4, 1), batch_at(Shape{3, 5}, 4, 2, 1)}, {1, 2});
  expect_matches_loop(mm, {batch_at(Shape{2, 3}, 4, 0), batch_at(Shape{3, 5}, 4, 0, 1)}, {0, 0});
  // Examples that are batched matmuls themselves, contracting over two axes.
  auto dg = [](auto in) { return dot_general(in[0], in[1], {1, 3}, {3, 1}, {0}, {2}); };
  Array a = batch_at(Shape{2, 3, 4, 5}, 3, 2);     // example [2, 3, 4, 5]
  Array b = batch_at(Shape{6, 5, 2, 3}, 3, 4, 1);  // example [6, 5, 2, 3]
  expect_matches_loop(dg, {a, b}, {2, 4});
}

TEST(BatchContract, DotGeneralWithOneOperandBatched) {
  auto dg = [](auto in) { return dot_general(in[0], in[1], {2}, {1}, {0}, {0}); };
  Array a = batch_at(Shape{2, 3, 4}, 3, 1), b = values(Shape{2, 4, 5}, DType::f64, 2);
  expect_matches_loop(dg, {a, b}, {1, kNotMapped});
  Array a0 = values(Shape{2, 3, 4}), b0 = batch_at(Shape{2, 4, 5}, 3, 3, 2);
  expect_matches_loop(dg, {a0, b0}, {kNotMapped, 3});
  expect_matches_loop(dg, {a0, batch_at(Shape{2, 4, 5}, 3, 1, 2)}, {kNotMapped, 1});
}

TEST(BatchContract, OneBatchedOperandIsAFreeAxisLeftInPlace) {
  // matmul([2, 3], [3, 5]) with the rhs batched on axis 2: the rhs's free axes are (5, B),
  // so the result [2, 5, B] carries the batch on axis 2: one dot_general, no transpose and
  // no broadcast of the shared lhs.
  auto f = [](const Array& a, const Array& b) { return matmul(a, b); };
  Array a = values(Shape{2, 3}), b = batch_at(Shape{3, 5}, 4, 2);
  std::string text = make_program(vmap(f, {kNotMapped, 2}, {2}), a, b).to_string();
  EXPECT_EQ(count_of(text, "dot_general"), 1) << text;
  EXPECT_THAT(text, Not(HasSubstr("transpose"))) << text;
  EXPECT_THAT(text, Not(HasSubstr("broadcast_in_dim"))) << text;
  // The lhs batched on axis 0: lhs free axes (B, 2), so the result is [B, 2, 5].
  std::string lhs_text =
      make_program(vmap(f, {0, kNotMapped}, {0}), batch_at(Shape{2, 3}, 4, 0), values(Shape{3, 5}))
          .to_string();
  EXPECT_THAT(lhs_text, Not(HasSubstr("transpose"))) << lhs_text;
}

TEST(BatchContract, DotGeneralKeepsThePreferredElementType) {
  // f16 operands accumulated into an f32 result, and u8 operands into i32.
  auto to_f32 = [](auto in) { return dot_general(in[0], in[1], {1}, {0}, {}, {}, DType::f32); };
  Array a = astype(batch_at(Shape{2, 3}, 3, 0), DType::f16);
  Array b = astype(batch_at(Shape{3, 2}, 3, 2, 1), DType::f16);
  EXPECT_EQ(vmapped(to_f32, {a, b}, {0, 2}).dtype(), DType::f32);
  expect_matches_loop(to_f32, {a, b}, {0, 2}, 1e-6);
  expect_matches_loop(to_f32, {a, values(Shape{3, 2}, DType::f16)}, {0, kNotMapped}, 1e-6);
  auto to_i32 = [](auto in) { return dot_general(in[0], in[1], {0}, {1}, {}, {}, DType::i32); };
  Array c = astype(abs(batch_at(Shape{3, 2}, 3, 1)) * 80, DType::u8);
  Array d = astype(abs(batch_at(Shape{4, 3}, 3, 0, 1)) * 80, DType::u8);
  EXPECT_EQ(vmapped(to_i32, {c, d}, {1, 0}).dtype(), DType::i32);
  expect_matches_loop(to_i32, {c, d}, {1, 0}, 0);
  expect_matches_loop(to_i32, {c, d}, {kNotMapped, 0}, 0);
}

TEST(BatchContract, DotGeneralSizeOneAndEmptyBatches) {
  auto mm = [](auto in) { return matmul(in[0], in[1]); };
  expect_matches_loop(mm, {batch_at(Shape{2, 3}, 1, 1), batch_at(Shape{3, 5}, 1, 0)}, {1, 0});
  auto f = [](const Array& a, const Array& b) { return matmul(a, b); };
  EXPECT_EQ(
      vmap(f, {1, 0})(batch_at(Shape{2, 3}, 0, 1), batch_at(Shape{3, 5}, 0, 0)).aval().to_string(),
      "f64[0,2,5]");
  EXPECT_EQ(
      vmap(f, {kNotMapped, 1})(values(Shape{2, 3}), batch_at(Shape{3, 5}, 0, 1)).aval().to_string(),
      "f64[0,2,5]");
}

// A strided, padded, dilated grouped convolution of one example: x [1, 6, 5, 4], w [3, 2, 2, 6].
Array conv_example(const Array& x, const Array& w) {
  return conv_general_dilated(x, w, {2, 1}, {1, 0}, {2, 1}, {1, 1}, {1, 2}, 2);
}

// A transposed (input-dilated) convolution with one group: x [2, 3, 3, 2], w [2, 2, 2, 3].
Array transposed_conv_example(const Array& x, const Array& w) {
  return conv_general_dilated(x, w, {1, 1}, {1, 1}, {0, 1}, {2, 2}, {1, 1}, 1);
}

TEST(BatchContract, ConvWithABatchedInput) {
  auto f = [](auto in) { return conv_example(in[0], in[1]); };
  Array w = values(Shape{3, 2, 2, 6}, DType::f64, 1);
  for (int64_t dim : {0, 1, 2, 4}) {
    expect_matches_loop(f, {batch_at(Shape{1, 6, 5, 4}, 3, dim), w}, {dim, kNotMapped});
  }
  auto g = [](auto in) { return transposed_conv_example(in[0], in[1]); };
  expect_matches_loop(g, {batch_at(Shape{2, 3, 3, 2}, 2, 1), values(Shape{2, 2, 2, 3})},
                      {1, kNotMapped});
}

TEST(BatchContract, ConvWithABatchedKernel) {
  auto f = [](auto in) { return conv_example(in[0], in[1]); };
  Array x = values(Shape{2, 6, 5, 4});
  for (int64_t dim : {0, 3, 4}) {
    expect_matches_loop(f, {x, batch_at(Shape{3, 2, 2, 6}, 3, dim, 1)}, {kNotMapped, dim});
  }
  auto g = [](auto in) { return transposed_conv_example(in[0], in[1]); };
  for (int64_t dim : {0, 3}) {
    expect_matches_loop(g, {values(Shape{2, 3, 3, 2}), batch_at(Shape{2, 2, 2, 3}, 2, dim, 1)},
                        {kNotMapped, dim});
  }
}

TEST(BatchContract, ConvWithBothBatched) {
  auto f = [](auto in) { return conv_example(in[0], in[1]); };
  expect_matches_loop(f, {batch_at(Shape{2, 6, 5, 4}, 3, 2), batch_at(Shape{3, 2, 2, 6}, 3, 4, 1)},
                      {2, 4});
  expect_matches_loop(f, {batch_at(Shape{2, 6, 5, 4}, 3, 0), batch_at(Shape{3, 2, 2, 6}, 3, 0, 1)},
                      {0, 0});
  auto g = [](auto in) { return transposed_conv_example(in[0], in[1]); };
  expect_matches_loop(g, {batch_at(Shape{2, 3, 3, 2}, 2, 4), batch_at(Shape{2, 2, 2, 3}, 2, 1, 1)},
                      {4, 1});
}

TEST(BatchContract, ConvSizeOneAndEmptyBatches) {
  auto f = [](auto in) { return conv_example(in[0], in[1]); };
  Array x1 = batch_at(Shape{2, 6, 5, 4}, 1, 1), w1 = batch_at(Shape{3, 2, 2, 6}, 1, 0, 1);
  expect_matches_loop(f, {x1, w1}, {1, 0});
  expect_matches_loop(f, {x1, values(Shape{3, 2, 2, 6})}, {1, kNotMapped});
  expect_matches_loop(f, {values(Shape{2, 6, 5, 4}), w1}, {kNotMapped, 0});
  auto conv = [](const Array& x, const Array& w) { return conv_example(x, w); };
  Array x0 = batch_at(Shape{2, 6, 5, 4}, 0, 0), w0 = batch_at(Shape{3, 2, 2, 6}, 0, 0);
  EXPECT_EQ(vmap(conv, {0, 0})(x0, w0).aval().to_string(), "f64[0,2,4,4,6]");
  EXPECT_EQ(vmap(conv, {0, kNotMapped})(x0, values(Shape{3, 2, 2, 6})).aval().to_string(),
            "f64[0,2,4,4,6]");
  EXPECT_EQ(vmap(conv, {kNotMapped, 0})(values(Shape{2, 6, 5, 4}), w0).aval().to_string(),
            "f64[0,2,4,4,6]");
}

TEST(BatchContract, PerExampleGradientsMatchALoopOfGradients) {
  // Per-example gradients of a small conv + dense model: shared weights (the kernel gets
  // a batched cotangent, so the batched-kernel and batched-input paths both run) and
  // per-example weights (both operands batched).
  auto loss = [](const Array& w, const Array& v, const Array& x) {
    Array h = tanh(conv_example(x, w));             // [2, 4, 4, 6]
    Array flat = reshape(h, Shape{2, 96});          // [2, 96]
    return sum(matmul(flat, v) * matmul(flat, v));  // v: [96, 2]
  };
  Array w = values(Shape{3, 2, 2, 6}, DType::f64, 1), v = values(Shape{96, 2}, DType::f64, 2);
  Array xs = batch_at(Shape{2, 6, 5, 4}, 3, 0, 3);
  auto dw = [&](auto in) { return grad<0>(loss)(in[0], v, in[1]); };
  auto dv = [&](auto in) { return grad<1>(loss)(w, in[0], in[1]); };
  expect_matches_loop(dw, {w, xs}, {kNotMapped, 0}, 1e-10);
  expect_matches_loop(dv, {v, xs}, {kNotMapped, 0}, 1e-10);
  // Per-example weights too (ensembles): both operands of every conv and dot are batched.
  Array ws = batch_at(Shape{3, 2, 2, 6}, 3, 3, 1);
  expect_matches_loop(dw, {ws, xs}, {3, 0}, 1e-10);
  auto dx = [&](auto in) { return grad<2>(loss)(in[0], v, in[1]); };
  expect_matches_loop(dx, {ws, xs}, {3, 0}, 1e-10);
  expect_matches_loop(dx, {w, xs}, {kNotMapped, 0}, 1e-10);
}

// ----- windows ---------------------------------------------------------------------------

TEST(BatchWindow, PoolingWithTheBatchOnAnyAxis) {
  auto mp = [](auto in) { return max_pool(in[0], {2, 2}, {2, 1}, Padding::kSame); };
  auto ap = [](auto in) { return avg_pool(in[0], {3, 2}, {1, 2}, Padding::kValid); };
  for (int64_t dim : {0, 1, 2, 4}) {
    Array x = batch_at(Shape{2, 5, 6, 3}, 3, dim);
    expect_matches_loop(mp, {x}, {dim});
    expect_matches_loop(ap, {x}, {dim});
  }
}

TEST(BatchWindow, PrimitiveWithNegativePaddingAndTheBatchLast) {
  auto rw = [](auto in) {
    return bind1(prim::reduce_window_sum, {in[0]},
                 ReduceWindowParams{{2, 3}, {1, 2}, {-1, 1}, {1, 0}}, CallSite());
  };
  auto rm = [](auto in) {
    return bind1(prim::reduce_window_max, {in[0]},
                 ReduceWindowParams{{2, 3}, {2, 1}, {0, 1}, {1, -1}}, CallSite());
  };
  for (int64_t dim : {0, 1, 2}) {
    Array x = batch_at(Shape{5, 6}, 3, dim);
    expect_matches_loop(rw, {x}, {dim});
    expect_matches_loop(rm, {x}, {dim});
  }
  // The batch stays on its axis: no transpose when the result is asked for there.
  auto f = [&](const Array& x) { return rw(std::vector<Array>{x}); };
  std::string text = make_program(vmap(f, {2}, {2}), batch_at(Shape{5, 6}, 3, 2)).to_string();
  EXPECT_THAT(text, Not(HasSubstr("transpose"))) << text;
}

TEST(BatchWindow, SizeOneAndEmptyBatches) {
  auto mp = [](auto in) { return max_pool(in[0], {2, 2}, {2, 2}, Padding::kSame); };
  expect_matches_loop(mp, {batch_at(Shape{1, 4, 3, 2}, 1, 3)}, {3});
  auto f = [](const Array& x) { return avg_pool(x, {2, 2}, {1, 1}); };
  EXPECT_EQ(vmap(f, {2})(batch_at(Shape{1, 4, 3, 2}, 0, 2)).aval().to_string(), "f64[0,1,3,2,2]");
}

TEST(BatchWindow, PerExampleGradientsMatchALoopOfGradients) {
  auto loss = [](const Array& x) {
    Array m = max_pool(x, {2, 2}, {1, 2}, Padding::kSame);
    Array a = avg_pool(x, {2, 3}, {2, 1}, Padding::kValid);
    return sum(m * m) + sum(a * a * a);
  };
  for (int64_t dim : {0, 3}) {
    Array x = batch_at(Shape{2, 4, 5, 2}, 3, dim, 0.5);
    expect_matches_loop([&](auto in) { return grad(loss)(in[0]); }, {x}, {dim}, 1e-12);
  }
}

}  // namespace
}  // namespace kiln::batch_rules_reduce_contract_window
