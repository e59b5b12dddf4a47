// eliminate_common_subexpressions: equal computations merge (and chains of them, one
// merge enabling the next); different params, operands or operand order do not; constants
// that are the same array or equal small values merge; the result runs bit for bit like
// the input program.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/program.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/ids/binary.h"
#include "prims/ids/shape.h"
#include "prims/ids/sort.h"
#include "prims/ids/unary.h"
#include "transforms/pass_test_support.h"
#include "transforms/passes/passes.h"

namespace kiln {
namespace {

using testing::count_prim;
using testing::same_results;

TEST(PassCse, MergesEqualEquations) {
  Program program = parse_program(R"({ lambda ; a:f32[4]. let
      b:f32[4] = exp a
      c:f32[4] = exp a
      d:f32[4] = add b c
    in (d c) })");
  Program result = eliminate_common_subexpressions(program);
  EXPECT_EQ(print_program(result),
            "{ lambda ; a:f32[4]. let\n"
            "    b:f32[4] = exp a\n"
            "    c:f32[4] = add b b\n"
            "  in (c b) }");
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassCse, MergingOneEquationLetsItsUsersMerge) {
  Program program = parse_program(R"({ lambda ; a:f32[4] b:f32[4]. let
      c:f32[4] = mul a b
      d:f32[4] = mul a b
      e:f32[4] = sin c
      f:f32[4] = sin d
      g:f32[4] = neg e
      h:f32[4] = neg f
      i:f32[4] = sub g h
    in (i) })");
  Program result = eliminate_common_subexpressions(program);
  EXPECT_EQ(print_program(result),
            "{ lambda ; a:f32[4] b:f32[4]. let\n"
            "    c:f32[4] = mul a b\n"
            "    d:f32[4] = sin c\n"
            "    e:f32[4] = neg d\n"
            "    f:f32[4] = sub e e\n"
            "  in (f) }");
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassCse, DifferentParamsPrimitivesOrOperandOrderDoNotMerge) {
  Program program = parse_program(R"({ lambda ; a:f32[2,3] b:f32[2,3]. let
      c:f32[3] = reduce_sum[axes=(0)] a
      d:f32[2] = reduce_sum[axes=(1)] a
      e:f64[2,3] = convert_element_type[new_dtype=f64] a
      f:f16[2,3] = convert_element_type[new_dtype=f16] a
      g:f32[2,3] = sub a b
      h:f32[2,3] = sub b a
      i:f32[2,3] = exp a
      j:f32[2,3] = log a
      k:f32[2,3] = add a b
      l:f32[2,3] = add b a
    in (c d e f g h i j k l) })");
  Program result = eliminate_common_subexpressions(program);
  EXPECT_EQ(result.equations.size(), program.equations.size());
  EXPECT_EQ(print_program(result), print_program(program));
}

TEST(PassCse, MergesOperandlessAndMultiResultEquations) {
  Program program = parse_program(R"({ lambda ; a:f32[5]. let
      b:i32[5] = iota[dtype=i32 shape=(5) dimension=0]
      c:i32[5] = iota[dtype=i32 shape=(5) dimension=0]
      d:i32[6] = iota[dtype=i32 shape=(6) dimension=0]
      e:f32[5] f:i32[5] = sort[dimension=0 num_keys=1] a b
      g:f32[5] h:i32[5] = sort[dimension=0 num_keys=1] a c
    in (e f g h d) })");
  Program result = eliminate_common_subexpressions(program);
  EXPECT_EQ(count_prim(result, prim::iota), 2);
  EXPECT_EQ(count_prim(result, prim::sort), 1);
  EXPECT_EQ(result.outputs[0], result.outputs[2]);
  EXPECT_EQ(result.outputs[1], result.outputs[3]);
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassCse, MergesConstantsThatAreOneArray) {
  Array table = from_host<float>({1, 2, 3, 4}, {4});
  ProgramBuilder builder;
  VarId x = builder.add_input(AbstractValue(Shape{4}, DType::f32));
  VarId first = builder.add_constant(table);
  VarId second = builder.add_constant(table);
  VarId a = builder.add_equation(prim::mul, {x, first}, NoParams{})[0];
  VarId b = builder.add_equation(prim::mul, {x, second}, NoParams{})[0];
  builder.set_outputs({a, b});
  Program program = builder.take();
  Program result = eliminate_common_subexpressions(program);
  ASSERT_EQ(result.constants.size(), 1u);
  EXPECT_EQ(result.constant_values[0].impl(), table.impl());
  EXPECT_EQ(count_prim(result, prim::mul), 1);
  EXPECT_EQ(result.outputs[0], result.outputs[1]);
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassCse, MergesEqualLiteralsButNotSignedZerosOrWeakAndStrongTypes) {
  Program program = parse_program(R"({ lambda ; a:f32[3]. let
      b:f32[3] = mul a 2.0:f32[]
      c:f32[3] = mul a 2.0:f32[]
      d:f32[3] = add a 0.0:f32[]
      e:f32[3] = add a -0.0:f32[]
      f:f32[3] = mul a 2.0:f32~[]
    in (b c d e f) })");
  ASSERT_EQ(program.constants.size(), 5u);
  Program result = eliminate_common_subexpressions(program);
  EXPECT_EQ(result.constants.size(), 4u);
  EXPECT_EQ(count_prim(result, prim::mul), 2);
  EXPECT_EQ(count_prim(result, prim::add), 2);
  EXPECT_EQ(result.outputs[0], result.outputs[1]);
  EXPECT_NE(result.outputs[2], result.outputs[3]);
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassCse, TracedRepeatsOfOneExpressionMerge) {
  auto f = [](const Array& x) { return tanh(x * 2.0) + tanh(x * 2.0); };
  TracedProgram traced = make_program(f, zeros({8}));
  ASSERT_EQ(count_prim(*traced.program, prim::tanh), 2);
  Program result = eliminate_common_subexpressions(*traced.program);
  EXPECT_EQ(count_prim(result, prim::tanh), 1);
  EXPECT_EQ(count_prim(result, prim::mul), 1);
  EXPECT_TRUE(same_results(*traced.program, result));
}

TEST(PassCse, TheKeptEquationKeepsItsSiteAndScope) {
  Program program = parse_program(R"({ lambda ; a:f32[3]. let
      b:f32[3] = exp a  # first @ f.cc:1
      c:f32[3] = exp a  # second @ f.cc:2
      d:f32[3] = add b c  # third @ f.cc:3
    in (d) })");
  PrintOptions options{.show_scopes = true, .show_sites = true};
  EXPECT_EQ(print_program(eliminate_common_subexpressions(program), options),
            "{ lambda ; a:f32[3]. let\n"
            "    b:f32[3] = exp a  # first @ f.cc:1\n"
            "    c:f32[3] = add b b  # third @ f.cc:3\n"
            "  in (c) }");
}

TEST(PassCse, OptimizationBarriersAreNeverMerged) {
  // Two barriers over one value keep a recomputation apart from the original (checkpoint).
  Program program = parse_program(R"({ lambda ; a:f32[3]. let
      b:f32[3] = optimization_barrier a
      c:f32[3] = optimization_barrier a
      d:f32[3] = exp b
      e:f32[3] = exp c
    in (d e) })");
  Program result = eliminate_common_subexpressions(program);
  EXPECT_EQ(print_program(result), print_program(program));
  EXPECT_TRUE(same_results(program, result));
}

}  // namespace
}  // namespace kiln
