// clone_broadcasts: each later elementwise reader of a cheap broadcast gets its own copy
// right before it; the first reader, non-elementwise readers, expensive broadcasts and
// outputs keep the original, and results are bit for bit those of the input program.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "prims/ids/shape.h"
#include "transforms/pass_test_support.h"
#include "transforms/passes/passes.h"

namespace kiln {
namespace {

using testing::count_prim;
using testing::same_results;

TEST(PassCloneBroadcasts, EachLaterElementwiseReaderGetsItsOwnCopy) {
  Program program = parse_program(R"({ lambda ; a:f32[] b:f32[4,8] c:bool[4,8]. let
      d:f32[4,8] = broadcast_in_dim[shape=(4,8) broadcast_dimensions=()] a
      e:f32[4,8] = add b d
      f:f32[4,8] = select c d e
      g:f32[4,8] = mul d f
    in (g d) })");
  Program result = clone_broadcasts(program);
  EXPECT_EQ(print_program(result),
            "{ lambda ; a:f32[] b:f32[4,8] c:bool[4,8]. let\n"
            "    d:f32[4,8] = broadcast_in_dim[shape=(4,8) broadcast_dimensions=()] a\n"
            "    e:f32[4,8] = add b d\n"
            "    f:f32[4,8] = broadcast_in_dim[shape=(4,8) broadcast_dimensions=()] a\n"
            "    g:f32[4,8] = select c f e\n"
            "    h:f32[4,8] = broadcast_in_dim[shape=(4,8) broadcast_dimensions=()] a\n"
            "    i:f32[4,8] = mul h g\n"
            "  in (i d) }");
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassCloneBroadcasts, ReadersThatCannotFuseAndCostlyBroadcastsKeepTheOriginal) {
  // d's second reader is a dot (not elementwise); g broadcasts a [4,4] operand to [2,4,4]
  // (half its size: not cheap), so its two readers share it.
  Program program = parse_program(R"({ lambda ; a:f32[] b:f32[4,4] c:f32[4,4]. let
      d:f32[4,4] = broadcast_in_dim[shape=(4,4) broadcast_dimensions=()] a
      e:f32[4,4] = add b d
      f:f32[4,4] = dot_general[lhs_contracting=(1) rhs_contracting=(0) lhs_batch=() rhs_batch=() preferred_element_type=none] d c
      g:f32[2,4,4] = broadcast_in_dim[shape=(2,4,4) broadcast_dimensions=(1,2)] e
      h:f32[2,4,4] = mul g g
      i:f32[2,4,4] = add g h
    in (f i) })");
  Program result = clone_broadcasts(program);
  EXPECT_EQ(count_prim(result, prim::broadcast_in_dim), 2);
  EXPECT_TRUE(same_results(program, result));
}

}  // namespace
}  // namespace kiln
