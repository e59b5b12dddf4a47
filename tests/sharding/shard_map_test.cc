// shard_map and the collectives on 4 logical devices (KILN_CPU_DEVICES=4,
// tests/CMakeLists.txt): each collective against the same computation done on the whole
// array, on one- and two-axis meshes; gradients against finite differences; vmap against
// a loop of calls; jit against eager; the program text round trip; and an error for each
// misuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kiln/control_flow.h"
#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/sharding.h"
#include "kiln/tracing.h"
#include "kiln/vmap.h"
#include "sharding/spmd_cases.h"
#include "support/errors.h"
#include "transforms/eval.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT: the shared cases
using kiln::testing::fails_with;
using ::testing::HasSubstr;

TEST(ShardMap, EachDeviceSeesItsBlockAndTheResultIsAssembled) {
  Array x = numbered(Shape{8, 3});
  Array y = run1(unary([](const Array& block) {
                   EXPECT_EQ(block.shape(), (Shape{2, 3}));
                   return block * 2.0f;
                 }),
                 line(), {{"data"}, {}}, {{"data"}, {}}, x);
  EXPECT_EQ(y.aval().to_string(), "f32[8,3]{data,_}");
  EXPECT_EQ(values_of(y), values_of(x * 2.0f));
  ASSERT_TRUE(sharding_of(y).has_value());
  EXPECT_EQ(shards(y)[1].device().id(), 1);
  EXPECT_EQ(values_of(shards(y)[1]), values_of(slice(x, {2, 0}, {4, 3}) * 2.0f));
}

TEST(Collectives, PsumPmeanPmaxOverOneAxis) {
  Array x = numbered(Shape{8});
  std::vector<double> blocks = values_of(x);
  std::vector<double> sum(2), mean(2), max(2, -1);
  for (int d = 0; d < 4; ++d) {
    for (int i = 0; i < 2; ++i) {
      sum[i] += blocks[d * 2 + i];
      max[i] = std::max(max[i], blocks[d * 2 + i]);
    }
  }
  for (int i = 0; i < 2; ++i) mean[i] = sum[i] / 4;
  auto all = [](std::vector<double> v) {  // the same block on every device, assembled whole
    std::vector<double> out;
    for (int d = 0; d < 4; ++d) out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  // Replicated results (spec {}) are one block; the same result kept split shows every copy.
  EXPECT_EQ(values_of(run1(unary([](const Array& b) { return psum(b, "data"); }), line(),
                           {{"data"}}, {}, x)),
            sum);
  EXPECT_EQ(values_of(run1(unary([](const Array& b) { return psum(b, "data"); }), line(),
                           {{"data"}}, {{"data"}}, x)),
            all(sum));
  EXPECT_EQ(values_of(run1(unary([](const Array& b) { return pmean(b, "data"); }), line(),
                           {{"data"}}, {}, x)),
            mean);
  EXPECT_EQ(values_of(run1(unary([](const Array& b) { return pmax(b, "data"); }), line(),
                           {{"data"}}, {}, x)),
            max);
}

TEST(Collectives, PsumOverOneAxisOfTwo) {
  // x[4, 2] split rows over data and columns over model: device (d, m) holds x[2d:2d+2, m].
  Array x = numbered(Shape{4, 2});
  Array over_model = run1(unary([](const Array& b) { return psum(b, "model"); }), grid(),
                          {{"data"}, {"model"}}, {{"data"}, {}}, x);
  EXPECT_EQ(over_model.shape(), (Shape{4, 1}));
  EXPECT_EQ(values_of(over_model), values_of(x.sum({1}, true)));
  Array over_both = run1(unary([](const Array& b) {
                           return psum(b, AxisNames{"data", "model"});
                         }),
                         grid(), {{"data"}, {"model"}}, {}, x);
  EXPECT_EQ(values_of(over_both), values_of((slice(x, {0, 0}, {2, 1}) + slice(x, {0, 1}, {2, 2}) +
                                             slice(x, {2, 0}, {4, 1}) + slice(x, {2, 1}, {4, 2}))));
}

TEST(Collectives, AllGatherStackedAndTiled) {
  Array x = numbered(Shape{8});
  Array stacked =
      run1(unary([](const Array& b) { return all_gather(b, "data"); }), line(), {{"data"}}, {}, x);
  EXPECT_EQ(stacked.shape(), (Shape{4, 2}));
  EXPECT_EQ(values_of(stacked), values_of(x));
  Array tiled = run1(unary([](const Array& b) { return all_gather(b, "data", 0, true); }), line(),
                     {{"data"}}, {}, x);
  EXPECT_EQ(tiled.shape(), (Shape{8}));
  EXPECT_EQ(values_of(tiled), values_of(x));
  // Along axis 1 of a [2, 2] block: the devices' blocks side by side.
  Array rows = numbered(Shape{2, 8});
  Array side = run1(unary([](const Array& b) { return all_gather(b, "data", 1, true); }), line(),
                    {{}, {"data"}}, {}, rows);
  EXPECT_EQ(values_of(side), values_of(rows));
}

TEST(Collectives, PsumScatterIsAReduceScatter) {
  Array x = numbered(Shape{8});
  // Every device holds all of x: the sum is 4x, and device i keeps block i of it.
  Array tiled = run1(unary([](const Array& b) { return psum_scatter(b, "data", 0, true); }), line(),
                     {}, {{"data"}}, x);
  EXPECT_EQ(values_of(tiled), values_of(x * 4.0f));
  Array rows = numbered(Shape{4, 3});
  Array untiled = run1(unary([](const Array& b) { return psum_scatter(b, "data"); }), line(), {},
                       {{"data"}}, rows);
  EXPECT_EQ(untiled.shape(), (Shape{12}));  // each device's entry [3], assembled
  EXPECT_EQ(values_of(untiled), values_of(rows * 4.0f));
}

TEST(Collectives, AllToAllTransposesBlocks) {
  // Device d holds rows [2d, 2d+2) of a [8, 4] array; after all_to_all(split 1, concat 0)
  // it holds columns [d, d+1) of every row.
  Array x = numbered(Shape{8, 4});
  Array y = run1(unary([](const Array& b) { return all_to_all(b, "data", 1, 0); }), line(),
                 {{"data"}, {}}, {{}, {"data"}}, x);
  EXPECT_EQ(y.shape(), (Shape{8, 4}));
  EXPECT_EQ(values_of(y), values_of(x));
}

TEST(Collectives, PpermuteShiftsAndZeroFills) {
  Array x = numbered(Shape{4}) + 1.0f;  // device d holds d + 1
  Array ring = run1(unary([](const Array& b) {
                      return ppermute(b, "data", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
                    }),
                    line(), {{"data"}}, {{"data"}}, x);
  EXPECT_EQ(values_of(ring), (std::vector<double>{4, 1, 2, 3}));
  Array partial = run1(unary([](const Array& b) {
                         return ppermute(b, "data", {{0, 2}});
                       }),
                       line(), {{"data"}}, {{"data"}}, x);
  EXPECT_EQ(values_of(partial), (std::vector<double>{0, 0, 1, 0}));
}

TEST(Collectives, AxisIndexAlongEachAxis) {
  Array x = zeros(Shape{4}, DType::i32);
  auto index_of = [&](AxisNames axes) {
    return values_of(run1(unary([axes](const Array& b) { return b + axis_index(axes); }), grid(),
                          {{"data", "model"}}, {{"data", "model"}}, x));
  };
  EXPECT_EQ(index_of("data"), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(index_of("model"), (std::vector<double>{0, 1, 0, 1}));
  EXPECT_EQ(index_of(AxisNames{"data", "model"}), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(index_of(AxisNames{"model", "data"}), (std::vector<double>{0, 2, 1, 3}));
}

// axis_size is known while the body is traced: a plain integer, the product over the axes.
TEST(Collectives, AxisSizeAndWhetherAnAxisIsBound) {
  Array x = zeros(Shape{4}, DType::i32);
  std::vector<int64_t> seen;
  run1(unary([&](const Array& b) {
         seen = {axis_size("data"), axis_size("model"), axis_size(AxisNames{"data", "model"}),
                 axis_is_bound("model") ? 1 : 0, axis_is_bound("nope") ? 1 : 0};
         return b;
       }),
       grid(), {{"data", "model"}}, {{"data", "model"}}, x);
  EXPECT_EQ(seen, (std::vector<int64_t>{2, 2, 4, 1, 0}));
  EXPECT_FALSE(axis_is_bound("data"));  // outside the body
  EXPECT_THAT(error_of([] { (void)axis_size("data"); }),
              HasSubstr("axis_size: mesh axis 'data' is not bound here"));
  EXPECT_THAT(error_of([&] {
                run1(unary([](const Array& b) {
                       (void)axis_size("nope");
                       return b;
                     }),
                     grid(), {{"data", "model"}}, {{"data", "model"}}, x);
              }),
              HasSubstr("axis_size: the mesh has no axis 'nope'"));
}

TEST(Collectives, ReduceInTreeOrderWhateverTheDevices) {
  // Values whose f32 sum depends on the order of the additions: the result is the pairwise
  // tree over the devices' positions along the axis, ((x0 + x1) + (x2 + x3)), whatever
  // devices hold them and whichever algorithm runs.
  std::vector<float> v = {1e8f, 1.0f, -1e8f, 1.0f};
  Array x = from_host<float>(v, Shape{4});
  const float expected = (v[0] + v[1]) + (v[2] + v[3]);
  ASSERT_NE(expected, ((v[0] + v[1]) + v[2]) + v[3]);  // the order shows in the bits
  Mesh reversed({{"data", 4}}, {&device(3), &device(2), &device(1), &device(0)});
  for (CollectiveAlgorithm algorithm : {CollectiveAlgorithm::kReference, CollectiveAlgorithm::kTree,
                                        CollectiveAlgorithm::kRing, CollectiveAlgorithm::kAuto}) {
    set_collective_algorithm(algorithm);
    for (const Mesh& mesh : {line(), reversed}) {
      Array y =
          run1(unary([](const Array& b) { return psum(b, "data"); }), mesh, {{"data"}}, {}, x);
      EXPECT_EQ(y.to_vector<float>(), std::vector<float>{expected})
          << mesh.to_string() << ", algorithm " << static_cast<int>(algorithm);
    }
  }
  set_collective_algorithm(CollectiveAlgorithm::kAuto);
}

TEST(Collectives, FourDevicesSumLikeTwoDevicesOfPairs) {
  // The tree makes a sum over 4 devices of single chunks equal a sum over 2 devices of
  // pairs of chunks (each pair added first on its device): the same bits on 2 and 4 devices.
  std::vector<float> v = {0.1f, 1e7f, -3.3f, 7.7e-3f, 2.5f, -1e7f, 1e-4f, 9.9f};
  Array x = from_host<float>(v, Shape{4, 2});
  Array on_four = run1(unary([](const Array& b) { return psum(b.reshape({2}), "data"); }), line(),
                       {{"data"}, {}}, {}, x);
  Array on_two = run1(unary([](const Array& b) { return psum(b.sum({0}), "data"); }),
                      Mesh({{"data", 2}}), {{"data"}, {}}, {}, x);
  EXPECT_EQ(on_four.to_vector<float>(), on_two.to_vector<float>());
}

// ----- transformations --------------------------------------------------------------------

// Reverse and forward mode (shard_map's and each collective's JVP rule) against finite
// differences.
TEST(ShardMapGrad, MatchesFiniteDifferences) {
  Array w = numbered(Shape{3, 2}, DType::f64) * 0.1;
  Array x = numbered(Shape{8, 3}, DType::f64) * 0.05 - 0.4;
  EXPECT_NO_THROW(check_grads(sharded_loss, std::tuple{w, x}, {.forward = true}));
  // Each collective's own derivative: its result weighted by fixed values and summed.
  for (const CollectiveCase& c : collective_cases()) {
    SCOPED_TRACE(c.name);
    Array z = numbered(c.x_shape, DType::f64) * 0.3 - 1.1;
    auto loss = [&c](const Array& a) {
      Array out = run1(unary(c.body), c.mesh, c.in, c.out, a);
      return (out * (numbered(out.shape(), DType::f64) * 0.1 + 0.5)).sum();
    };
    EXPECT_NO_THROW(check_grads(loss, std::tuple{z}, {.forward = true}));
  }
}

TEST(ShardMapGrad, DataParallelGradientEqualsTheUnshardedOne) {
  Array w = numbered(Shape{3, 2}) * 0.1f;
  Array x = numbered(Shape{8, 3}) * 0.05f - 0.4f;
  auto unsharded = [](const Array& w_, const Array& x_) {
    return (tanh(matmul(x_, w_)) * tanh(matmul(x_, w_))).mean();
  };
  Array expected = grad(unsharded)(w, x);
  Array actual = grad(sharded_loss)(w, x);
  std::vector<double> e = values_of(expected), a = values_of(actual);
  ASSERT_EQ(e.size(), a.size());
  for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-6) << i;
}

TEST(ShardMapVmap, MatchesALoopOfCalls) {
  constexpr int64_t kExamples = 3;
  for (const CollectiveCase& c : collective_cases()) {
    SCOPED_TRACE(c.name);
    Dims batch_dims = c.x_shape.dims();
    batch_dims.insert_at(0, kExamples);
    Array xs = numbered(Shape(batch_dims)) * 0.25f - 2.0f;
    auto per_example = [&c](const Array& x) {
      return run1(unary([&c](const Array& b) { return c.body(b) * 2.0f; }), c.mesh, c.in, c.out, x);
    };
    Array batched = vmap(per_example)(xs);
    for (int64_t e = 0; e < kExamples; ++e) {
      Dims start(static_cast<size_t>(xs.rank()), 0), limit = xs.shape().dims();
      start[0] = e;
      limit[0] = e + 1;
      Array one = per_example(slice(xs, start, limit).reshape(c.x_shape));
      Dims out_start(static_cast<size_t>(batched.rank()), 0), out_limit = batched.shape().dims();
      out_start[0] = e;
      out_limit[0] = e + 1;
      EXPECT_EQ(values_of(slice(batched, out_start, out_limit).reshape(one.shape())),
                values_of(one))
          << "example " << e;
    }
  }
}

TEST(ShardMapJit, MatchesEager) {
  Array w = numbered(Shape{3, 2}) * 0.1f;
  Array x = numbered(Shape{8, 3}) * 0.05f - 0.4f;
  auto step = [](const Array& w_, const Array& x_) { return value_and_grad(sharded_loss)(w_, x_); };
  auto eager = step(w, x);
  auto compiled = jit(step)(w, x);
  EXPECT_EQ(values_of(compiled.first), values_of(eager.first));
  EXPECT_EQ(values_of(compiled.second), values_of(eager.second));
}

TEST(ShardMapProgram, PrintsParsesAndRuns) {
  Array w = numbered(Shape{3, 2}) * 0.1f;
  Array x = numbered(Shape{8, 3}) * 0.05f - 0.4f;
  TracedProgram traced = make_program(sharded_loss, w, x);
  std::string text = traced.to_string();
  EXPECT_THAT(text, HasSubstr("shard_map[body={ lambda"));
  EXPECT_THAT(text, HasSubstr("mesh=\"data=4\" devices=(0,1,2,3) in_specs=\"{} {data,_}\""));
  EXPECT_THAT(text, HasSubstr("pmean[axes=\"data\" axis_size=4"));
  Program parsed = parse_program(text);
  verify(parsed);
  EXPECT_EQ(print_program(parsed), text);
  std::vector<Array> inputs = {w, x};
  EXPECT_EQ(values_of(eval_program(parsed, inputs, CallSite())[0]), values_of(sharded_loss(w, x)));
}

TEST(ShardMapProgram, MeshesThatCannotBeAreRefusedByName) {
  // A one-input identity shard_map over `mesh` with `devices` ids, as program text.
  auto text = [](std::string_view mesh, std::string_view devices) {
    return fmt::format(
        "{{ lambda ; a:f32[4]. let b:f32[4]{{_}} = shard_map[body={{ lambda ; a:f32[4]. let "
        "in (a) }} mesh=\"{}\" devices=({}) in_specs=\"{{}}\" out_specs=\"{{}}\"] a in (b) }}",
        mesh, devices);
  };
  auto verified = [](const std::string& program) { verify(parse_program(program)); };
  EXPECT_NO_THROW(verified(text("data=2", "0,1")));
  EXPECT_TRUE(fails_with([&] { verified(text("data=2,data=2", "0,1,2,3")); },
                         {"mesh axis 'data' appears twice in data=2,data=2"}));
  EXPECT_TRUE(
      fails_with([&] { verified(text("a=9223372036854775807,b=9223372036854775807", "0")); },
                 {"has more than 2^63 devices"}));
  std::string many;
  for (int a = 0; a < 17; ++a) many += fmt::format("{}x{}=1", a == 0 ? "" : ",", a);
  EXPECT_TRUE(
      fails_with([&] { verified(text(many, "0")); }, {"the mesh has 17 axes, more than 16"}));
  EXPECT_TRUE(fails_with([&] { verified(text("data=2", "0")); },
                         {"mesh data=2 has 2 devices, but 1 device ids are given"}));
}

// ----- misuse -----------------------------------------------------------------------------

// The replication check walks into control flow (issue 44): a carry that a scan's body
// psums is the same on every device. It was reported as "may differ ... psum it", which
// the body already did; now the error is the true one: collectives inside control flow
// do not run yet.
TEST(ShardMap, ACarryPsummedInsideAScanIsReplicated) {
  auto scanned = [](bool with_psum) {
    return unary([with_psum](const Array& b) {
      auto step = [with_psum](const Array& carry, const Array& x) {
        Array next = carry * x;
        if (with_psum) next = psum(next, "data");
        return std::pair{next, next};
      };
      return scan(step, b, full({3}, 0.5)).first;
    });
  };
  Array x = numbered(Shape{8});
  std::string error = error_of([&] { run1(scanned(true), line(), {{"data"}}, {}, x); });
  EXPECT_THAT(error, HasSubstr("inside control flow they are not supported yet"));
  EXPECT_THAT(error, ::testing::Not(HasSubstr("may differ")));
  EXPECT_TRUE(fails_with([&] { run1(scanned(false), line(), {{"data"}}, {}, x); },
                         {"result 0 (f32[2]) may differ along mesh axis 'data'"}));
  // A while_loop whose predicate differs between devices may stop at different steps.
  auto looped = unary([](const Array& b) {
    return while_loop([](const Array& v) { return sum(v) < 30.0f; },
                      [](const Array& v) { return psum(v, "data") + 1.0f; }, b);
  });
  EXPECT_TRUE(fails_with([&] { run1(looped, line(), {{"data"}}, {}, x); },
                         {"result 0 (f32[2]) may differ along mesh axis 'data'"}));
}

TEST(ShardMapErrors, NameTheArgumentTheAxisAndTheSizes) {
  auto id = unary([](const Array& b) { return b; });
  // In shard_map: one collective's misuse per case, on x = f32[8] split {data} (blocks [2]).
  auto fails_in_body = [](std::function<Array(const Array&)> body,
                          std::initializer_list<std::string_view> expected) {
    return fails_with(
        [&] { run1(unary(std::move(body)), line(), {{"data"}}, {{"data"}}, numbered(Shape{8})); },
        expected);
  };
  EXPECT_TRUE(fails_with([&] { run1(id, line(), {{"data"}}, {{"data"}}, numbered(Shape{6})); },
                         {"dimension 0 of shard_map argument 0 (shape [6], size 6) is split over "
                          "mesh axis data (size 4) into 4 parts, which do not divide 6"}));
  EXPECT_TRUE(fails_with([&] { run1(id, line(), {{"model"}}, {{"data"}}, numbered(Shape{8})); },
                         {"the spec {model} splits dimension 0 over mesh axis 'model', which "
                          "Mesh{data: 4} does not have",
                          "the mesh's axes are data"}));
  EXPECT_TRUE(fails_with(
      [&] {
        shard_map(id, line(), {{}, {}}, {{}})({numbered(Shape{8})});
      },
      {"shard_map: 1 argument(s) for 2 in_specs"}));
  EXPECT_TRUE(fails_with(
      [&] {
        shard_map([](const std::vector<Array>& a) { return a; }, line(), {{{"data"}}},
                  {})({numbered(Shape{8})});
      },
      {"shard_map: the function returned 1 result(s) for 0 out_specs"}));
  EXPECT_TRUE(fails_with(
      [&] {
        run1(id, line(), {{"data"}}, {{"data"}, {}}, numbered(Shape{8}));
      },
      {"shard_map: out_specs[0] {data,_} has 2 entries for rank 1"}));
  // A result left whole (spec {}) that may differ between the devices.
  EXPECT_TRUE(fails_with([&] { run1(id, line(), {{"data"}}, {}, numbered(Shape{8})); },
                         {"shard_map: result 0 (f32[2]) may differ along mesh axis 'data', but "
                          "out_specs[0] {} does not split it over 'data'",
                          "psum or pmean it over 'data' in the function"}));
  EXPECT_TRUE(fails_in_body([](const Array& b) { return psum(b, "pipe"); },
                            {"psum: the mesh has no axis 'pipe' (its axes: data)"}));
  EXPECT_TRUE(fails_in_body(
      [](const Array& b) {
        return psum(b, {"data", "data"});
      },
      {"psum: names mesh axis 'data' twice"}));
  EXPECT_TRUE(fails_in_body([](const Array& b) { return pmean(b.astype(DType::i32), "data"); },
                            {"pmean: takes a floating-point array, not i32[2]"}));
  EXPECT_TRUE(fails_in_body(
      [](const Array& b) {
        return ppermute(b, "data", {{0, 1}, {2, 1}});
      },
      {"ppermute: pair (2, 1) repeats a source or a destination"}));
  EXPECT_TRUE(fails_in_body(
      [](const Array& b) {
        return ppermute(b, "data", {{0, 7}});
      },
      {"ppermute: pair (0, 7) names a device outside [0, 4)"}));
  EXPECT_TRUE(fails_in_body([](const Array& b) { return all_gather(b, "data", 3); },
                            {"all_gather: dimension 3 is outside [0, 1] for f32[2]"}));
  EXPECT_TRUE(fails_in_body([](const Array& b) { return psum_scatter(b, "data", 0, true); },
                            {"psum_scatter: dimension 0 of f32[2] (size 2) does not split into 4 "
                             "equal parts"}));
  EXPECT_TRUE(fails_in_body([](const Array& b) { return all_to_all(b, "data", 0, 0); },
                            {"all_to_all: split_dimension 0 of f32[2] (size 2) does not split "
                             "into 4 parts"}));
  EXPECT_TRUE(fails_with([&] { (void)psum(numbered(Shape{8}), "data"); },
                         {"psum: mesh axis 'data' is not bound here: collectives run inside the "
                          "function kiln::shard_map maps over a mesh"}));
  EXPECT_TRUE(fails_in_body(
      [](const Array& b) {
        return run1(unary([](const Array& c) { return c; }), line(), {}, {}, b);
      },
      {"called inside another shard_map's function, which is not supported"}));
}

}  // namespace
}  // namespace kiln
