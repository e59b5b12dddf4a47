// The memory planner's steps on small parsed programs: which storage each value shares,
// when each value is live, and where buffer assignment puts each value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "jit/memory_plan.h"
#include "jit/step_plan.h"

namespace kiln {
namespace {

using detail::Liveness;
using detail::Storage;

constexpr int64_t kNever = Liveness::kNever;

// The variable equation `e`'s first result is.
VarId result_of(const Program& program, size_t e) {
  return program.equations[e].outputs[0];
}

TEST(MemoryPlanRoots, AnAliasOfAnAliasSharesTheFirstOperandsStorage) {
  Program program = parse_program(
      "{ lambda ; a:f32[2,3]. let b:f32[6] = reshape[new_sizes=(6)] a "
      "c:f32[3,2] = reshape[new_sizes=(3,2)] b d:f32[3,2] = exp c in (d) }");
  auto roots = detail::storage_roots(program, detail::plan_steps(program, false));
  const VarId a = program.inputs[0];
  EXPECT_EQ(roots[static_cast<size_t>(result_of(program, 0))], a);
  EXPECT_EQ(roots[static_cast<size_t>(result_of(program, 1))], a);
  EXPECT_EQ(roots[static_cast<size_t>(result_of(program, 2))], result_of(program, 2));
}

// c = a*b; d = exp(c); e = d + a, one step per equation.
constexpr const char* kExpChain =
    "{ lambda ; a:f32[64] b:f32[64]. let c:f32[64] = mul a b d:f32[64] = exp c "
    "e:f32[64] = add d a in (e) }";

TEST(MemoryPlanLiveness, EachValueIsLiveFromItsStepToItsLastReader) {
  Program program = parse_program(kExpChain);
  auto steps = detail::plan_steps(program, false);
  ASSERT_EQ(steps.size(), 3u);
  Liveness live = detail::compute_liveness(program, steps, detail::storage_roots(program, steps));
  const auto a = static_cast<size_t>(program.inputs[0]), b = static_cast<size_t>(program.inputs[1]);
  const auto c = static_cast<size_t>(result_of(program, 0)),
             d = static_cast<size_t>(result_of(program, 1)),
             e = static_cast<size_t>(result_of(program, 2));
  EXPECT_EQ(live.defined_at[a], kNever);
  EXPECT_EQ(live.defined_at[c], 0);
  EXPECT_EQ(live.defined_at[d], 1);
  EXPECT_EQ(live.defined_at[e], 2);
  EXPECT_EQ(live.last_use[a], 2);
  EXPECT_EQ(live.last_use[b], 0);
  EXPECT_EQ(live.last_use[c], 1);
  EXPECT_EQ(live.last_use[d], 2);
  EXPECT_EQ(live.last_use[e], kNever);
  EXPECT_TRUE(live.escapes[e]);
  EXPECT_FALSE(live.escapes[c] || live.escapes[d] || live.escapes[a]);
  for (size_t v : {a, b, c, d, e}) EXPECT_TRUE(live.read_outside_step[v]) << "v" << v;
}

TEST(MemoryPlanLiveness, AFusedValueNothingElseReadsStaysInsideItsStep) {
  Program program = parse_program(kExpChain);
  auto steps = detail::plan_steps(program, true);
  ASSERT_EQ(steps.size(), 1u);
  Liveness live = detail::compute_liveness(program, steps, detail::storage_roots(program, steps));
  const auto c = static_cast<size_t>(result_of(program, 0)),
             d = static_cast<size_t>(result_of(program, 1)),
             e = static_cast<size_t>(result_of(program, 2));
  EXPECT_EQ(live.defined_at[c], 0);
  EXPECT_EQ(live.last_use[c], 0);
  EXPECT_FALSE(live.read_outside_step[c]);
  EXPECT_FALSE(live.read_outside_step[d]);
  EXPECT_TRUE(live.read_outside_step[e]);  // returned
  EXPECT_TRUE(live.read_outside_step[static_cast<size_t>(program.inputs[0])]);
}

TEST(MemoryPlanAssignment, ALaterValueReusesTheBlockOfOneThatDied) {
  // b dies at the reduction (not elementwise: c gets a block of its own); the broadcast d
  // then fits in b's freed block, the first one in the arena.
  Program program = parse_program(
      "{ lambda ; a:f32[64]. let b:f32[64] = exp a c:f32[] = reduce_sum[axes=(0)] b "
      "d:f32[64] = broadcast_in_dim[shape=(64) broadcast_dimensions=()] c "
      "e:f32[64] = mul d a in (e) }");
  auto steps = detail::plan_steps(program, false);
  detail::MemoryPlan plan = detail::plan_memory(program, steps, {false});
  const Storage& b = plan.storage[static_cast<size_t>(result_of(program, 0))];
  const Storage& c = plan.storage[static_cast<size_t>(result_of(program, 1))];
  const Storage& d = plan.storage[static_cast<size_t>(result_of(program, 2))];
  const Storage& e = plan.storage[static_cast<size_t>(result_of(program, 3))];
  ASSERT_EQ(b.kind, Storage::Kind::kArena);
  ASSERT_EQ(d.kind, Storage::Kind::kArena);
  EXPECT_EQ(d.index, b.index);
  EXPECT_NE(c.index, b.index);
  EXPECT_EQ(e.kind, Storage::Kind::kResult);
  EXPECT_EQ(plan.arena_bytes, 256 + 64);  // b's (then d's) block and c's
  EXPECT_EQ(plan.report.num_buffers, 3);
  EXPECT_EQ(plan.report.in_place, 0);
}

TEST(MemoryPlanAssignment, AnElementwiseStepWritesOverAnOperandThatDiesThere) {
  Program program = parse_program(
      "{ lambda ; a:f32[64]. let b:f32[64] = exp a c:f32[64] = neg b "
      "d:f32[] = reduce_sum[axes=(0)] c in (d) }");
  auto steps = detail::plan_steps(program, false);
  detail::MemoryPlan plan = detail::plan_memory(program, steps, {false});
  const Storage& b = plan.storage[static_cast<size_t>(result_of(program, 0))];
  const Storage& c = plan.storage[static_cast<size_t>(result_of(program, 1))];
  ASSERT_EQ(b.kind, Storage::Kind::kArena);
  ASSERT_EQ(c.kind, Storage::Kind::kArena);
  EXPECT_EQ(c.index, b.index);
  EXPECT_EQ(plan.report.in_place, 1);
  EXPECT_EQ(plan.arena_bytes, 256);
}

TEST(MemoryPlanAssignment, AResultTakesADonatedInputReadForTheLastTimeAtItsStep) {
  Program program =
      parse_program("{ lambda ; a:f32[64] b:f32[64]. let c:f32[64] = mul a b in (c) }");
  auto steps = detail::plan_steps(program, false);
  detail::MemoryPlan donated = detail::plan_memory(program, steps, {false, true});
  ASSERT_EQ(donated.results.size(), 1u);
  EXPECT_EQ(donated.results[0].donor, 1);
  EXPECT_EQ(donated.report.donated_outputs, 1);
  EXPECT_EQ(detail::plan_memory(program, steps, {false, false}).results[0].donor, -1);
}

}  // namespace
}  // namespace kiln
