// eliminate_dead_code: dead chains and unused constants go, inputs stay (used or not),
// outputs may be inputs, constants or repeats, multi-result equations stay whole, and the
// result runs bit for bit like the input program.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/ids/binary.h"
#include "transforms/pass_test_support.h"
#include "transforms/passes/passes.h"

namespace kiln {
namespace {

using testing::count_prim;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::same_results;

TEST(PassDeadCode, RemovesDeadChainsAndKeepsUnusedInputs) {
  Program program = parse_program(R"({ lambda ; a:f32[3] b:f32[3] c:i32[]. let
      d:f32[3] = exp a
      e:f32[3] = sin d
      f:f32[3] = neg e
      g:f32[3] = mul a b
    in (g) })");
  Program result = eliminate_dead_code(program);
  EXPECT_EQ(print_program(result),
            "{ lambda ; a:f32[3] b:f32[3] c:i32[]. let\n"
            "    d:f32[3] = mul a b\n"
            "  in (d) }");
  EXPECT_TRUE(same_results(program, result));
  // The input program is not modified.
  EXPECT_EQ(program.equations.size(), 4u);
}

TEST(PassDeadCode, EverythingDeadLeavesOnlyTheSignature) {
  Program program = parse_program(R"({ lambda ; a:f32[3] b:i32[2]. let
      c:f32[3] = exp a
      d:i32[2] = neg b
    in (a) })");
  Program result = eliminate_dead_code(program);
  EXPECT_TRUE(result.equations.empty());
  ASSERT_EQ(result.inputs.size(), 2u);
  EXPECT_EQ(result.aval(result.inputs[1]).to_string(), "i32[2]");
  ASSERT_EQ(result.outputs.size(), 1u);
  EXPECT_EQ(result.outputs[0], result.inputs[0]);
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassDeadCode, OutputsMayBeInputsConstantsAndRepeats) {
  Program program = parse_program(R"({ lambda ; a:f32[3] b:f32[3]. let
      c:f32[3] = add a 2.0:f32[]
      d:f32[3] = mul b 3.0:f32[]
    in (a c c 1.0:f32[] a) })");
  Program result = eliminate_dead_code(program);
  EXPECT_EQ(count_prim(result, prim::add), 1);
  EXPECT_EQ(count_prim(result, prim::mul), 0);
  // The literal 3.0 only fed the dead mul; 2.0 and the output 1.0 stay.
  ASSERT_EQ(result.constants.size(), 2u);
  EXPECT_EQ(result.constant_values[0].item<float>(), 2.0f);
  EXPECT_EQ(result.constant_values[1].item<float>(), 1.0f);
  ASSERT_EQ(result.outputs.size(), 5u);
  EXPECT_EQ(result.outputs[0], result.inputs[0]);
  EXPECT_EQ(result.outputs[1], result.outputs[2]);
  EXPECT_EQ(result.outputs[3], result.constants[1]);
  EXPECT_EQ(result.outputs[4], result.inputs[0]);
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassDeadCode, DropsUnusedDeclaredConstantsAndKeepsTheOrderOfTheRest) {
  Program program = parse_program(R"({ lambda p:f32[3] q:f32[3] r:f32[3] ; x:f32[3]. let
      y:f32[3] = add r x
      z:f32[3] = add y p
    in (z) })");
  Program result = eliminate_dead_code(program);
  EXPECT_EQ(print_program(result),
            "{ lambda a:f32[3] b:f32[3] ; c:f32[3]. let\n"
            "    d:f32[3] = add b c\n"
            "    e:f32[3] = add d a\n"
            "  in (e) }");
  EXPECT_NO_THROW(verify(result));
}

TEST(PassDeadCode, AMultiResultEquationStaysWholeWhenOneResultIsUsed) {
  Program program = parse_program(R"({ lambda ; a:f32[5] b:i32[5]. let
      c:f32[5] d:i32[5] = sort[dimension=0 num_keys=1] a b
      e:f32[5] f:i32[5] = sort[dimension=0 num_keys=1] a b
    in (d) })");
  Program result = eliminate_dead_code(program);
  ASSERT_EQ(result.equations.size(), 1u);
  EXPECT_EQ(result.equations[0].outputs.size(), 2u);
  EXPECT_EQ(result.outputs[0], result.equations[0].outputs[1]);
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassDeadCode, KeepsSitesAndScopesOfSurvivingEquations) {
  Program program = parse_program(R"({ lambda ; a:f32[3]. let
      b:f32[3] = exp a  # mlp/dense1 @ model.cc:42
      c:f32[3] = tanh a  # dead @ model.cc:43
      d:f32[3] = neg b  # mlp @ model.cc:44
    in (d) })");
  PrintOptions options{.show_scopes = true, .show_sites = true};
  EXPECT_EQ(print_program(eliminate_dead_code(program), options),
            "{ lambda ; a:f32[3]. let\n"
            "    b:f32[3] = exp a  # mlp/dense1 @ model.cc:42\n"
            "    c:f32[3] = neg b  # mlp @ model.cc:44\n"
            "  in (c) }");
}

TEST(PassDeadCode, TracedProgramsDropClosedOverArraysOnlyDeadCodeUsed) {
  Array unused_weight = from_host<float>({1, 2, 3}, {3});
  Array bias = from_host<float>({4, 5, 6}, {3});
  auto f = [&](const Array& x, const Array& /*ignored*/) {
    Array dead = x * unused_weight;
    (void)dead;
    return exp(x) + bias;
  };
  TracedProgram traced = make_program(f, zeros({3}), zeros({2}));
  Program result = eliminate_dead_code(*traced.program);
  ASSERT_EQ(result.constants.size(), 1u);
  EXPECT_EQ(result.constant_values[0].impl(), bias.impl());
  EXPECT_EQ(result.inputs.size(), 2u);
  EXPECT_THAT(print_program(result), Not(HasSubstr("mul")));
  EXPECT_TRUE(same_results(*traced.program, result));
}

}  // namespace
}  // namespace kiln
