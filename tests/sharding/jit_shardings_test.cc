// jit with in_shardings / out_shardings on 4 logical devices (KILN_CPU_DEVICES=4): each
// partitioned program gives the unpartitioned program's values, its results carry the
// propagated (or requested) shardings, and its printed program holds exactly the
// collectives of data parallelism (the gradient all-reduced), FSDP (the kernel gathered,
// its gradient reduce-scattered) and Megatron tensor parallelism (one psum per pair of
// layers); plus an error for each misuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/sharding.h"
#include "sharding/spmd_cases.h"
#include "support/errors.h"

namespace kiln {
namespace {

using kiln::testing::fails_with;
using kiln::testing::grid;
using kiln::testing::line;
using kiln::testing::numbered;
using kiln::testing::values_of;

// Small values that differ everywhere: i * 0.01 - 0.3.
Array small(const Shape& shape) {
  return numbered(shape) * 0.01f - 0.3f;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void expect_close(const Array& got, const Array& want, double tolerance = 1e-5) {
  std::vector<double> a = values_of(got), b = values_of(want);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tolerance) << "element " << i;
}

// One SGD step of a linear least-squares model.
Array sgd_step(const Array& w, const Array& x) {
  auto loss = [](const Array& kernel, const Array& inputs) {
    Array y = matmul(inputs, kernel);
    return mean(y * y);
  };
  return w - grad(loss)(w, x) * 0.1f;
}

TEST(JitShardings, DataParallelStepAllReducesTheGradient) {
  Mesh mesh = line();
  Array w = small(Shape{6, 3});
  Array x = small(Shape{8, 6});
  NamedSharding replicated(mesh, {{}, {}});
  NamedSharding batch(mesh, {{"data"}, {}});
  auto step = jit(sgd_step, JitOptions().named("dp").sharded({replicated, batch}));
  Array got = step(w, x);
  expect_close(got, jit(sgd_step)(w, x));
  EXPECT_EQ(got.aval().to_string(), "f32[6,3]{_,_}");
  std::string text = step.compile(w, x).program().to_string();
  EXPECT_EQ(count(text, "psum["), 1u) << text;
  EXPECT_EQ(count(text, "all_gather["), 0u) << text;
  EXPECT_EQ(count(text, "psum_scatter["), 0u) << text;
}

TEST(JitShardings, FsdpGathersTheKernelAndReduceScattersItsGradient) {
  Mesh mesh = line();
  Array w = small(Shape{8, 3});
  Array x = small(Shape{8, 8});
  NamedSharding rows(mesh, {{"data"}, {}});
  auto step = jit(sgd_step, JitOptions().named("fsdp").sharded({rows, rows}, {rows}));
  Array got = step(w, x);
  expect_close(got, jit(sgd_step)(w, x));
  EXPECT_EQ(got.aval().to_string(), "f32[8,3]{data,_}");
  std::string text = step.compile(w, x).program().to_string();
  EXPECT_GE(count(text, "all_gather["), 1u) << text;
  EXPECT_EQ(count(text, "psum_scatter["), 1u) << text;
  EXPECT_EQ(count(text, "psum["), 0u) << text;
}

TEST(JitShardings, TensorParallelLayersPsumOncePerPair) {
  Mesh mesh = grid();
  Array x = small(Shape{8, 4});
  Array w1 = small(Shape{4, 6});
  Array w2 = small(Shape{6, 4});
  auto mlp = [](const Array& inputs, const Array& column, const Array& row) {
    return matmul(tanh(matmul(inputs, column)), row);
  };
  NamedSharding batch(mesh, {{"data"}, {}});
  NamedSharding columns(mesh, {{}, {"model"}});
  NamedSharding rows(mesh, {{"model"}, {}});
  auto forward = jit(mlp, JitOptions().named("tp").sharded({batch, columns, rows}));
  Array got = forward(x, w1, w2);
  expect_close(got, mlp(x, w1, w2));
  EXPECT_EQ(got.aval().to_string(), "f32[8,4]{data,_}");
  std::string text = forward.compile(x, w1, w2).program().to_string();
  EXPECT_EQ(count(text, "psum["), 1u) << text;
  EXPECT_EQ(count(text, "all_gather["), 0u) << text;
}

TEST(JitShardings, SplitsPropagateThroughReshapeTransposeAndReductions) {
  Mesh mesh = line();
  Array x = small(Shape{8, 6});
  auto f = [](const Array& a) {
    Array r = reshape(exp(a), Shape{8, 2, 3});
    return transpose(r, {1, 0, 2});
  };
  auto g = [](const Array& a) { return sum(a * a, {0}); };
  NamedSharding batch(mesh, {{"data"}, {}});
  auto jf = jit(f, JitOptions().sharded({batch}));
  Array y = jf(x);
  EXPECT_EQ(y.aval().to_string(), "f32[2,8,3]{_,data,_}");
  expect_close(y, f(x));
  EXPECT_EQ(count(jf.compile(x).program().to_string(), "all_gather["), 0u);
  // The sum over the split dimension is added over the devices once, at the result.
  auto jg = jit(g, JitOptions().sharded({batch}));
  Array s = jg(x);
  EXPECT_EQ(s.aval().to_string(), "f32[6]{_}");
  expect_close(s, g(x));
  EXPECT_EQ(count(jg.compile(x).program().to_string(), "psum["), 1u);
}

// Rules that need a dimension whole (a running sum, an argmax, a sort, an index) gather it;
// the dimensions they do not touch stay split.
TEST(JitShardings, OperationsAlongASplitDimensionGatherIt) {
  Mesh mesh = line();
  Array x = small(Shape{8, 4}) * small(Shape{8, 4});  // not monotone along either axis
  NamedSharding batch(mesh, {{"data"}, {}});
  auto along_rows = [](const Array& a) {
    return cumsum(a, 0) + sort(a, 0) + argmax(a, 0).astype(DType::f32) + max(a, {0}) +
           take(a, from_host<int32_t>({7, 0, 3, 3, 1, 2, 6, 5}, Shape{8}), 0);
  };
  auto jf = jit(along_rows, JitOptions().sharded({batch}));
  Array y = jf(x);
  expect_close(y, along_rows(x));
  EXPECT_GE(count(jf.compile(x).program().to_string(), "all_gather["), 1u);
  // Along the other dimension every device works on its rows alone.
  auto along_columns = [](const Array& a) { return cumsum(a, 1) + sort(a, 1); };
  auto jg = jit(along_columns, JitOptions().sharded({batch}));
  Array z = jg(x);
  EXPECT_EQ(z.aval().to_string(), "f32[8,4]{data,_}");
  expect_close(z, along_columns(x));
  std::string text = jg.compile(x).program().to_string();
  EXPECT_EQ(count(text, "all_gather["), 0u) << text;
}

TEST(JitShardings, OutShardingsChooseTheResultsSplit) {
  Mesh mesh = line();
  Array x = small(Shape{8, 4});
  auto f = [](const Array& a) { return tanh(a) * 2.0f; };
  NamedSharding batch(mesh, {{"data"}, {}});
  NamedSharding whole(mesh, {{}, {}});
  NamedSharding columns(mesh, {{}, {"data"}});
  auto gathered = jit(f, JitOptions().sharded({batch}, {whole}));
  Array y = gathered(x);
  EXPECT_EQ(y.aval().to_string(), "f32[8,4]{_,_}");
  expect_close(y, f(x));
  EXPECT_EQ(count(gathered.compile(x).program().to_string(), "all_gather["), 1u);
  // Rows to columns: gathered along one dimension, sliced along the other.
  auto moved = jit(f, JitOptions().sharded({batch}, {columns}));
  Array z = moved(x);
  EXPECT_EQ(z.aval().to_string(), "f32[8,4]{_,data}");
  expect_close(z, f(x));
  ASSERT_EQ(shards(z).size(), 4u);
  expect_close(shards(z)[1], slice(f(x), {0, 1}, {8, 2}));
}

TEST(JitShardings, ArgumentsPlacedAnyWayGiveTheSameResult) {
  Mesh mesh = line();
  Array w = small(Shape{6, 3});
  Array x = small(Shape{8, 6});
  NamedSharding replicated(mesh, {{}, {}});
  NamedSharding batch(mesh, {{"data"}, {}});
  auto step = jit(sgd_step, JitOptions().sharded({replicated, batch}));
  expect_close(step(device_put(w, replicated), device_put(x, batch)), step(w, x), 0);
}

TEST(JitShardings, BadShardingsAreClearErrors) {
  Mesh mesh = line();
  Array x = small(Shape{6, 4});
  auto f = [](const Array& a) { return a * 2.0f; };
  NamedSharding batch(mesh, {{"data"}, {}});
  EXPECT_TRUE(fails_with([&] { (void)jit(f, JitOptions().named("odd").sharded({batch}))(x); },
                         {"jit 'odd' in_shardings[0]", "6", "4"}));
  Array y = small(Shape{8, 4});
  EXPECT_TRUE(fails_with(
      [&] {
        (void)jit(f, JitOptions().named("two").sharded({batch, batch}))(y);
      },
      {"jit 'two'", "2 in_shardings for 1 array argument"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)jit(f, JitOptions().named("outs").sharded({batch}, {batch, batch}))(y);
      },
      {"2 out_shardings for 1 result"}));
  NamedSharding other(Mesh({{"data", 2}}), {{"data"}, {}});
  auto g = [](const Array& a, const Array& b) { return a + b; };
  EXPECT_TRUE(fails_with(
      [&] {
        (void)jit(g, JitOptions().named("meshes").sharded({batch, other}))(y, y);
      },
      {"in_shardings[1] is on Mesh{data: 2}", "one mesh"}));
  EXPECT_TRUE(fails_with([&] { (void)jit(f, JitOptions().named("alone").sharded({}, {batch}))(y); },
                         {"out_shardings without in_shardings"}));
  auto inner = [mesh](const Array& a) {
    return shard_map(
        [](const std::vector<Array>& b) { return std::vector<Array>{psum(b[0], "data")}; }, mesh,
        {PartitionSpec{{"data"}, {}}}, {PartitionSpec{{}, {}}})({a})[0];
  };
  EXPECT_TRUE(
      fails_with([&] { (void)jit(inner, JitOptions().named("nested").sharded({batch}))(y); },
                 {"jit 'nested' with in_shardings: shard_map is a collective"}));
}

}  // namespace
}  // namespace kiln
