// fold_constants: equations over constants (and operandless ones like iota) become
// constants computed by the eager kernels; the size limit, primitives defined by ops,
// constants that are values of an enclosing trace, and equations whose kernels fail are
// left to run with the program (a failure then surfaces at run time, as it would eagerly).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/ids/binary.h"
#include "prims/ids/custom.h"
#include "prims/ids/index.h"
#include "prims/ids/random.h"
#include "prims/ids/shape.h"
#include "prims/ids/unary.h"
#include "transforms/pass_test_support.h"
#include "transforms/passes/passes.h"

namespace kiln {
namespace {

using testing::count_prim;
using ::testing::HasSubstr;
using testing::same_results;

TEST(PassConstantFolding, FoldsChainsOfConstantEquations) {
  Program program = parse_program(R"({ lambda ; a:f32[3]. let
      b:f32[] = mul 2.0:f32[] 3.0:f32[]
      c:f32[] = neg b
      d:f32[3] = broadcast_in_dim[shape=(3) broadcast_dimensions=()] c
      e:f32[3] = add a d
    in (e c) })");
  Program result = fold_constants(program);
  EXPECT_EQ(print_program(eliminate_dead_code(result)),
            "{ lambda a:f32[3] ; b:f32[3]. let\n"
            "    c:f32[3] = add b a\n"
            "  in (c -6.0:f32[]) }");
  ASSERT_EQ(result.equations.size(), 1u);
  EXPECT_TRUE(same_results(program, result));
  EXPECT_TRUE(same_results(program, eliminate_dead_code(result)));
  // The folded broadcast holds the values eager mode computes.
  VarId folded = result.equations[0].inputs[1];
  for (size_t i = 0; i < result.constants.size(); ++i) {
    if (result.constants[i] == folded) {
      EXPECT_EQ(result.constant_values[i].to_vector<float>(), (std::vector<float>{-6, -6, -6}));
    }
  }
}

TEST(PassConstantFolding, FoldsIotaWithinTheLimitOnly) {
  Program program = parse_program(R"({ lambda ; a:i32[8]. let
      b:i32[8] = iota[dtype=i32 shape=(8) dimension=0]
      c:i32[8] = add a b
      d:i32[5000] = iota[dtype=i32 shape=(5000) dimension=0]
    in (c d) })");
  Program result = fold_constants(program);
  EXPECT_EQ(count_prim(result, prim::iota), 1);  // 5000 elements > 4096
  EXPECT_EQ(result.equations.back().outputs[0], result.outputs[1]);
  EXPECT_TRUE(same_results(program, result));

  Program larger = fold_constants(program, {.max_folded_elements = 5000});
  EXPECT_EQ(count_prim(larger, prim::iota), 0);
  EXPECT_TRUE(same_results(program, larger));

  Program none = fold_constants(program, {.max_folded_elements = 0});
  EXPECT_EQ(count_prim(none, prim::iota), 2);
}

TEST(PassConstantFolding, TheLimitCountsEveryResultOfAnEquation) {
  // threefry2x32 gives two u32[3000] results: 6000 elements.
  Program program = parse_program(R"({ lambda ; . let
      a:u32[3000] = iota[dtype=u32 shape=(3000) dimension=0]
      b:u32[3000] c:u32[3000] = threefry2x32 0:u32[] 42:u32[] a a
    in (b c) })");
  Program limited = fold_constants(program, {.max_folded_elements = 5999});
  EXPECT_EQ(count_prim(limited, prim::threefry2x32), 1);
  EXPECT_EQ(count_prim(limited, prim::iota), 0);
  Program enough = fold_constants(program, {.max_folded_elements = 6000});
  EXPECT_TRUE(enough.equations.empty());
  EXPECT_TRUE(same_results(program, limited));
  EXPECT_TRUE(same_results(program, enough));
}

TEST(PassConstantFolding, AFailingKernelIsLeftToFailAtRunTime) {
  Program program = parse_program(R"({ lambda ; a:i32[2]. let
      b:i32[4] = iota[dtype=i32 shape=(4) dimension=0]
      c:i32[2] = iota[dtype=i32 shape=(2) dimension=0]
      d:i32[2] = mul c 5:i32[]
      e:i32[2] = gather[axis=0 batch_dims=0 mode=error] b d  # @ model.cc:7
      f:i32[2] = add a e
      g:i32[] = div 1:i32[] 0:i32[]
    in (f g) })");
  Program result;
  ASSERT_NO_THROW(result = fold_constants(program));
  EXPECT_EQ(count_prim(result, prim::gather), 1);
  EXPECT_EQ(count_prim(result, prim::div), 1);
  EXPECT_EQ(count_prim(result, prim::mul), 0);  // the index computation itself folds
  std::string error = testing::run(result, {from_host<int32_t>({1, 2}, {2})}).error;
  EXPECT_THAT(error, HasSubstr("index 5 at indices[1] is out of range for axis 0 of size 4"));
  EXPECT_THAT(error, HasSubstr("model.cc:7"));
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassConstantFolding, EquationsWithAnInputOperandStay) {
  Program program = parse_program(R"({ lambda ; a:f32[3]. let
      b:f32[3] = exp a
      c:f32[3] = mul b 2.0:f32[]
    in (c) })");
  Program result = fold_constants(program);
  EXPECT_EQ(print_program(result), print_program(program));
}

TEST(PassConstantFolding, PrimitivesDefinedByOpsAreNotFolded) {
  auto softplus = custom_vjp(
      "softplus",
      [](const Array& x) {
        return std::pair{log1p(exp(x)), std::vector<Array>{x}};
      },
      [](const std::vector<Array>& saved, const Array& g) { return g * logistic(saved[0]); });
  Array c = from_host<float>({-1, 0, 2}, {3});
  TracedProgram traced = make_program([&](const Array& x) { return x + softplus(c); }, c);
  ASSERT_EQ(count_prim(*traced.program, prim::custom_vjp_call), 1);
  Program result = fold_constants(*traced.program);
  EXPECT_EQ(count_prim(result, prim::custom_vjp_call), 1);
  EXPECT_TRUE(same_results(*traced.program, result));
}

TEST(PassConstantFolding, ValuesOfAnEnclosingTraceAreNotFolded) {
  // Inside make_program, `y` is a tracer; the inner program closes over it (a constant
  // whose value is a tracer, not a concrete array) and over a concrete literal.
  Program inner_folded;
  auto outer = [&](const Array& y) {
    TracedProgram inner = make_program([&](const Array& x) { return x + exp(y * 2.0); }, y);
    EXPECT_EQ(inner.program->constants.size(), 2u);
    inner_folded = fold_constants(*inner.program);
    return y;
  };
  make_program(outer, zeros({3}));
  EXPECT_EQ(count_prim(inner_folded, prim::mul), 1);
  EXPECT_EQ(count_prim(inner_folded, prim::exp), 1);
}

TEST(PassConstantFolding, FoldsEveryDtypeBitForBit) {
  // Literals of each float dtype through a few kernels: the folded constants must be the
  // bits eager mode gives (same_results compares bytes).
  Program program = parse_program(R"({ lambda ; a:f16[] b:bf16[] c:f64[]. let
      d:f16[] = div 1.0:f16[] 3.0:f16[]
      e:bf16[] = tanh 0.7:bf16[]
      f:f64[] = exp -0.0:f64[]
      g:f64[] = sqrt -1.0:f64[]
      h:f16[] = add a d
      i:bf16[] = mul b e
      j:f64[] = add c f
    in (h i j g) })");
  Program result = fold_constants(program);
  EXPECT_EQ(result.equations.size(), 3u);
  EXPECT_TRUE(same_results(program, result));
}

TEST(PassConstantFolding, KeepsSitesAndScopesOfUnfoldedEquations) {
  Program program = parse_program(R"({ lambda ; a:f32[3]. let
      b:f32[] = neg 1.0:f32[]  # folded @ f.cc:1
      c:f32[3] = mul a b  # layer @ f.cc:2
    in (c) })");
  PrintOptions options{.show_scopes = true, .show_sites = true};
  EXPECT_EQ(print_program(fold_constants(program), options),
            "{ lambda ; a:f32[3]. let\n"
            "    b:f32[3] = mul a -1.0:f32[]  # layer @ f.cc:2\n"
            "  in (b) }");
}

TEST(PassConstantFolding, OptimizationBarriersAreNotFolded) {
  Program program = parse_program(R"({ lambda ; a:f32[]. let
      b:f32[] = optimization_barrier 2.0:f32[]
      c:f32[] = mul b 3.0:f32[]
      d:f32[] = add a c
    in (d) })");
  Program result = fold_constants(program);
  EXPECT_EQ(print_program(result), print_program(program));
  EXPECT_TRUE(same_results(program, result));
}

}  // namespace
}  // namespace kiln
