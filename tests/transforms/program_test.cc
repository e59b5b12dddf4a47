// Tracing C++ functions into programs: printing, constants, named scopes, static
// arguments, and running a traced program.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "support/errors.h"
#include "transforms/eval.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(MakeProgram, PrintsLikeAJaxpr) {
  auto f = [](const Array& a, const Array& b) { return matmul(a, b); };
  TracedProgram traced = make_program(f, zeros({128, 784}), zeros({784, 512}));
  EXPECT_EQ(traced.to_string(),
            "{ lambda ; a:f32[128,784] b:f32[784,512]. let\n"
            "    c:f32[128,512] = dot_general[lhs_contracting=(1) rhs_contracting=(0) "
            "lhs_batch=() rhs_batch=() preferred_element_type=none] a b\n"
            "  in (c) }");
}

TEST(MakeProgram, LiteralsScopesAndStaticArguments) {
  auto layer = [](const Array& x, const Array& w, double scale) {
    auto scope = named_scope("dense1");
    return tanh(matmul(x, w) * scale);
  };
  TracedProgram traced = make_program(layer, zeros({2, 3}), zeros({3, 4}), 0.5);
  std::string text = traced.to_string();
  EXPECT_THAT(text, HasSubstr("d:f32[2,4] = mul c 0.5:f32[]  # dense1"));
  EXPECT_THAT(text, HasSubstr("tanh"));
  EXPECT_EQ(traced.program->inputs.size(), 2u);  // the double is static
}

TEST(MakeProgram, ClosedOverArraysBecomeConstants) {
  Array bias = from_host<float>({1, 2, 3}, {3});
  auto f = [&](const Array& x) { return x + bias; };
  TracedProgram traced = make_program(f, zeros({3}));
  ASSERT_EQ(traced.program->constants.size(), 1u);
  EXPECT_THAT(traced.to_string(), HasSubstr("{ lambda a:f32[3] ; b:f32[3]. let"));
  // Running the program uses the constant's value.
  std::vector<Array> out = eval_program(*traced.program, std::vector<Array>{ones({3})}, CallSite());
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 3, 4}));
}

TEST(MakeProgram, NestedGradIsTracedIntoOneProgram) {
  auto f = [](const Array& x) { return sum(exp(x)); };
  auto df = [&](const Array& x) { return grad(f)(x); };
  TracedProgram traced = make_program(df, zeros({4}));
  std::string text = traced.to_string();
  EXPECT_THAT(text, HasSubstr("exp"));
  EXPECT_THAT(text, HasSubstr("# grad"));  // backward equations are scoped under grad/
}

TEST(MakeProgram, OutputsMayBePairsAndVectors) {
  auto f = [](const Array& x) { return std::make_pair(x * 2.0, std::vector<Array>{x, exp(x)}); };
  TracedProgram traced = make_program(f, zeros({2}));
  EXPECT_EQ(traced.program->outputs.size(), 3u);
}

}  // namespace
}  // namespace kiln
