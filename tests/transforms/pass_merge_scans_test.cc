// merge_scans: value_and_grad's primal scan and the VJP's stacking scan become one loop,
// bit for bit; scans over other operands, with another loop, another body or other constant
// arrays in their bodies stay apart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "ir/program.h"
#include "kiln/control_flow.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/ids/control_flow.h"
#include "transforms/pass_test_support.h"
#include "transforms/passes/passes.h"
#include "transforms/rnn_cell.h"

namespace kiln {
namespace {

using testing::count_prim;
using testing::rnn_loss_scan;
using testing::same_results;

TEST(PassMergeScans, ValueAndGradRunsTheForwardLoopOnce) {
  Array w = zeros({3}), h0 = zeros({3}), xs = zeros({5, 3});
  Program traced = *make_program(value_and_grad(rnn_loss_scan), w, h0, xs).program;
  Program program = eliminate_common_subexpressions(traced);
  // The primal scan, the VJP's forward scan that stacks residuals, the backward scan.
  ASSERT_EQ(count_prim(program, prim::scan), 3);
  Program merged = merge_scans(program);
  EXPECT_EQ(count_prim(merged, prim::scan), 2) << print_program(merged);
  // The loss (from the primal results) and every gradient, bit for bit, NaNs included.
  EXPECT_TRUE(same_results(program, merged));
  EXPECT_EQ(count_prim(eliminate_dead_code(merged), prim::scan), 2);
}

TEST(PassMergeScans, GradAloneHasNothingToMerge) {
  // Without the value the primal scan is dead; the pass leaves both remaining scans.
  Array w = zeros({3}), h0 = zeros({3}), xs = zeros({5, 3});
  Program program = eliminate_dead_code(*make_program(grad(rnn_loss_scan), w, h0, xs).program);
  ASSERT_EQ(count_prim(program, prim::scan), 2);
  Program merged = merge_scans(program);
  EXPECT_EQ(print_program(merged), print_program(program));
}

// Two scans over (init, xs); the second's body is `second_body`, with two outputs or three.
Program two_scans(const std::string& second_body, const std::string& second_params,
                  const std::string& second_operands, const std::string& second_results) {
  return parse_program(
      "{ lambda ; a:f32[] b:f32[3] c:f32[]. let\n"
      "    d:f32[] e:f32[3] = scan[body={ lambda ; a:f32[] b:f32[]. let\n"
      "        c:f32[] = mul a b\n"
      "        d:f32[] = exp c\n"
      "      in (d c) } length=3 num_consts=0 num_carry=1 reverse=false unroll=1 "
      "recompute=false] a b\n"
      "    f:f32[] = add d 1.0:f32[]\n" +
      second_results + " = scan[body=" + second_body + " " + second_params + "] " +
      second_operands +
      "\n"
      "  in (f e g h) }");
}

const char* kWiderBody =
    "{ lambda ; a:f32[] b:f32[]. let\n"
    "        c:f32[] = mul a b\n"
    "        d:f32[] = exp c\n"
    "      in (d c a) }";
const char* kSameLoop = "length=3 num_consts=0 num_carry=1 reverse=false unroll=1 recompute=true";

TEST(PassMergeScans, AWiderBodyOverTheSameOperandsReplacesTheNarrowScan) {
  Program program = two_scans(kWiderBody, kSameLoop, "a b", "    g:f32[] h:f32[3] i:f32[3]");
  Program merged = merge_scans(program);
  EXPECT_EQ(count_prim(merged, prim::scan), 1) << print_program(merged);
  // The wide scan now stands where the narrow one did, before the add that reads it.
  EXPECT_EQ(merged.equations[0].prim, prim::scan);
  EXPECT_TRUE(same_results(program, merged));
}

TEST(PassMergeScans, OtherOperandsLoopsOrBodiesStayApart) {
  const std::string results = "    g:f32[] h:f32[3] i:f32[3]";
  // Another initial carry.
  Program other_operands = two_scans(kWiderBody, kSameLoop, "c b", results);
  EXPECT_EQ(count_prim(merge_scans(other_operands), prim::scan), 2);
  // Another direction.
  Program reversed = two_scans(
      kWiderBody, "length=3 num_consts=0 num_carry=1 reverse=true unroll=1 recompute=false", "a b",
      results);
  EXPECT_EQ(count_prim(merge_scans(reversed), prim::scan), 2);
  // The same outputs from another computation (add instead of mul).
  Program other_body = two_scans(
      "{ lambda ; a:f32[] b:f32[]. let\n"
      "        c:f32[] = add a b\n"
      "        d:f32[] = exp c\n"
      "      in (d c a) }",
      kSameLoop, "a b", results);
  EXPECT_EQ(count_prim(merge_scans(other_body), prim::scan), 2);
  // A body whose leading outputs are in another order.
  Program swapped = two_scans(
      "{ lambda ; a:f32[] b:f32[]. let\n"
      "        c:f32[] = mul a b\n"
      "        d:f32[] = exp c\n"
      "      in (c d a) }",
      kSameLoop, "a b", results);
  EXPECT_EQ(count_prim(merge_scans(swapped), prim::scan), 2);
}

// Scan `index` of `program` with its body's one constant set to `value`.
void set_body_constant(Program& program, size_t index, const Array& value) {
  auto& params = std::get<ScanParams>(program.equations[index].params);
  auto body = std::make_shared<Program>(*params.body.program);
  body->constant_values = {value};
  params.body.program = body;
}

// Two scans over the same operands whose bodies print alike: each scales the carry by a
// closed-over vector `k`, which prints as a name, not as its value.
Program scans_with_body_constants(const Array& first, const Array& second) {
  Program program = parse_program(
      "{ lambda ; a:f32[2] b:f32[3,2]. let\n"
      "    c:f32[2] d:f32[3,2] = scan[body={ lambda k:f32[2] ; a:f32[2] b:f32[2]. let\n"
      "        c:f32[2] = mul a k\n"
      "        d:f32[2] = add c b\n"
      "      in (d d) } length=3 num_consts=0 num_carry=1 reverse=false unroll=1 "
      "recompute=false] a b\n"
      "    e:f32[2] f:f32[3,2] g:f32[3,2] = scan[body={ lambda k:f32[2] ; a:f32[2] b:f32[2]. let\n"
      "        c:f32[2] = mul a k\n"
      "        d:f32[2] = add c b\n"
      "      in (d d a) } length=3 num_consts=0 num_carry=1 reverse=false unroll=1 "
      "recompute=false] a b\n"
      "  in (c d e f g) }");
  set_body_constant(program, 0, first);
  set_body_constant(program, 1, second);
  return program;
}

TEST(PassMergeScans, BodiesHoldingOtherConstantArraysStayApart) {
  Array halves = from_host<float>({0.5f, 0.5f}, {2});
  Array twos = from_host<float>({2.0f, 2.0f}, {2});
  Program different = scans_with_body_constants(halves, twos);
  Program kept = merge_scans(different);
  EXPECT_EQ(count_prim(kept, prim::scan), 2) << print_program(kept);
  EXPECT_TRUE(same_results(different, kept));
  // The very same array in both bodies: one loop.
  Program same = scans_with_body_constants(halves, halves);
  Program merged = merge_scans(same);
  EXPECT_EQ(count_prim(merged, prim::scan), 1) << print_program(merged);
  EXPECT_TRUE(same_results(same, merged));
}

}  // namespace
}  // namespace kiln
