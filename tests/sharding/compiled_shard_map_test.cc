// The compiled shard_map run (the body cut at its collectives, each segment one executable
// per device) against the reference lockstep run, equation by equation on every device:
// the same bits for every collective case, for gradients, and for bodies whose
// collectives are interleaved with other work; and the segment plan itself.
#include <gtest/gtest.h>

#include <algorithm>

#include "jit/compiled_shard_map.h"
#include "kiln/grad.h"
#include "kiln/tracing.h"
#include "prims/ids/spmd.h"
#include "sharding/shard_map_run.h"
#include "sharding/spmd_cases.h"
#include "support/arrays.h"

namespace kiln::testing {
namespace {

// The single shard_map equation `f` traces to, at the top level of its program.
const Equation& shard_map_equation(const TracedProgram& traced) {
  for (const Equation& equation : traced.program->equations) {
    if (equation.prim == prim::shard_map) return equation;
  }
  ADD_FAILURE() << "no shard_map in\n" << traced.to_string();
  static Equation none;
  return none;
}

// Runs the shard_map of `f(args)` both ways and expects the same bits.
template <typename F>
void expect_same_as_reference(F f, const std::vector<Array>& args, const std::string& what) {
  TracedProgram traced = make_program(f, args);
  const Equation& equation = shard_map_equation(traced);
  ASSERT_EQ(equation.prim, prim::shard_map) << what;
  // The shard_map's operands: the traced program's inputs (the functions below pass their
  // arguments straight in) and the constants the trace hoisted out of the body.
  const Program& program = *traced.program;
  std::vector<Array> operands;
  for (VarId var : equation.inputs) {
    auto input = std::find(program.inputs.begin(), program.inputs.end(), var);
    if (input != program.inputs.end()) {
      operands.push_back(args[static_cast<size_t>(input - program.inputs.begin())]);
      continue;
    }
    auto constant = std::find(program.constants.begin(), program.constants.end(), var);
    ASSERT_NE(constant, program.constants.end()) << what << ": operand is neither";
    operands.push_back(
        program.constant_values[static_cast<size_t>(constant - program.constants.begin())]);
  }
  std::vector<Array> reference = spmd::shard_map_impl(operands, equation.params, CallSite());
  std::vector<Array> compiled =
      detail::compiled_shard_map_impl(operands, equation.params, CallSite());
  ASSERT_EQ(reference.size(), compiled.size()) << what;
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_EQ(reference[i].aval().to_string(), compiled[i].aval().to_string()) << what << " " << i;
    EXPECT_TRUE(same_bits(reference[i], compiled[i])) << what << " result " << i;
  }
}

TEST(CompiledShardMap, EveryCollectiveCaseGivesTheReferenceBits) {
  for (const CollectiveCase& c : collective_cases()) {
    Array x = sin(numbered(c.x_shape) * 0.7f);
    auto f = [&c](const std::vector<Array>& args) {
      return shard_map(unary(c.body), c.mesh, {c.in}, {c.out})(args);
    };
    expect_same_as_reference(f, {x}, c.name);
  }
}

// A data-parallel step as the trainer writes one: each device's gradient, psum'd leaf by
// leaf with the division between (so collectives and other work interleave), then an
// update that uses the summed gradients, a constant and the device's index.
std::vector<Array> data_parallel_step(const std::vector<Array>& args) {
  SpmdFunction body = [](const std::vector<Array>& in) {
    const Array& x = in[2];
    auto loss = [&x](const Array& w, const Array& b) { return tanh(matmul(x, w) + b).sum(); };
    auto [value, grads] = value_and_grad<0, 1>(loss)(in[0], in[1]);
    auto [dw, db] = grads;
    Array gw = psum(dw, "data") / 8.0f;
    Array gb = psum(db, "data") / 8.0f;
    Array total = psum(value, "data");
    Array offset = from_host<float>({0.5f, -0.25f}, Shape{2});  // a constant of the body
    Array index = axis_index("data").astype(DType::f32);
    return std::vector<Array>{in[0] - gw * 0.1f, in[1] - gb * 0.1f + offset * 0.0f, total,
                              x * index, in[1]};
  };
  PartitionSpec whole{};
  PartitionSpec rows{{"data"}, {}};
  return shard_map(body, line(), {whole, whole, rows}, {whole, whole, whole, rows, whole})(args);
}

TEST(CompiledShardMap, AnInterleavedTrainStepGivesTheReferenceBits) {
  Array w = numbered(Shape{3, 2}) * 0.1f - 0.2f;
  Array b = numbered(Shape{2}) * 0.01f;
  Array x = sin(numbered(Shape{8, 3}) * 0.3f);
  expect_same_as_reference(data_parallel_step, {w, b, x}, "data-parallel step");
}

TEST(CompiledShardMap, CutsTheBodyAtEachDepthOfCollectives) {
  Array w = numbered(Shape{3, 2}) * 0.1f - 0.2f;
  Array b = numbered(Shape{2}) * 0.01f;
  Array x = sin(numbered(Shape{8, 3}) * 0.3f);
  TracedProgram traced = make_program(data_parallel_step, std::vector<Array>{w, b, x});
  const auto& params = std::get<ShardMapParams>(shard_map_equation(traced).params);
  std::vector<detail::ShardMapSegment> segments =
      detail::plan_shard_map_segments(*params.body.program);
  // Depth 0: axis_index, then the forward and backward; depth 1: the three psums, then the
  // update. The psums share one gap although the trace interleaves them with divisions.
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].collectives_before.size(), 1u);  // axis_index
  EXPECT_EQ(segments[1].collectives_before.size(), 3u);
  ASSERT_TRUE(segments[0].executable && segments[1].executable);
  // What crosses the cut is what the psums and the update read (the two local gradients,
  // the local loss, offset * 0) and x * index, a result of the body.
  EXPECT_EQ(segments[0].outputs.size(), 5u);
}

TEST(CompiledShardMap, ABodyOfCollectivesAloneHasNoExecutable) {
  auto f = [](const std::vector<Array>& args) {
    SpmdFunction body = [](const std::vector<Array>& in) {
      return std::vector<Array>{psum(psum(in[0], "data"), "data")};
    };
    return shard_map(body, line(), {{{"data"}}}, {{}})(args);
  };
  Array x = numbered(Shape{8});
  TracedProgram traced = make_program(f, std::vector<Array>{x});
  const auto& params = std::get<ShardMapParams>(shard_map_equation(traced).params);
  std::vector<detail::ShardMapSegment> segments =
      detail::plan_shard_map_segments(*params.body.program);
  ASSERT_EQ(segments.size(), 3u);
  for (const auto& segment : segments) EXPECT_FALSE(segment.executable);
  expect_same_as_reference(f, {x}, "psum of psum");
}

TEST(CompiledShardMap, EmptyAndSizeOneShardsGiveTheReferenceBits) {
  for (const Shape& shape : {Shape{0, 3}, Shape{4, 3}, Shape{4, 0}}) {
    auto f = [](const std::vector<Array>& args) {
      SpmdFunction body = [](const std::vector<Array>& in) {
        Array local = exp(in[0]) * 2.0f;
        return std::vector<Array>{all_gather(local, "data", 0, true) + 1.0f, psum(local, "data")};
      };
      return shard_map(body, line(), {{{"data"}, {}}}, {{}, {}})(args);
    };
    expect_same_as_reference(f, {numbered(shape)}, shape.to_string());
  }
}

TEST(CompiledShardMap, NanAndInfPassThroughAsInTheReference) {
  Array x = from_host<float>({1.0f, NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f, 1e30f}, Shape{8});
  auto f = [](const std::vector<Array>& args) {
    SpmdFunction body = [](const std::vector<Array>& in) {
      return std::vector<Array>{psum(in[0] * in[0], "data"), pmax(in[0], "data")};
    };
    return shard_map(body, line(), {{{"data"}}}, {{}, {}})(args);
  };
  expect_same_as_reference(f, {x}, "non-finite");
}

}  // namespace
}  // namespace kiln::testing
