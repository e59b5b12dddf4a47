// The program verifier: well-formed programs pass; each kind of malformed program (made
// by hand here, as a buggy transformation might) fails naming the equation and its line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/ir_errors.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/ids/binary.h"
#include "prims/ids/unary.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::verify_error;

const AbstractValue kF32x3({3}, DType::f32);

// { lambda ; a:f32[3] b:f32[3]. let c:f32[3] = add a b  d:f32[3] = neg c in (d) }
Program add_neg() {
  ProgramBuilder builder;
  VarId a = builder.add_input(kF32x3);
  VarId b = builder.add_input(kF32x3);
  VarId c = builder.add_equation(prim::add, {a, b}, NoParams{})[0];
  VarId d = builder.add_equation(prim::neg, {c}, NoParams{})[0];
  builder.set_outputs({d});
  return builder.take();
}

TEST(Verify, TracedProgramsPass) {
  auto f = [](const Array& x, const Array& w) { return sum(tanh(matmul(x, w)) * 2.0, {1}); };
  TracedProgram traced = make_program(f, zeros({4, 3}), zeros({3, 5}));
  EXPECT_EQ(verify_error(*traced.program), "");
  EXPECT_EQ(verify_error(add_neg()), "");
}

TEST(Verify, OperandUsedBeforeItIsDefined) {
  Program program = add_neg();
  std::swap(program.equations[0], program.equations[1]);
  EXPECT_EQ(verify_error(program),
            "verify: equation 0 (neg): operand 0 is used before it is defined\n"
            "    c:f32[3] = neg d");
}

TEST(Verify, ResultDefinedTwice) {
  Program program = add_neg();
  program.equations[1].outputs[0] = program.equations[0].outputs[0];
  EXPECT_EQ(verify_error(program),
            "verify: equation 1 (neg): result 0 is already defined by equation 0\n"
            "    c:f32[3] = neg c");
  Program shadowing = add_neg();
  shadowing.equations[0].outputs[0] = shadowing.inputs[1];
  shadowing.equations[1].inputs[0] = shadowing.inputs[1];
  EXPECT_THAT(verify_error(shadowing),
              HasSubstr("equation 0 (add): result 0 is already defined as a constant or input"));
}

TEST(Verify, InputDefinedTwice) {
  Program program = add_neg();
  program.inputs[1] = program.inputs[0];
  EXPECT_EQ(verify_error(program),
            "verify: input 1 (variable #0) is already defined as a constant or input");
}

TEST(Verify, RecordedTypeDisagreesWithTheShapeRule) {
  Program program = add_neg();
  VarId wrong = program.add_var(AbstractValue({3}, DType::f64));
  program.equations[1].outputs[0] = wrong;
  program.outputs[0] = wrong;
  EXPECT_EQ(verify_error(program),
            "verify: equation 1 (neg): result 0 is recorded as f64[3], but neg gives f32[3]\n"
            "    d:f64[3] = neg c");
}

TEST(Verify, WrongNumberOfResults) {
  Program program = add_neg();
  program.equations[1].outputs.push_back(program.add_var(kF32x3));
  EXPECT_EQ(verify_error(program),
            "verify: equation 1 (neg): has 2 result(s), but neg gives 1\n"
            "    d:f32[3] e:f32[3] = neg c");
}

TEST(Verify, WrongParamsKind) {
  Program program = add_neg();
  program.equations[1].params = ReduceParams{{0}};
  EXPECT_EQ(verify_error(program),
            "verify: equation 1 (neg): has params (axes), but neg takes no params\n"
            "    d:f32[3] = neg[axes=(0)] c");
}

TEST(Verify, WrongArity) {
  Program program = add_neg();
  program.equations[0].inputs.pop_back();
  EXPECT_EQ(verify_error(program),
            "verify: equation 0 (add): has 1 operand(s), but add takes 2\n"
            "    c:f32[3] = add a");
}

TEST(Verify, ShapeRuleRejectsTheOperands) {
  Program program = add_neg();
  program.inputs[1] = program.add_var(AbstractValue({4}, DType::f32));
  program.equations[0].inputs[1] = program.inputs[1];
  EXPECT_THAT(verify_error(program),
              HasSubstr("verify: equation 0 (add): the shape rule rejects it: add: "));
  EXPECT_THAT(verify_error(program), HasSubstr("\n    c:f32[3] = add a b"));
}

TEST(Verify, OutputNeverDefined) {
  Program program = add_neg();
  program.outputs.push_back(program.add_var(kF32x3));
  EXPECT_EQ(verify_error(program), "verify: output 1 (variable #4) is never defined");
}

TEST(Verify, NumbersOutOfRange) {
  Program program = add_neg();
  program.equations[1].inputs[0] = 17;
  EXPECT_EQ(verify_error(program),
            "verify: operand 0 of equation 1 is variable #17, but the program has 4 variables");
  Program bad_prim = add_neg();
  bad_prim.equations[0].prim = prim_id(Family::kSpmd, kMaxRowsPerFamily - 1);
  EXPECT_THAT(verify_error(bad_prim), HasSubstr("verify: equation 0 has primitive id"));
}

TEST(Verify, ConstantValueDisagreesWithItsType) {
  ProgramBuilder builder;
  VarId c = builder.add_constant(from_host<float>({1, 2, 3}, {3}));
  builder.set_outputs({c});
  Program program = builder.take();
  program.constant_values[0] = from_host<float>({1, 2}, {2});
  EXPECT_EQ(verify_error(program), "verify: constant 0 is declared f32[3] but its value is f32[2]");
}

TEST(Verify, ErrorsPointAtTheEquationsSite) {
  Program program = add_neg();
  program.equations[0].site = CallSite("model.cc", 12);
  program.equations[0].inputs.pop_back();
  try {
    verify(program);
    ADD_FAILURE() << "verify passed";
  } catch (const Error& error) {
    EXPECT_EQ(error.site().to_string(), "model.cc:12");
  }
}

}  // namespace
}  // namespace kiln
