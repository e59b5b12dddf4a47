// The steps of compiling a fused group into a vector program, on small parsed groups:
// how its tiles are used, which slot each member reads and writes, and the steps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/parser.h"
#include "jit/executable.h"
#include "jit/fused_kernel.h"
#include "jit/step_plan.h"

namespace kiln {
namespace {

using detail::equation_kernel;
using detail::FusedLoop;
using detail::ProgramSlots;
using Form = simd::ProgramStep::Form;

// The fused loop of a program that is one fused group; the program's outputs are the
// values it writes to memory.
struct Group {
  Program program;
  FusedLoop loop;
};

Group fused_group(const std::string& text) {
  Group group{parse_program(text), {}};
  const Program& program = group.program;
  auto steps = detail::plan_steps(program, true);
  EXPECT_EQ(steps.size(), 1u);
  std::vector<KernelFn> kernels;
  for (const Equation& equation : program.equations)
    kernels.push_back(equation_kernel(program, equation));
  auto returned = [&program](VarId var) {
    return std::find(program.outputs.begin(), program.outputs.end(), var) != program.outputs.end();
  };
  group.loop = FusedLoop::build(program, steps[0].equations, kernels, returned);
  return group;
}

// c = a*b; d = c + 1; e = -d; f = exp(e). Slots: externals a, b and the literal 1 (0-2),
// the export f (3), then the tiles (4...).
constexpr const char* kChain =
    "{ lambda ; a:f32[64] b:f32[64]. let c:f32[64] = mul a b d:f32[64] = add c 1.0:f32[] "
    "e:f32[64] = neg d f:f32[64] = exp e in (f) }";

TEST(FusedProgramSlots, ADeadTilesSlotIsTheNextResults) {
  Group group = fused_group(kChain);
  const FusedLoop& loop = group.loop;
  ASSERT_EQ(loop.members.size(), 4u);
  ASSERT_EQ(loop.externals.size(), 3u);
  ASSERT_EQ(loop.exports.size(), 1u);
  ProgramSlots slots = detail::allocate_slots(loop, detail::tile_uses(loop));
  ASSERT_EQ(slots.members.size(), 4u);
  EXPECT_EQ(slots.members[0].operands, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(slots.members[0].result, 4);
  // d is computed while c is still read: a second tile.
  EXPECT_EQ(slots.members[1].operands, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(slots.members[1].scalar, (std::vector<bool>{false, true}));
  EXPECT_EQ(slots.members[1].result, 5);
  // c is dead once d is computed: e takes its slot.
  EXPECT_EQ(slots.members[2].operands, (std::vector<int64_t>{5}));
  EXPECT_EQ(slots.members[2].result, 4);
  // The last result goes straight to its export's slot.
  EXPECT_EQ(slots.members[3].operands, (std::vector<int64_t>{4}));
  EXPECT_EQ(slots.members[3].result, 3);
  EXPECT_TRUE(slots.members[3].to_memory);
  EXPECT_EQ(slots.num_tiles, 2);
  EXPECT_TRUE(slots.expansions.empty());
  EXPECT_TRUE(loop.program.has_value());
}

TEST(FusedProgramSteps, OneStepPerMemberWithTheSlotsItWasGiven) {
  Group group = fused_group(kChain);
  const FusedLoop& loop = group.loop;
  auto uses = detail::tile_uses(loop);
  auto steps = detail::generate_steps(loop, uses, detail::allocate_slots(loop, uses));
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0].form, Form::kBinary);
  EXPECT_EQ(steps[1].form, Form::kBinary);
  EXPECT_TRUE(steps[1].b_scalar);
  EXPECT_FALSE(steps[1].a_scalar);
  EXPECT_EQ(steps[2].form, Form::kUnary);
  EXPECT_EQ(steps[2].op, static_cast<uint8_t>(simd::UnaryOp::kNeg));
  EXPECT_EQ(steps[3].a, 4);
  EXPECT_EQ(steps[3].y, 3);
}

TEST(FusedProgramSteps, AnExportedValueThatIsReadLaterIsCopiedOutAfterEveryStep) {
  // c is returned and read by d: it stays in its tile and goes to memory at the end.
  Group group =
      fused_group("{ lambda ; a:f32[64]. let c:f32[64] = mul a a d:f32[64] = exp c in (c d) }");
  const FusedLoop& loop = group.loop;
  auto uses = detail::tile_uses(loop);
  EXPECT_EQ(uses.last_reader[static_cast<size_t>(loop.members[0].result_tiles[0])], 1);
  ProgramSlots slots = detail::allocate_slots(loop, uses);
  EXPECT_FALSE(slots.members[0].to_memory);
  EXPECT_TRUE(slots.members[1].to_memory);
  auto steps = detail::generate_steps(loop, uses, slots);
  ASSERT_EQ(steps.size(), 3u);
  const simd::ProgramStep& copy = steps.back();
  EXPECT_EQ(copy.op, static_cast<uint8_t>(simd::UnaryOp::kCopy));
  EXPECT_EQ(copy.a, slots.members[0].result);
  const int64_t c_export = uses.export_of[static_cast<size_t>(loop.members[0].result_tiles[0])];
  EXPECT_EQ(copy.y, static_cast<int64_t>(loop.externals.size()) + c_export);
}

TEST(FusedProgramSlots, ABroadcastScalarReadByBinaryStepsIsTheElementItself) {
  // The broadcast s needs no tile: both readers take it as one repeated element. Read by a
  // unary step, it is expanded into a slot of its own.
  Group aliased = fused_group(
      "{ lambda ; a:f32[8,4] s:f32[]. let t:f32[8,4] = broadcast_in_dim[shape=(8,4) "
      "broadcast_dimensions=()] s c:f32[8,4] = mul a t d:f32[8,4] = add c t in (d) }");
  ProgramSlots slots = detail::allocate_slots(aliased.loop, detail::tile_uses(aliased.loop));
  EXPECT_TRUE(slots.members[0].result_scalar);
  EXPECT_TRUE(slots.expansions.empty());
  EXPECT_EQ(slots.scalar_externals.size(), 1u);
  EXPECT_EQ(slots.members[1].scalar, (std::vector<bool>{false, true}));

  Group expanded = fused_group(
      "{ lambda ; a:f32[8,4] s:f32[]. let t:f32[8,4] = broadcast_in_dim[shape=(8,4) "
      "broadcast_dimensions=()] s c:f32[8,4] = exp t d:f32[8,4] = mul c a in (d) }");
  slots = detail::allocate_slots(expanded.loop, detail::tile_uses(expanded.loop));
  EXPECT_FALSE(slots.members[0].result_scalar);
  ASSERT_EQ(slots.expansions.size(), 1u);
  EXPECT_EQ(slots.members[1].operands[0], slots.expansions[0].slot);
  EXPECT_FALSE(slots.members[1].scalar[0]);
}

}  // namespace
}  // namespace kiln
