// Hand-written tests of the batching rules (src/transforms/batch_rules/), beside the
// op_table's generic "vmap equals a loop" column: batch axes that are not leading,
// unbatched operands, size-1 and empty batches, negative axes, the axis each rule leaves
// the batch on, and vmap of grad (per-example gradients) against a loop of grads. One
// test suite per family of primitives; this file: layout, indexing and sort
// (batch_rules_reduce_contract_window_test.cc holds reductions, contractions and windows).
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
#include "prims/ids/index.h"
#include "prims/ids/shape.h"
#include "support/text.h"
#include "transforms/batch_test_support.h"

// ----- layout, indexing and sort -----------------------------------------------------------

namespace kiln::batch_rules_shape_index_sort {
namespace {

using ::kiln::batch_test::example_of;
using ::kiln::batch_test::Fn;
using ::kiln::batch_test::values;
using ::kiln::batch_test::vmapped;
using ::kiln::testing::count_of;

using ::testing::HasSubstr;
using ::testing::Not;

// Integers in [low, high) (indices, start positions), deterministic and varied.
Array integers(Shape shape, int64_t low, int64_t high, DType dtype = DType::i32, int64_t seed = 0) {
  std::vector<int64_t> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = low + static_cast<int64_t>((i * 7 + static_cast<size_t>(seed) * 3 + i * i) %
                                      static_cast<size_t>(high - low));
  }
  return astype(from_host(v, std::move(shape)), dtype);
}

// `example`-shaped data with a batch of `n` inserted at `axis` (kNotMapped: shared).
Array with_batch(const Array& example_like, int64_t n, AxisSpec axis) {
  if (!axis) return example_like;
  Dims sizes = example_like.shape().dims();
  sizes.insert_at(static_cast<size_t>(*axis), n);
  std::vector<Array> copies;
  for (int64_t b = 0; b < n; ++b) {
    // Example b: the shared data shifted, so examples differ (rolled for integers).
    Array shifted =
        is_floating(example_like.dtype())
            ? add(example_like, scalar(0.25 * static_cast<double>(b + 1), example_like.dtype()))
            : example_like;
    if (!is_floating(example_like.dtype()) && example_like.size() > 0 && b > 0) {
      Array flat = reshape(example_like, Shape{example_like.size()});
      int64_t k = b % example_like.size();
      shifted = reshape(concatenate({slice(flat, {k}, {flat.size()}), slice(flat, {0}, {k})}),
                        example_like.shape());
    }
    copies.push_back(shifted);
  }
  if (n == 0) return zeros(Shape(sizes), example_like.dtype());
  return stack(copies, *axis);
}

Array loop(const Fn& f, const std::vector<Array>& xs, const std::vector<AxisSpec>& axes,
           const Shape& example_out) {
  int64_t n = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (axes[i]) n = xs[i].dim(*axes[i]);
  }
  std::vector<Array> results;
  for (int64_t b = 0; b < n; ++b) {
    std::vector<Array> one;
    for (size_t i = 0; i < xs.size(); ++i) {
      one.push_back(axes[i] ? example_of(xs[i], *axes[i], b) : xs[i]);
    }
    results.push_back(f(one));
  }
  if (n == 0) {
    Dims sizes = example_out.dims();
    sizes.insert_at(0, 0);
    return zeros(Shape(sizes), DType::f64);
  }
  return stack(results, 0);
}

std::string axes_text(const std::vector<AxisSpec>& axes) {
  std::string text;
  for (const AxisSpec& axis : axes) text += axis ? std::to_string(*axis) + " " : "- ";
  return text;
}

// vmap(f) equals the loop over examples, exactly (these rules only move values).
void expect_matches_loop(const Fn& f, const std::vector<Array>& xs,
                         const std::vector<AxisSpec>& axes) {
  SCOPED_TRACE("in_axes " + axes_text(axes));
  Array got = vmapped(f, xs, axes);
  Shape example_out = got.shape();
  example_out.dims().erase_at(0);
  Array want = loop(f, xs, axes, example_out);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(astype(got, DType::f64).to_vector<double>(),
            astype(want, DType::f64).to_vector<double>());
}

// The same within a relative tolerance (gradients: sums in another order).
void expect_near_loop(const Fn& f, const std::vector<Array>& xs, const std::vector<AxisSpec>& axes,
                      const Shape& example_out, double tolerance = 1e-12) {
  SCOPED_TRACE("in_axes " + axes_text(axes));
  Array got = vmapped(f, xs, axes), want = loop(f, xs, axes, example_out);
  ASSERT_EQ(got.shape(), want.shape());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_NEAR(g[i], w[i], tolerance * (1 + std::abs(w[i]))) << "element " << i;
  }
}

// Every in_axes assignment in which each operand is shared or batched on one of the axes
// listed for it, with at least one batched.
std::vector<std::vector<AxisSpec>> mappings(const std::vector<std::vector<AxisSpec>>& choices) {
  std::vector<std::vector<AxisSpec>> out{{}};
  for (const auto& options : choices) {
    std::vector<std::vector<AxisSpec>> next;
    for (const auto& prefix : out) {
      for (const AxisSpec& axis : options) {
        next.push_back(prefix);
        next.back().push_back(axis);
      }
    }
    out = std::move(next);
  }
  std::erase_if(out, [](const std::vector<AxisSpec>& axes) {
    return std::none_of(axes.begin(), axes.end(), [](const AxisSpec& a) { return a.has_value(); });
  });
  return out;
}

// Shared or batched on each axis 0..rank of an operand of `rank`.
std::vector<AxisSpec> any_axis(int64_t rank) {
  std::vector<AxisSpec> options{kNotMapped};
  for (int64_t axis = 0; axis <= rank; ++axis) options.push_back(axis);
  return options;
}

// Runs f batched with each mapping, on batches of n examples built from `examples`.
void expect_all_mappings_match(const Fn& f, const std::vector<Array>& examples,
                               const std::vector<std::vector<AxisSpec>>& choices, int64_t n = 3) {
  for (const std::vector<AxisSpec>& axes : mappings(choices)) {
    std::vector<Array> xs;
    for (size_t i = 0; i < examples.size(); ++i) xs.push_back(with_batch(examples[i], n, axes[i]));
    expect_matches_loop(f, xs, axes);
  }
}

Array pad_with(const Array& x, const Array& value, PadParams params) {
  return bind1(prim::pad, {x, value}, params, CallSite());
}

// ----- layout ------------------------------------------------------------------------------

TEST(BatchShape, LayoutOpsWithTheBatchOnEveryAxis) {
  Array x = values(Shape{2, 3});
  std::vector<Fn> fs{
      [](auto in) {
        return broadcast_in_dim(in[0], Shape{2, 4, 3}, {0, 2});
      },
      [](auto in) {
        return broadcast_in_dim(in[0], Shape{1, 2, 3, 5}, {1, 2});
      },
      [](auto in) {
        return broadcast_to(in[0], Shape{4, 2, 3});
      },
      [](auto in) {
        return reshape(in[0], Shape{3, 2});
      },
      [](auto in) {
        return reshape(in[0], Shape{6, 1});
      },
      [](auto in) {
        return transpose(in[0], {1, 0});
      },
      [](auto in) { return expand_dims(in[0], -1); },
      [](auto in) { return squeeze(expand_dims(in[0], 1), {-2}); },
      [](auto in) {
        return slice(in[0], {0, 1}, {2, 3}, {1, 2});
      },
      [](auto in) {
        return slice(in[0], {1, 0}, {2, 3});
      },
      [](auto in) { return stop_gradient(in[0]); },
  };
  for (const Fn& f : fs) expect_all_mappings_match(f, {x}, {any_axis(2)});
  Array cube = values(Shape{2, 3, 4});
  expect_all_mappings_match(
      [](auto in) {
        return transpose(in[0], {2, 0, 1});
      },
      {cube}, {any_axis(3)});
  expect_all_mappings_match(
      [](auto in) {
        return reshape(in[0], Shape{4, 6});
      },
      {cube}, {any_axis(3)});
  // Rank 0 examples.
  Array s = scalar(1.5, DType::f64);
  expect_all_mappings_match(
      [](auto in) {
        return broadcast_to(in[0], Shape{2, 2});
      },
      {s}, {any_axis(0)});
  expect_all_mappings_match(
      [](auto in) {
        return reshape(in[0], Shape{1, 1});
      },
      {s}, {any_axis(0)});
}

TEST(BatchShape, LayoutRulesLeaveTheBatchWhereItIs) {
  // Batch in the middle of [2, B, 3]: the slice, the broadcast and the transpose keep it
  // on axis 1, so asking for the result there costs no transpose of its own.
  Array x = with_batch(values(Shape{2, 3}), 4, 1);
  auto sliced = [](const Array& a) { return slice(a, {0, 1}, {2, 3}); };
  std::string text = make_program(vmap(sliced, {1}, {1}), x).to_string();
  EXPECT_THAT(text, Not(HasSubstr("transpose"))) << text;
  auto broadcast = [](const Array& a) { return broadcast_in_dim(a, Shape{2, 5, 3}, {0, 2}); };
  text = make_program(vmap(broadcast, {1}, {1}), x).to_string();
  EXPECT_THAT(text, Not(HasSubstr("transpose"))) << text;
  auto swapped = [](const Array& a) { return transpose(a, {1, 0}); };
  text = make_program(vmap(swapped, {1}, {1}), x).to_string();
  EXPECT_EQ(count_of(text, "transpose"), 1) << text;
  // A shared operand of a concatenation is broadcast, not copied example by example.
  auto joined = [](const Array& a, const Array& b) { return concatenate({a, b}, 0); };
  text = make_program(vmap(joined, {1, kNotMapped}, {1}), x, values(Shape{1, 3})).to_string();
  EXPECT_EQ(count_of(text, "concatenate"), 1) << text;
  EXPECT_THAT(text, Not(HasSubstr("transpose"))) << text;
}

TEST(BatchShape, ConcatenateWithSomeOperandsShared) {
  Array a = values(Shape{2, 3}), b = values(Shape{2, 1}, DType::f64, 1);
  Array c = values(Shape{2, 2}, DType::f64, 2);
  auto f = [](auto in) { return concatenate(in, -1); };
  expect_all_mappings_match(f, {a, b, c}, {any_axis(2), any_axis(2), any_axis(2)});
  auto rows = [](auto in) { return concatenate({in[0], in[1]}, 0); };
  expect_all_mappings_match(rows, {a, values(Shape{1, 3})}, {any_axis(2), any_axis(2)});
}

TEST(BatchShape, PadWithAPerExamplePaddingValue) {
  Array x = values(Shape{3, 4});
  Array v = scalar(-7, DType::f64);
  for (const PadParams& p : {PadParams{{1, -1}, {-1, 2}, {1, 0}}, PadParams{{0, 2}, {0, 0}, {0, 2}},
                             PadParams{{-3, 0}, {0, -4}, {0, 0}}}) {
    auto f = [&](auto in) { return pad_with(in[0], in[1], p); };
    expect_all_mappings_match(f, {x, v}, {any_axis(2), any_axis(0)});
  }
  // Rank-0 and bool operands.
  auto none = [](auto in) { return pad_with(in[0], in[1], PadParams{}); };
  expect_all_mappings_match(none, {scalar(2, DType::f64), v}, {any_axis(0), any_axis(0)});
  Array flags = astype(integers(Shape{3}, 0, 2), DType::bool_);
  auto bools = [](auto in) { return pad_with(in[0], in[1], PadParams{{1}, {2}, {1}}); };
  expect_all_mappings_match(bools, {flags, scalar(1, DType::bool_)}, {any_axis(1), any_axis(0)});
}

TEST(BatchShape, DynamicSliceWithPerExampleStarts) {
  Array x = values(Shape{5, 6});
  auto f = [](Dims sizes) {
    // The primitive itself: the op skips it for a window as large as the operand.
    return [sizes](std::span<const Array> in) {
      return bind1(prim::dynamic_slice, {in[0], in[1]}, DynamicSliceParams{sizes}, CallSite());
    };
  };
  // Starts beyond either end are clamped, per example.
  for (int64_t low : {-3, 0}) {
    Array start = integers(Shape{2}, low, 8);
    for (Dims sizes : {Dims{2, 3}, Dims{5, 2}, Dims{1, 6}, Dims{0, 4}, Dims{5, 6}}) {
      SCOPED_TRACE(dims_to_string(sizes));
      expect_all_mappings_match(f(sizes), {x, start}, {any_axis(2), any_axis(1)});
    }
  }
  // Other start dtypes, and a rank-3 operand with windows on every axis.
  expect_all_mappings_match(f({2, 3}), {x, integers(Shape{2}, 0, 6, DType::u8)},
                            {any_axis(2), any_axis(1)});
  expect_all_mappings_match(f({1, 2, 3}),
                            {values(Shape{2, 3, 4}), integers(Shape{3}, -1, 5, DType::i64)},
                            {any_axis(3), any_axis(1)});
}

// The primitive itself: the op skips it for empty and full-size updates.
Array update_slice(std::span<const Array> in) {
  return bind1(prim::dynamic_update_slice, {in[0], in[1], in[2]}, NoParams{}, CallSite());
}

TEST(BatchShape, DynamicUpdateSliceEveryCombination) {
  Array x = values(Shape{4, 3, 5});
  Fn f = update_slice;
  for (int64_t low : {-2, 0}) {
    Array start = integers(Shape{3}, low, 6);
    for (Shape window : {Shape{2, 3, 2}, Shape{1, 1, 1}, Shape{4, 3, 1}, Shape{0, 3, 2}}) {
      SCOPED_TRACE(window.to_string());
      Array update = values(window, DType::f64, 5);
      expect_all_mappings_match(f, {x, update, start}, {any_axis(3), any_axis(3), any_axis(1)});
    }
  }
  // A full-size update replaces the operand whatever the starts.
  expect_all_mappings_match(f, {x, values(Shape{4, 3, 5}, DType::f64, 2), integers(Shape{3}, 0, 4)},
                            {any_axis(3), any_axis(3), any_axis(1)});
}

TEST(BatchShape, PerExampleStartsAreTakesNotALoop) {
  // A [2, 3] window of a shared [5, 6] array at per-example starts: one take per axis
  // whose window is shorter than the axis, and no per-example dynamic_slice.
  auto window = [](const Array& x, const Array& s) { return dynamic_slice(x, s, {2, 3}); };
  Array x = values(Shape{5, 6}), starts = with_batch(integers(Shape{2}, 0, 4), 4, 0);
  std::string text = make_program(vmap(window, {kNotMapped, 0}), x, starts).to_string();
  EXPECT_EQ(count_of(text, "gather"), 2) << text;
  EXPECT_THAT(text, Not(HasSubstr("dynamic_slice"))) << text;
  // Writing it back: the rows in the window are taken, the update scattered into them and
  // the rows scattered back.
  auto write = [](const Array& x, const Array& u, const Array& s) {
    return dynamic_update_slice(x, u, s);
  };
  text = make_program(vmap(write, {0, kNotMapped, 0}), with_batch(x, 4, 0), values(Shape{2, 3}),
                      starts)
             .to_string();
  EXPECT_EQ(count_of(text, "gather"), 1) << text;
  EXPECT_EQ(count_of(text, "scatter"), 2) << text;
  EXPECT_THAT(text, Not(HasSubstr("dynamic_update_slice"))) << text;
}

TEST(BatchShape, SizeOneAndEmptyBatches) {
  Array x = values(Shape{5, 6});
  Array start = integers(Shape{2}, -1, 7);
  Array update = values(Shape{2, 2}, DType::f64, 3);
  auto ds = [](auto in) { return dynamic_slice(in[0], in[1], {2, 3}); };
  Fn dus = update_slice;
  auto padded = [](auto in) { return pad_with(in[0], in[1], PadParams{{1, 0}, {0, 1}, {1, 1}}); };
  for (int64_t n : {1, 0}) {
    SCOPED_TRACE(n);
    expect_all_mappings_match(ds, {x, start}, {any_axis(2), any_axis(1)}, n);
    expect_all_mappings_match(dus, {x, update, start}, {any_axis(2), any_axis(2), any_axis(1)}, n);
    expect_all_mappings_match(padded, {x, scalar(4, DType::f64)}, {any_axis(2), any_axis(0)}, n);
  }
}

TEST(BatchShape, PerExampleGradientsMatchALoopOfGradients) {
  // Per-example windows: the gradient of dynamic_slice is a dynamic_update_slice with the
  // same (batched) starts, and pad's padding value gets a per-example cotangent.
  auto loss = [](const Array& x, const Array& start, const Array& value) {
    Array window = dynamic_slice(x, start, {2, 3});
    Array padded = pad_with(window, value, PadParams{{1, 0}, {-1, 2}, {0, 1}});
    Array joined =
        concatenate({reshape(transpose(x), Shape{1, 20}), reshape(padded, Shape{1, -1})}, 1);
    return sum(joined * joined * padded.sum());
  };
  Array x = values(Shape{4, 5}), start = integers(Shape{2}, -1, 5), v = scalar(0.5, DType::f64);
  Fn dx = [&](auto in) { return grad<0>(loss)(in[0], in[1], in[2]); };
  Fn dv = [&](auto in) { return grad<2>(loss)(in[0], in[1], in[2]); };
  for (const auto& axes : std::vector<std::vector<AxisSpec>>{
           {0, 0, 0}, {1, kNotMapped, kNotMapped}, {kNotMapped, 1, 0}, {2, 0, kNotMapped}}) {
    std::vector<Array> xs{with_batch(x, 3, axes[0]), with_batch(start, 3, axes[1]),
                          with_batch(v, 3, axes[2])};
    expect_near_loop(dx, xs, axes, Shape{4, 5});
    expect_near_loop(dv, xs, axes, Shape{});
  }
}

TEST(BatchShape, GradientOfAVmappedFunction) {
  // grad outside vmap: the batched forms (takes and scatters for per-example starts, the
  // select of a per-example padding value) are differentiated themselves.
  auto f = [](const Array& x, const Array& start, const Array& value) {
    Array window = dynamic_update_slice(x, x * x, start);
    window = dynamic_slice(window, start, {2, 3});
    return sum(pad_with(window, value, PadParams{{1, 0}, {0, 1}, {1, 0}}) * window.sum());
  };
  Array xs = with_batch(values(Shape{2, 3}), 3, 1);
  Array starts = with_batch(integers(Shape{2}, -1, 3), 3, 0);
  Array vs = with_batch(scalar(0.5, DType::f64), 3, 0);
  auto total = [&](const Array& x, const Array& v) {
    return sum(vmap(f, {1, 0, 0})(x, starts, v));
  };
  auto [dx, dv] = grad<0, 1>(total)(xs, vs);
  Fn per_x = [&](auto in) { return grad<0>(f)(in[0], in[1], in[2]); };
  Fn per_v = [&](auto in) { return grad<2>(f)(in[0], in[1], in[2]); };
  std::vector<Array> args{xs, starts, vs};
  Array want_x = loop(per_x, args, {1, 0, 0}, Shape{2, 3});
  Array want_v = loop(per_v, args, {1, 0, 0}, Shape{});
  std::vector<double> got_x = transpose(dx, {1, 0, 2}).to_vector<double>();
  std::vector<double> w = want_x.to_vector<double>();
  ASSERT_EQ(got_x.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(got_x[i], w[i], 1e-12 * (1 + std::abs(w[i])));
  std::vector<double> got_v = dv.to_vector<double>(), wv = want_v.to_vector<double>();
  ASSERT_EQ(got_v.size(), wv.size());
  for (size_t i = 0; i < wv.size(); ++i)
    EXPECT_NEAR(got_v[i], wv[i], 1e-12 * (1 + std::abs(wv[i])));
}

// ----- indexing ----------------------------------------------------------------------------

struct IndexGeometry {
  Shape operand;
  Shape indices;
  int64_t axis;
  int64_t batch_dims;
};

const std::vector<IndexGeometry>& index_geometries() {
  static const std::vector<IndexGeometry> list{
      {Shape{5}, Shape{3}, 0, 0},          {Shape{5}, Shape{}, 0, 0},
      {Shape{4, 3}, Shape{2, 2}, 0, 0},    {Shape{4, 3}, Shape{5}, 1, 0},
      {Shape{2, 3, 4}, Shape{2, 5}, 1, 1}, {Shape{2, 3, 4}, Shape{2, 3}, 2, 2},
      {Shape{3, 4}, Shape{3}, 1, 1},       {Shape{2, 3, 4}, Shape{2, 2, 2}, 2, 1},
  };
  return list;
}

Shape gather_shape(const IndexGeometry& g) {
  Shape out;
  for (int64_t d = 0; d < g.axis; ++d) out.dims().push_back(g.operand[d]);
  for (int64_t d = g.batch_dims; d < g.indices.rank(); ++d) out.dims().push_back(g.indices[d]);
  for (int64_t d = g.axis + 1; d < g.operand.rank(); ++d) out.dims().push_back(g.operand[d]);
  return out;
}

TEST(BatchIndex, GatherWithEveryMapping) {
  for (const IndexGeometry& g : index_geometries()) {
    for (IndexMode mode : {IndexMode::kError, IndexMode::kClip, IndexMode::kFill}) {
      SCOPED_TRACE(g.operand.to_string() + " " + g.indices.to_string() + " axis " +
                   std::to_string(g.axis) + " batch_dims " + std::to_string(g.batch_dims) +
                   " mode " + std::to_string(static_cast<int>(mode)));
      int64_t size = g.operand[g.axis];
      Array indices = mode == IndexMode::kError ? integers(g.indices, 0, size)
                                                : integers(g.indices, -2, size + 2);
      auto f = [&](auto in) {
        return bind1(prim::gather, {in[0], in[1]}, GatherParams{g.axis, g.batch_dims, mode},
                     CallSite());
      };
      expect_all_mappings_match(f, {values(g.operand), indices},
                                {any_axis(g.operand.rank()), any_axis(g.indices.rank())});
    }
  }
}

TEST(BatchIndex, ScattersWithEveryMapping) {
  for (const IndexGeometry& g : index_geometries()) {
    for (PrimId prim : {prim::scatter, prim::scatter_add}) {
      for (IndexMode mode : {IndexMode::kClip, IndexMode::kFill}) {
        SCOPED_TRACE(g.operand.to_string() + " " + g.indices.to_string() + " axis " +
                     std::to_string(g.axis) + " batch_dims " + std::to_string(g.batch_dims) +
                     " mode " + std::to_string(static_cast<int>(mode)));
        int64_t size = g.operand[g.axis];
        // Repeated indices: scatter keeps the last update, scatter_add sums them in order.
        Array indices = integers(g.indices, -1, size + 1);
        Shape updates = gather_shape(g);
        auto f = [&](auto in) {
          return bind1(prim, {in[0], in[1], in[2]}, ScatterParams{g.axis, g.batch_dims, mode},
                       CallSite());
        };
        expect_all_mappings_match(
            f, {values(g.operand), indices, values(updates, DType::f64, 3)},
            {any_axis(g.operand.rank()), any_axis(g.indices.rank()), any_axis(updates.rank())});
      }
    }
  }
}

TEST(BatchIndex, IntegerAndBoolOperands) {
  Array table = integers(Shape{4, 3}, -50, 50, DType::i64);
  Array labels = integers(Shape{5}, 0, 4, DType::u8);
  expect_all_mappings_match([](auto in) { return take(in[0], in[1], 0); }, {table, labels},
                            {any_axis(2), any_axis(1)});
  Array flags = astype(integers(Shape{4, 3}, 0, 2), DType::bool_);
  expect_all_mappings_match([](auto in) { return take(in[0], in[1], 0); }, {flags, labels},
                            {any_axis(2), any_axis(1)});
  expect_all_mappings_match([](auto in) { return take_along_axis(in[0], in[1], 1); },
                            {values(Shape{4, 3}), integers(Shape{4}, 0, 3)},
                            {any_axis(2), any_axis(1)});
}

TEST(BatchIndex, SharedIndicesLeaveABatchedOperandInPlace) {
  // take of rows from [4, B, 3] with shared indices: one gather on the batched operand as
  // it is, the batch staying on axis 1; no transpose and no broadcast of the indices.
  auto f = [](const Array& x, const Array& i) { return take(x, i, 0); };
  Array x = with_batch(values(Shape{4, 3}), 5, 1), i = integers(Shape{2}, 0, 4);
  std::string text = make_program(vmap(f, {1, kNotMapped}, {1}), x, i).to_string();
  EXPECT_EQ(count_of(text, "gather"), 1) << text;
  EXPECT_THAT(text, Not(HasSubstr("transpose"))) << text;
  EXPECT_THAT(text, Not(HasSubstr("broadcast_in_dim"))) << text;
  // Per-example indices into a shared table: one gather, the table not broadcast.
  text =
      make_program(vmap(f, {kNotMapped, 0}), values(Shape{4, 3}), with_batch(i, 5, 0)).to_string();
  EXPECT_EQ(count_of(text, "gather"), 1) << text;
  EXPECT_THAT(text, Not(HasSubstr("broadcast_in_dim"))) << text;
}

TEST(BatchIndex, SizeOneAndEmptyBatches) {
  IndexGeometry g{Shape{2, 3, 4}, Shape{2, 5}, 1, 1};
  Array indices = integers(g.indices, 0, 3);
  auto gather = [&](auto in) {
    return bind1(prim::gather, {in[0], in[1]}, GatherParams{1, 1, IndexMode::kError}, CallSite());
  };
  auto scatter_add = [&](auto in) {
    return bind1(prim::scatter_add, {in[0], in[1], in[2]}, ScatterParams{1, 1, IndexMode::kError},
                 CallSite());
  };
  for (int64_t n : {1, 0}) {
    SCOPED_TRACE(n);
    expect_all_mappings_match(gather, {values(g.operand), indices}, {any_axis(3), any_axis(2)}, n);
    expect_all_mappings_match(scatter_add,
                              {values(g.operand), indices, values(gather_shape(g), DType::f64, 1)},
                              {any_axis(3), any_axis(2), any_axis(3)}, n);
  }
}

TEST(BatchIndex, PerExampleGradientsMatchALoopOfGradients) {
  // take's gradient is a scatter_add; a scatter's gradient gathers and scatters ids.
  auto loss = [](const Array& table, const Array& labels, const Array& updates) {
    Array picked = take(table, labels, 0);  // [5, 3]
    Array written = bind1(prim::scatter, {table, labels, updates},
                          ScatterParams{0, 0, IndexMode::kClip}, CallSite());  // [4, 3]
    return sum(picked * picked) + sum(written * written * written);
  };
  Array table = values(Shape{4, 3}), labels = integers(Shape{5}, 0, 4);
  Array updates = values(Shape{5, 3}, DType::f64, 1);
  for (const auto& axes : std::vector<std::vector<AxisSpec>>{
           {0, 0, 0}, {1, kNotMapped, kNotMapped}, {kNotMapped, 1, 0}, {2, 0, kNotMapped}}) {
    std::vector<Array> xs{with_batch(table, 3, axes[0]), with_batch(labels, 3, axes[1]),
                          with_batch(updates, 3, axes[2])};
    Fn d_table = [&](auto in) { return grad<0>(loss)(in[0], in[1], in[2]); };
    Fn d_updates = [&](auto in) { return grad<2>(loss)(in[0], in[1], in[2]); };
    expect_near_loop(d_table, xs, axes, Shape{4, 3});
    expect_near_loop(d_updates, xs, axes, Shape{5, 3});
  }
}

// ----- sort --------------------------------------------------------------------------------

TEST(BatchSort, SortAlongEachAxisWithTheBatchAnywhere) {
  Array x = values(Shape{3, 4, 2});
  for (int64_t axis : {0, 1, -1, -3}) {
    SCOPED_TRACE(axis);
    expect_all_mappings_match([axis](auto in) { return sort(in[0], axis); }, {x}, {any_axis(3)});
    expect_all_mappings_match([axis](auto in) { return argsort(in[0], axis); }, {x}, {any_axis(3)});
  }
  // Integer keys with ties (stability) and several operands, some shared.
  Array keys = integers(Shape{3, 4}, 0, 3), more = integers(Shape{3, 4}, 0, 2, DType::i64, 1);
  Array payload = values(Shape{3, 4});
  for (int64_t num_keys : {1, 2}) {
    for (size_t result : {0, 1, 2}) {
      auto f = [=](auto in) { return sort(in, -1, num_keys)[result]; };
      expect_all_mappings_match(f, {keys, more, payload}, {any_axis(2), any_axis(2), any_axis(2)});
    }
  }
}

TEST(BatchSort, SizeOneAndEmptyBatchesAndAxes) {
  auto f = [](auto in) { return sort(in[0], 0); };
  for (int64_t n : {1, 0}) expect_all_mappings_match(f, {values(Shape{4, 2})}, {any_axis(2)}, n);
  expect_all_mappings_match(f, {values(Shape{0, 2})}, {any_axis(2)});
  expect_all_mappings_match(f, {values(Shape{1})}, {any_axis(1)});
}

TEST(BatchSort, PerExampleGradientsThroughASortingPermutation) {
  // sort has no gradient of its own; argsort's integer result needs none, and the values
  // it orders are taken with a gather (whose gradient is a scatter_add by the same
  // per-example permutation).
  auto loss = [](const Array& x) {
    Array sorted = take(x, argsort(x, -1), 0);
    Array weights = arange(5, DType::f64) + 1.0;
    return sum(sorted * weights * sorted);
  };
  Array x = values(Shape{5});
  for (int64_t dim : {0, 1}) {
    expect_all_mappings_match([&](auto in) { return grad(loss)(in[0]); }, {x}, {{AxisSpec(dim)}});
  }
}

}  // namespace
}  // namespace kiln::batch_rules_shape_index_sort
