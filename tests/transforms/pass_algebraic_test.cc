// simplify_algebra: each exact rewrite happens (and the program still gives the original's
// bits on inputs full of -0, NaN and Inf), and each inexact one does not: x+0 and x*0 stay
// for floats, rewrites that would change a type stay, and an operand that may carry a
// run-time error is never dropped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/ids/binary.h"
#include "prims/ids/shape.h"
#include "transforms/pass_test_support.h"
#include "transforms/passes/passes.h"

namespace kiln {
namespace {

using testing::count_prim;
using testing::same_results;

// The program `{ lambda ; <inputs>. let <body> in (<outputs>) }` after simplify_algebra
// and dead code elimination, printed; checks that it still gives the original's bits.
std::string simplified(const std::string& inputs, const std::string& body,
                       const std::string& outputs) {
  Program program =
      parse_program("{ lambda ; " + inputs + ". let " + body + " in (" + outputs + ") }");
  Program result = simplify_algebra(program);
  EXPECT_TRUE(same_results(program, result)) << body;
  Program clean = eliminate_dead_code(result);
  EXPECT_TRUE(same_results(program, clean)) << body;
  return print_program(clean);
}

// Whether the one equation of `body` over input a (type `type`) was rewritten away.
bool removed(const std::string& type, const std::string& body) {
  std::string text = simplified("a:" + type, body, "b");
  return text == "{ lambda ; a:" + type + ". let\n  in (a) }";
}

TEST(PassAlgebraic, TheBitComparisonCatchesAWrongPlusZeroRewrite) {
  // What simplify_algebra must not do: x+0 -> x turns an input -0 into -0 instead of +0.
  // The random inputs hold -0, so the comparison the other tests rely on sees it.
  Program program = parse_program("{ lambda ; a:f32[16]. let b:f32[16] = add a 0.0:f32[] in (b) }");
  Program wrong = parse_program("{ lambda ; a:f32[16]. let in (a) }");
  EXPECT_FALSE(same_results(program, wrong));
  EXPECT_TRUE(same_results(program, program));
}

TEST(PassAlgebraic, MultiplyAndDivideByOneForEveryDtype) {
  for (std::string t : {"f32", "f64", "f16", "bf16", "i32", "u8", "i64", "u32"}) {
    std::string one = (t[0] == 'f' || t[0] == 'b') ? "1.0" : "1";
    EXPECT_TRUE(removed(t + "[6]", "b:" + t + "[6] = mul a " + one + ":" + t + "[]")) << t;
    EXPECT_TRUE(removed(t + "[6]", "b:" + t + "[6] = mul " + one + ":" + t + "[] a")) << t;
    EXPECT_TRUE(removed(t + "[6]", "b:" + t + "[6] = div a " + one + ":" + t + "[]")) << t;
    // 1/x is not x.
    EXPECT_FALSE(removed(t + "[6]", "b:" + t + "[6] = div " + one + ":" + t + "[] a")) << t;
  }
}

TEST(PassAlgebraic, SignedZerosDecideAddAndSubtractForFloats) {
  for (std::string t : {"f32", "f64", "f16", "bf16"}) {
    std::string b = "b:" + t + "[8] = ";
    EXPECT_TRUE(removed(t + "[8]", b + "sub a 0.0:" + t + "[]")) << t;
    EXPECT_TRUE(removed(t + "[8]", b + "add a -0.0:" + t + "[]")) << t;
    EXPECT_TRUE(removed(t + "[8]", b + "add -0.0:" + t + "[] a")) << t;
    // -0 + +0 = +0 and -0 - -0 = +0: these stay.
    EXPECT_FALSE(removed(t + "[8]", b + "add a 0.0:" + t + "[]")) << t;
    EXPECT_FALSE(removed(t + "[8]", b + "add 0.0:" + t + "[] a")) << t;
    EXPECT_FALSE(removed(t + "[8]", b + "sub a -0.0:" + t + "[]")) << t;
    EXPECT_FALSE(removed(t + "[8]", b + "sub 0.0:" + t + "[] a")) << t;
    // NaN * 0 is NaN and -1 * 0 is -0: x*0 stays for floats.
    EXPECT_FALSE(removed(t + "[8]", b + "mul a 0.0:" + t + "[]")) << t;
  }
}

TEST(PassAlgebraic, IntegerAddAndSubtractZero) {
  for (std::string t : {"i32", "i64", "u8", "u32"}) {
    std::string b = "b:" + t + "[5] = ";
    EXPECT_TRUE(removed(t + "[5]", b + "add a 0:" + t + "[]")) << t;
    EXPECT_TRUE(removed(t + "[5]", b + "add 0:" + t + "[] a")) << t;
    EXPECT_TRUE(removed(t + "[5]", b + "sub a 0:" + t + "[]")) << t;
    EXPECT_FALSE(removed(t + "[5]", b + "sub 0:" + t + "[] a")) << t;
  }
}

TEST(PassAlgebraic, IntegerTimesZeroIsZeros) {
  EXPECT_EQ(simplified("a:i32[2,3]", "b:i32[2,3] = mul a 0:i32[]", "b"),
            "{ lambda ; a:i32[2,3]. let\n"
            "    b:i32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=()] 0:i32[]\n"
            "  in (b) }");
  // A zero constant of the result's own type is used as it is.
  EXPECT_EQ(simplified("a:u8[]", "b:u8[] = mul 0:u8[] a", "b"),
            "{ lambda ; a:u8[]. let\n"
            "  in (0:u8[]) }");
  // A weak result keeps its weak type.
  EXPECT_EQ(simplified("a:i32~[4]", "b:i32~[4] = mul a 0:i32~[]", "b"),
            "{ lambda ; a:i32~[4]. let\n"
            "    b:i32~[4] = broadcast_in_dim[shape=(4) broadcast_dimensions=()] 0:i32~[]\n"
            "  in (b) }");
}

TEST(PassAlgebraic, AnOperandThatMayFailAtRunTimeIsNotDropped) {
  // Integer division may divide by zero; eagerly the error reaches x*0's result, so the
  // multiplication stays (same_results checks that both programs raise the same error).
  std::string text =
      simplified("a:i32[4] b:i32[4]", "c:i32[4] = div a b  d:i32[4] = mul c 0:i32[]", "d");
  EXPECT_NE(text.find("mul c 0:i32[]"), std::string::npos) << text;
  // select(p, x, x) keeps a predicate computed from a gather in mode error.
  text = simplified("a:i32[4] b:f32[3]",
                    "c:i32[4] = gather[axis=0 batch_dims=0 mode=error] a a "
                    "d:bool[4] = gt c 0:i32[] "
                    "e:f32[4] = broadcast_in_dim[shape=(4) broadcast_dimensions=()] 1.0:f32[] "
                    "f:f32[4] = select d e e",
                    "f");
  EXPECT_NE(text.find("select"), std::string::npos) << text;
  // ...but drops one that cannot fail.
  text = simplified("a:bool[4] b:f32[4]", "c:f32[4] = select a b b", "c");
  EXPECT_EQ(text, "{ lambda ; a:bool[4] b:f32[4]. let\n  in (b) }");
}

// An exact elementwise equation over rank-0 values and their broadcasts has one value in
// every element: computed once and broadcast, so that no full-size array ties its readers'
// loops together (the GPT-2 step's micro-batches, docs/memory.md).
TEST(PassAlgebraic, AValueTheSameInEveryElementIsComputedOnceAndBroadcast) {
  EXPECT_EQ(simplified("a:f32[]",
                       "b:f32[4,8] = broadcast_in_dim[shape=(4,8) broadcast_dimensions=()] a "
                       "c:f32[4,8] = mul b 0.5:f32[]",
                       "c"),
            "{ lambda ; a:f32[]. let\n"
            "    b:f32[] = mul a 0.5:f32[]\n"
            "    c:f32[4,8] = broadcast_in_dim[shape=(4,8) broadcast_dimensions=()] b\n"
            "  in (c) }");
  // Chains and selections collapse to rank-0 work and one broadcast.
  std::string chain =
      simplified("a:f32[] p:bool[]",
                 "b:f32[6] = broadcast_in_dim[shape=(6) broadcast_dimensions=()] a "
                 "c:bool[6] = broadcast_in_dim[shape=(6) broadcast_dimensions=()] p "
                 "d:f32[6] = neg b  e:f32[6] = select c b d  f:f32[6] = max e -0.0:f32[]",
                 "f");
  EXPECT_EQ(std::count(chain.begin(), chain.end(), '\n'), 5) << chain;
  EXPECT_NE(chain.find("f:f32[6] = broadcast_in_dim"), std::string::npos) << chain;
  // Not: an operand that varies by element, a broadcast of more than one value, and an
  // operation whose result a kernel may round in its own way (tanh).
  EXPECT_NE(simplified("a:f32[] x:f32[4]",
                       "b:f32[4] = broadcast_in_dim[shape=(4) broadcast_dimensions=()] a "
                       "c:f32[4] = mul b x",
                       "c")
                .find("f32[4] = mul"),
            std::string::npos);
  EXPECT_NE(simplified("a:f32[4]",
                       "b:f32[2,4] = broadcast_in_dim[shape=(2,4) broadcast_dimensions=(1)] a "
                       "c:f32[2,4] = mul b 2.0:f32[]",
                       "c")
                .find("c:f32[2,4] = mul b 2.0:f32[]"),
            std::string::npos);
  EXPECT_NE(simplified("a:f32[]",
                       "b:f32[4] = broadcast_in_dim[shape=(4) broadcast_dimensions=()] a "
                       "c:f32[4] = tanh b",
                       "c")
                .find("c:f32[4] = tanh b"),
            std::string::npos);
}

TEST(PassAlgebraic, BitwiseAndLogicalIdentities) {
  EXPECT_TRUE(removed("i32[4]", "b:i32[4] = or a 0:i32[]"));
  EXPECT_TRUE(removed("u32[4]", "b:u32[4] = xor 0:u32[] a"));
  EXPECT_TRUE(removed("i32[4]", "b:i32[4] = and a -1:i32[]"));
  EXPECT_TRUE(removed("u8[4]", "b:u8[4] = and 255:u8[] a"));
  EXPECT_FALSE(removed("u8[4]", "b:u8[4] = and a 1:u8[]"));
  EXPECT_TRUE(removed("bool[4]", "b:bool[4] = and a true:bool[]"));
  EXPECT_TRUE(removed("bool[4]", "b:bool[4] = or false:bool[] a"));
  EXPECT_TRUE(removed("bool[4]", "b:bool[4] = xor a false:bool[]"));
  EXPECT_FALSE(removed("bool[4]", "b:bool[4] = or a true:bool[]"));
  for (std::string shift : {"shift_left", "shift_right_logical", "shift_right_arithmetic"}) {
    EXPECT_TRUE(removed("i32[4]", "b:i32[4] = " + shift + " a 0:i32[]")) << shift;
    EXPECT_FALSE(removed("i32[4]", "b:i32[4] = " + shift + " a 1:i32[]")) << shift;
  }
}

TEST(PassAlgebraic, DoubleNegationCollapsesAlongChains) {
  EXPECT_TRUE(removed("f32[5]", "c:f32[5] = neg a  b:f32[5] = neg c"));
  EXPECT_TRUE(removed("i32[5]", "c:i32[5] = neg a  b:i32[5] = neg c"));
  EXPECT_TRUE(removed("f32[5]",
                      "c:f32[5] = neg a d:f32[5] = neg c e:f32[5] = neg d "
                      "b:f32[5] = neg e"));
  EXPECT_EQ(simplified("a:f32[5]", "b:f32[5] = neg a c:f32[5] = neg b d:f32[5] = neg c", "d"),
            "{ lambda ; a:f32[5]. let\n"
            "    b:f32[5] = neg a\n"
            "  in (b) }");
}

TEST(PassAlgebraic, ConversionsToTheSameType) {
  EXPECT_TRUE(removed("f32[3]", "b:f32[3] = convert_element_type[new_dtype=f32] a"));
  EXPECT_TRUE(removed("u32[3]", "b:u32[3] = bitcast_convert_type[new_dtype=u32] a"));
  // Converting a weak value to its own dtype makes it strong: a different type, kept.
  EXPECT_FALSE(removed("f32~[3]", "b:f32[3] = convert_element_type[new_dtype=f32] a"));
}

TEST(PassAlgebraic, ReshapesTransposesAndBroadcastsToTheSameShape) {
  EXPECT_TRUE(removed("f32[2,3]", "b:f32[2,3] = reshape[new_sizes=(2,3)] a"));
  EXPECT_TRUE(removed("f32[2,3]", "b:f32[2,3] = transpose[permutation=(0,1)] a"));
  EXPECT_TRUE(removed("f32[2,3]",
                      "b:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(0,1)] a"));
  EXPECT_FALSE(removed("f32[1,3]",
                       "b:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(0,1)] a"));
  EXPECT_TRUE(removed("f32[2,3]",
                      "c:f32[6] = reshape[new_sizes=(6)] a "
                      "b:f32[2,3] = reshape[new_sizes=(2,3)] c"));
  EXPECT_TRUE(removed("f32[2,3,4]",
                      "c:f32[3,4,2] = transpose[permutation=(1,2,0)] a "
                      "b:f32[2,3,4] = transpose[permutation=(2,0,1)] c"));
}

TEST(PassAlgebraic, ReshapeOfReshapeAndTransposeOfTransposeBecomeOne) {
  EXPECT_EQ(simplified("a:f32[2,3,4]",
                       "b:f32[6,4] = reshape[new_sizes=(6,4)] a "
                       "c:f32[24] = reshape[new_sizes=(24)] b",
                       "c"),
            "{ lambda ; a:f32[2,3,4]. let\n"
            "    b:f32[24] = reshape[new_sizes=(24)] a\n"
            "  in (b) }");
  // Output axis i of the pair is input axis p[q[i]]: (1,2,0) then (1,0,2) is (2,1,0).
  EXPECT_EQ(simplified("a:f32[2,3,4]",
                       "b:f32[3,4,2] = transpose[permutation=(1,2,0)] a "
                       "c:f32[4,3,2] = transpose[permutation=(1,0,2)] b",
                       "c"),
            "{ lambda ; a:f32[2,3,4]. let\n"
            "    b:f32[4,3,2] = transpose[permutation=(2,1,0)] a\n"
            "  in (b) }");
}

TEST(PassAlgebraic, SelectWithEqualBranchesOrAConstantPredicate) {
  EXPECT_TRUE(removed("f32[4]", "b:f32[4] = select true:bool[] a 2.0:f32[]"));
  EXPECT_EQ(simplified("a:f32[4]", "b:f32[4] = select false:bool[] 2.0:f32[] a", "b"),
            "{ lambda ; a:f32[4]. let\n  in (a) }");
  // A predicate that broadcasts the branches changes the shape: kept.
  std::string text = simplified("a:f32[] c:bool[4]", "b:f32[4] = select c a a", "b");
  EXPECT_NE(text.find("select b a a"), std::string::npos) << text;
}

TEST(PassAlgebraic, CopiesThatMoveNothing) {
  EXPECT_TRUE(removed("f32[2,3]",
                      "b:f32[2,3] = slice[start_indices=(0,0) limit_indices=(2,3) strides=()] a"));
  EXPECT_TRUE(removed(
      "f32[2,3]", "b:f32[2,3] = slice[start_indices=(0,0) limit_indices=(2,3) strides=(1,1)] a"));
  EXPECT_FALSE(removed("f32[2,3]",
                       "b:f32[2,2] = slice[start_indices=(0,1) limit_indices=(2,3) strides=()] a"));
  EXPECT_TRUE(removed("f32[2,3]",
                      "b:f32[2,3] = pad[low=(0,0) high=(0,0) interior=(0,0)] a "
                      "0.0:f32[]"));
  EXPECT_TRUE(removed("f32[2,3]", "b:f32[2,3] = concatenate[dimension=0] a"));
  EXPECT_TRUE(removed("f32[2,3]",
                      "c:i32[2] = iota[dtype=i32 shape=(2) dimension=0] "
                      "b:f32[2,3] = dynamic_slice[slice_sizes=(2,3)] a c"));
}

TEST(PassAlgebraic, ARewriteThatWouldChangeTheTypeIsNotMade) {
  // x*1 where the 1 broadcasts x to a larger shape.
  EXPECT_EQ(simplified("a:f32[1,3]",
                       "c:f32[2,3] = broadcast_in_dim[shape=(2,3) "
                       "broadcast_dimensions=()] 1.0:f32[] b:f32[2,3] = mul a c",
                       "b"),
            "{ lambda ; a:f32[1,3]. let\n"
            "    b:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=()] 1.0:f32[]\n"
            "    c:f32[2,3] = mul a b\n"
            "  in (c) }");
  // x*1 where x is weak and the 1 is not: the result is strong.
  EXPECT_FALSE(removed("f32~[3]", "b:f32[3] = mul a 1.0:f32[]"));
  EXPECT_TRUE(removed("f32~[3]", "b:f32~[3] = mul a 1.0:f32~[]"));
}

TEST(PassAlgebraic, TracedScaleByOneAndSplatConstants) {
  Array ones_table = ones({3, 4});
  auto f = [&](const Array& x) { return transpose(transpose(x * 1.0)) * ones_table; };
  TracedProgram traced = make_program(f, zeros({3, 4}));
  Program result = eliminate_dead_code(simplify_algebra(*traced.program));
  EXPECT_EQ(count_prim(result, prim::mul), 0) << print_program(result);
  EXPECT_EQ(count_prim(result, prim::transpose), 0) << print_program(result);
  EXPECT_TRUE(same_results(*traced.program, result));
}

TEST(PassAlgebraic, KeepsSitesAndScopesAndLeavesTheInputUnchanged) {
  Program program = parse_program(R"({ lambda ; a:f32[3]. let
      b:f32[3] = mul a 1.0:f32[]  # one @ f.cc:1
      c:f32[3] = exp b  # two @ f.cc:2
    in (c) })");
  std::string before = print_program(program);
  PrintOptions options{.show_scopes = true, .show_sites = true};
  EXPECT_EQ(print_program(simplify_algebra(program), options),
            "{ lambda ; a:f32[3]. let\n"
            "    b:f32[3] = exp a  # two @ f.cc:2\n"
            "  in (b) }");
  EXPECT_EQ(print_program(program), before);
}

TEST(PassAlgebraic, NothingLooksThroughAnOptimizationBarrier) {
  std::string text = simplified(
      "a:f32[3]", "c:f32[3] = neg a d:f32[3] = optimization_barrier c e:f32[3] = neg d", "e");
  EXPECT_NE(text.find("optimization_barrier"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4) << text;  // all three stay
  text = simplified("a:f32[3]", "b:f32[] = optimization_barrier 1.0:f32[] c:f32[3] = mul a b", "c");
  EXPECT_NE(text.find("mul a b"), std::string::npos) << text;
  // A barrier whose result is used by an identity rewrite is not removed either.
  EXPECT_FALSE(removed("f32[3]",
                       "c:f32[3] = optimization_barrier a "
                       "b:f32[3] = mul c 1.0:f32[]"));
}

}  // namespace
}  // namespace kiln
