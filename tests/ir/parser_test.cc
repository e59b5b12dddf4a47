// Parsing program text: what is accepted (spacing, literals, comments with scopes and
// sites, reserved words) and one test per class of error, each with its exact message,
// line and column.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ir/ir_errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kiln/ops.h"
#include "prims/ids/unary.h"
#include "transforms/eval.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::parse_error;

std::string round_trip(std::string_view text, const PrintOptions& options = {}) {
  Program program = parse_program(text);
  verify(program);
  return print_program(program, options);
}

constexpr std::string_view kMatmul =
    "{ lambda ; a:f32[2,3] b:f32[3,4]. let\n"
    "    c:f32[2,4] = dot_general[lhs_contracting=(1) rhs_contracting=(0) lhs_batch=() "
    "rhs_batch=() preferred_element_type=none] a b\n"
    "  in (c) }";

TEST(Parse, PrintedTextReadsBackIdentically) {
  EXPECT_EQ(round_trip(kMatmul), kMatmul);
}

TEST(Parse, SpacingLineBreaksAndNamesAreFree) {
  std::string_view text =
      "{lambda;x:f32[2,3]   y:f32[3,4].let c_1:f32[2,4]=dot_general[rhs_batch=() "
      "lhs_contracting=(1)\n rhs_contracting=( 0 ) lhs_batch=() preferred_element_type=none]x y "
      "in(c_1)}";
  EXPECT_EQ(round_trip(text), kMatmul);
}

TEST(Parse, ProgramWithOnlyLiteralsRuns) {
  Program program = parse_program(
      "{ lambda ; . let a:f32[] = add 2.0:f32[] 3.5:f32[] b:i32[] = mul 6:i32[] -7:i32[] "
      "in (a b) }");
  std::vector<Array> out = eval_program(program, {}, CallSite());
  EXPECT_EQ(out[0].item<float>(), 5.5f);
  EXPECT_EQ(out[1].item<int32_t>(), -42);
}

TEST(Parse, LiteralsOfEveryDType) {
  std::string_view text =
      "{ lambda ; . let\n"
      "  in (true:bool[] 200:u8[] -7:i32[] -9007199254740993:i64[] 4294967295:u32[] "
      "0.1:f16[] 0.1:bf16[] 0.1:f32~[] 0.1:f64[] nan:f32[] -inf:f64[] inf:bf16[] -0.0:f32[] "
      "1e-45:f32[] 3:f32[]) }";
  Program program = parse_program(text);
  std::vector<Array> out = eval_program(program, {}, CallSite());
  ASSERT_EQ(out.size(), 15u);
  EXPECT_EQ(out[0].item<bool>(), true);
  EXPECT_EQ(out[1].item<int64_t>(), 200);
  EXPECT_EQ(out[2].item<int64_t>(), -7);
  EXPECT_EQ(out[3].to_vector<int64_t>()[0], -9007199254740993LL);  // not a double
  EXPECT_EQ(out[4].item<uint64_t>(), 4294967295u);
  EXPECT_EQ(out[5].to_vector<f16>()[0], f16::from_float(0.1f));
  EXPECT_EQ(out[6].to_vector<bf16>()[0], bf16::from_float(0.1f));
  EXPECT_TRUE(out[7].weak_type());
  EXPECT_EQ(out[7].item<float>(), 0.1f);
  EXPECT_EQ(out[8].item<double>(), 0.1);
  EXPECT_TRUE(std::isnan(out[9].item<float>()));
  EXPECT_EQ(out[10].item<double>(), -INFINITY);
  EXPECT_EQ(out[11].item<float>(), INFINITY);
  EXPECT_TRUE(std::signbit(out[12].item<float>()));
  EXPECT_EQ(out[13].item<float>(), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(out[14].item<float>(), 3.0f);
  // The canonical text: 16-bit floats print as the shortest float of their value.
  std::string printed = print_program(program);
  EXPECT_EQ(printed,
            "{ lambda ; . let\n"
            "  in (true:bool[] 200:u8[] -7:i32[] -9007199254740993:i64[] 4294967295:u32[] "
            "0.099975586:f16[] 0.100097656:bf16[] 0.1:f32~[] 0.1:f64[] nan:f32[] -inf:f64[] "
            "inf:bf16[] -0.0:f32[] 1e-45:f32[] 3.0:f32[]) }");
  EXPECT_EQ(round_trip(printed), printed);
}

TEST(Parse, CommentsCarryScopesAndSites) {
  std::string_view text =
      "{ lambda ; a:f32[3]. let  # a comment in the header is ignored\n"
      "    # so is a comment on its own line\n"
      "    b:f32[3] = neg a  # mlp/dense1 @ model.cc:42\n"
      "    c:f32[3] = exp b  # \"odd @ \\\"name\\\"\\tx\\x01\"\n"
      "    d:f32[3] = log c  # @ other.cc:7\n"
      "    e:f32[3] = sin d  #   spaced scope  \n"
      "  in (e) }";
  Program program = parse_program(text);
  ASSERT_EQ(program.equations.size(), 4u);
  EXPECT_EQ(program.equations[0].scope, "mlp/dense1");
  EXPECT_EQ(program.equations[0].site.to_string(), "model.cc:42");
  EXPECT_EQ(program.equations[1].scope, "odd @ \"name\"\tx\x01");
  EXPECT_FALSE(program.equations[1].site.known());
  EXPECT_EQ(program.equations[2].scope, "");
  EXPECT_EQ(program.equations[2].site.to_string(), "other.cc:7");
  EXPECT_EQ(program.equations[3].scope, "spaced scope");
  std::string printed = print_program(program, {.show_scopes = true, .show_sites = true});
  EXPECT_EQ(printed,
            "{ lambda ; a:f32[3]. let\n"
            "    b:f32[3] = neg a  # mlp/dense1 @ model.cc:42\n"
            "    c:f32[3] = exp b  # \"odd @ \\\"name\\\"\\tx\\x01\"\n"
            "    d:f32[3] = log c  # @ other.cc:7\n"
            "    e:f32[3] = sin d  # spaced scope\n"
            "  in (e) }");
  EXPECT_EQ(round_trip(printed, {.show_scopes = true, .show_sites = true}), printed);
}

TEST(Parse, CommentAfterAnEquationOnAOneLineProgramIsNotItsScope) {
  Program program = parse_program("{ lambda ; a:f32[]. let b:f32[] = neg a in (b) }  # note");
  EXPECT_EQ(program.equations[0].scope, "");
}

TEST(Parse, ParsedSitesPointErrorsAtTheOriginalLine) {
  Program program = parse_program(
      "{ lambda ; a:i32[2]. let\n"
      "    b:i32[2] = div a a  # @ model.cc:42\n"
      "  in (b) }");
  std::vector<Array> out =
      eval_program(program, std::vector<Array>{zeros({2}, DType::i32)}, CallSite());
  try {
    out[0].block_until_ready();
    ADD_FAILURE() << "dividing by zero did not fail";
  } catch (const Error& error) {
    EXPECT_EQ(error.site().to_string(), "model.cc:42");
  }
}

TEST(Parse, ReservedWordsNeverNameVariables) {
  // Variable 221 would be "in" and 7559 "let": the printer skips such names.
  ProgramBuilder builder;
  VarId x = builder.add_input(AbstractValue({2}, DType::f32));
  for (int i = 0; i < 300; ++i) x = builder.add_equation(prim::neg, {x}, NoParams{})[0];
  builder.set_outputs({x});
  std::string text = print_program(builder.program());
  EXPECT_THAT(text, HasSubstr(" im:f32[2] = neg il\n    io:f32[2] = neg im\n"));
  EXPECT_EQ(round_trip(text), text);
}

TEST(Parse, VariablesMayBeUsedAsOutputsDirectly) {
  std::string_view text = "{ lambda a:f32[3] ; b:f32[3]. let\n  in (a b b 1:i32[]) }";
  EXPECT_EQ(round_trip(text), text);
  Program program = parse_program(text);
  EXPECT_EQ(program.constants.size(), 2u);  // the declared constant and the literal
  EXPECT_FALSE(program.constant_values[0].defined());
  EXPECT_THAT([&] { eval_program(program, std::vector<Array>{zeros({3})}, CallSite()); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("constant 0 (f32[3]) of the program has no value")));
}

// ----- errors: one per class, with the exact line and column ------------------------------

TEST(Parse, ShardedTypesReadBack) {
  constexpr std::string_view kSharded =
      "{ lambda ; a:f32[8,4]{data,_} b:f32[8,4]{(data,model),_} c:f32[]{}. let\n"
      "    d:f32[8,4] = add a b\n"
      "  in (d) }";
  EXPECT_EQ(round_trip(kSharded), kSharded);
  Program program = parse_program(kSharded);
  EXPECT_EQ(program.aval(program.inputs[0]).sharding, (ShardingSpec{{"data"}, {}}));
  EXPECT_EQ(program.aval(program.inputs[1]).sharding, (ShardingSpec{{"data", "model"}, {}}));
  EXPECT_TRUE(program.aval(program.inputs[2]).sharding.sharded);  // a scalar on every device
  EXPECT_TRUE(program.aval(program.inputs[2]).sharding.dims.empty());
  EXPECT_EQ(program.aval(program.inputs[0]).to_string(), "f32[8,4]{data,_}");
}

TEST(ParseError, ShardingsThatDoNotFitTheirType) {
  EXPECT_EQ(
      parse_error("{ lambda ; a:f32[8,4]{data}. let\n    b:f32[8,4] = neg a\n  in (b) }"),
      "program text 1:22: the sharding of f32[8,4] names 1 dimension(s), but the shape has 2");
  EXPECT_EQ(
      parse_error("{ lambda ; a:f32[8,4]{data,data}. let\n    b:f32[8,4] = neg a\n  in (b) }"),
      "program text 1:22: the sharding {data,data} uses mesh axis 'data' twice");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[8,4]{data,()}. let\n    b:f32[8,4] = neg a\n  in (b) }"),
            "program text 1:29: expected a mesh axis name, found ')'");
}

TEST(ParseError, UnexpectedCharacter) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg a $\n  in (b) }"),
            "program text 2:22: unexpected character '$'");
}

TEST(ParseError, MissingCloseBracketAfterParams) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[2,3] b:f32[3,4]. let\n"
                        "    c:f32[2,4] = dot_general[lhs_contracting=(1) rhs_contracting=(0) "
                        "lhs_batch=() rhs_batch=() preferred_element_type=none a b\n"
                        "  in (c) }"),
            "program text 2:124: expected ']' after the params of dot_general, found 'a'");
}

TEST(ParseError, UnknownPrimitiveSuggestsTheClosest) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[2,3] b:f32[3,4]. let\n"
                        "    c:f32[2,4] = dot_genral[lhs_contracting=(1)] a b\n"
                        "  in (c) }"),
            "program text 2:18: unknown primitive 'dot_genral' (did you mean 'dot_general'?)");
}

TEST(ParseError, UnknownParamSuggestsTheClosest) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[2,3]. let\n"
                        "    b:f32[3] = reduce_sum[axis=(0)] a\n"
                        "  in (b) }"),
            "program text 2:27: reduce_sum has no param 'axis' (did you mean 'axes'?)");
}

TEST(ParseError, MissingParam) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[2,3] b:f32[3,4]. let\n"
                        "    c:f32[2,4] = dot_general[lhs_contracting=(1) rhs_contracting=(0) "
                        "preferred_element_type=none] a b\n"
                        "  in (c) }"),
            "program text 2:97: the params of dot_general lack lhs_batch, rhs_batch");
}

TEST(ParseError, ParamGivenTwice) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[2,3]. let\n"
                        "    b:f32[3] = reduce_sum[axes=(0) axes=(0)] a\n"
                        "  in (b) }"),
            "program text 2:36: param axes of reduce_sum is given twice");
}

TEST(ParseError, WrongValueTypeForEachKindOfField) {
  auto one_equation = [](std::string_view equation) {
    return parse_error(
        fmt::format("{{ lambda ; a:f32[2,3] i:i32[2]. let\n    {}\n  in () }}", equation));
  };
  EXPECT_EQ(one_equation("b:f32[3] = reduce_sum[axes=0] a"),
            "program text 2:32: expected a tuple of integers like (0,1) or () for axes of "
            "reduce_sum, found '0'");
  EXPECT_EQ(one_equation("b:f32[3] = reduce_sum[axes=(0,x)] a"),
            "program text 2:35: expected an integer for axes of reduce_sum, found 'x'");
  EXPECT_EQ(one_equation("b:f32[2,3] = cumsum[axis=(1) reverse=false] a"),
            "program text 2:30: expected an integer for axis of cumsum, found '('");
  EXPECT_EQ(one_equation("b:f32[2,3] = cumsum[axis=1 reverse=1] a"),
            "program text 2:40: expected true or false for reverse of cumsum, found '1'");
  EXPECT_EQ(one_equation("b:f32[2,3] = convert_element_type[new_dtype=f31] a"),
            "program text 2:49: expected a dtype for new_dtype of convert_element_type, found "
            "'f31'");
  EXPECT_EQ(one_equation("b:f32[2,3] = gather[axis=0 batch_dims=0 mode=wrap] a i"),
            "program text 2:50: expected an index mode (error, clip or fill) for mode of gather, "
            "found 'wrap'");
  EXPECT_EQ(one_equation("b:f32[2,3] = cumsum[axis=1.5 reverse=false] a"),
            "program text 2:30: expected an integer for axis of cumsum, found '1.5'");
  EXPECT_EQ(one_equation("b:f32[2,3] = cumsum[axis=99999999999999999999 reverse=false] a"),
            "program text 2:30: the integer 99999999999999999999 for axis of cumsum does not fit "
            "in 64 bits");
}

TEST(ParseError, ParamsWhereThereAreNone) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg[x=1] a\n  in (b) }"),
            "program text 2:19: neg takes no params");
}

TEST(ParseError, MissingParams) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[2,3]. let\n    b:f32[3] = reduce_sum a\n  in (b) }"),
            "program text 2:27: expected '[' and the params of reduce_sum (axes=...), found 'a'");
}

TEST(ParseError, UndefinedVariable) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = add a q\n  in (b) }"),
            "program text 2:22: undefined variable 'q'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg b\n  in (b) }"),
            "program text 2:20: undefined variable 'b'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n  in (z) }"),
            "program text 2:7: undefined variable 'z'");
}

TEST(ParseError, VariableDefinedTwice) {
  EXPECT_EQ(parse_error("{ lambda a:f32[3] ; a:f32[3]. let\n  in (a) }"),
            "program text 1:21: variable 'a' is defined twice (first at 1:10)");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    a:f32[3] = neg a\n  in (a) }"),
            "program text 2:5: variable 'a' is defined twice (first at 1:12)");
  EXPECT_EQ(parse_error("{ lambda ; a:u32[]. let\n"
                        "    b:u32[] b:u32[] = threefry2x32 a a a a\n  in (b) }"),
            "program text 2:13: variable 'b' is defined twice (first at 2:5)");
}

TEST(ParseError, DeclaredTypeDisagreesWithTheShapeRule) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[2,3] b:f32[3,4]. let\n"
                        "    c:f32[2,5] = dot_general[lhs_contracting=(1) rhs_contracting=(0) "
                        "lhs_batch=() rhs_batch=() preferred_element_type=none] a b\n"
                        "  in (c) }"),
            "program text 2:7: c is declared f32[2,5], but dot_general gives f32[2,4]");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32~[3] = neg a\n  in (b) }"),
            "program text 2:7: b is declared f32~[3], but neg gives f32[3]");
}

TEST(ParseError, WrongNumberOfResults) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] c:f32[3] = neg a\n  in (b) }"),
            "program text 2:5: neg gives 1 result(s), but 2 are declared");
}

TEST(ParseError, ShapeRuleRejectsTheOperands) {
  EXPECT_THAT(parse_error("{ lambda ; a:f32[3] b:f32[4]. let\n    c:f32[3] = add a b\n  in (c) }"),
              HasSubstr("program text 2:16: add: "));
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = add a\n  in (b) }"),
            "program text 2:16: add: expects 2 operand(s), got 1");
}

TEST(ParseError, BadTypes) {
  EXPECT_EQ(parse_error("{ lambda ; a:f31[3]. let\n  in (a) }"),
            "program text 1:14: expected a dtype (a type is written like f32[128,784]), found "
            "'f31'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3,-1]. let\n  in (a) }"),
            "program text 1:20: a size must be >= 0, found -1");
  EXPECT_EQ(parse_error("{ lambda ; a:f32(3). let\n  in (a) }"),
            "program text 1:17: expected '[' after the dtype f32 (a type is written like "
            "f32[128,784]), found '('");
  EXPECT_EQ(parse_error("{ lambda ; a. let\n  in (a) }"),
            "program text 1:13: expected ':' and a type after the variable a, found '.'");
}

TEST(ParseError, BadLiterals) {
  auto output = [](std::string_view literal) {
    return parse_error(fmt::format("{{ lambda ; . let\n  in ({}) }}", literal));
  };
  EXPECT_EQ(output("2.0"),
            "program text 2:10: expected ':' and a type after the literal 2.0 (as in "
            "2.0:f32[]), found ')'");
  EXPECT_EQ(output("2.0:f32[3]"),
            "program text 2:11: a literal is a scalar: its type must have rank 0, like f32[], "
            "found f32[3]");
  EXPECT_EQ(output("300:u8[]"), "program text 2:7: the literal 300 is out of range for u8");
  EXPECT_EQ(output("-1:u32[]"), "program text 2:7: the literal -1 is out of range for u32");
  EXPECT_EQ(output("2.5:i32[]"),
            "program text 2:7: the literal 2.5 is not an integer, but its type is i32[]");
  EXPECT_EQ(output("1:bool[]"), "program text 2:7: a bool literal is true or false, found '1'");
  EXPECT_EQ(output("true:f32[]"), "program text 2:7: the literal true cannot have the type f32[]");
  EXPECT_EQ(output("1e999:f64[]"), "program text 2:7: the literal 1e999 is out of range for f64");
  EXPECT_EQ(output("1x:f32[]"), "program text 2:8: unexpected 'x' in the number '1x'");
}

TEST(ParseError, ReservedWordAsAVariable) {
  EXPECT_EQ(parse_error("{ lambda ; nan:f32[]. let\n  in (nan) }"),
            "program text 1:12: 'nan' is a reserved word and cannot name a variable");
}

TEST(ParseError, Structure) {
  EXPECT_EQ(parse_error(""),
            "program text 1:1: expected '{' to open the program, found end of text");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. b:f32[3] = neg a in (b) }"),
            "program text 1:22: expected 'let' after the inputs, found 'b'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg a\n  in (b)"),
            "program text 3:9: expected '}' to close the program, found end of text");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n  in (a) } a"),
            "program text 2:12: expected the end of the text after '}', found 'a'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] neg a\n  in (b) }"),
            "program text 2:14: expected '=' or another result after b, found 'neg'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    (b) = neg a\n  in (b) }"),
            "program text 2:5: expected an equation 'name:type = primitive ...' or 'in', found "
            "'('");
}

TEST(ParseError, BadComments) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg a  # scope @ nowhere\n"
                        "  in (b) }"),
            "program text 2:33: expected a call site 'file:line' after '@', found 'nowhere'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg a  # \"open\n  in (b) }"),
            "program text 2:30: unterminated quoted scope: expected '\"'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg a  # \"x\\q\"\n  in (b) }"),
            "program text 2:27: unknown escape in a quoted scope");
}

}  // namespace
}  // namespace kiln
