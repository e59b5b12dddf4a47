// cost_analysis: FLOPs and bytes of traced programs against counts by hand (an MLP layer,
// its gradient), totals against the sum of the equations, scopes and sites in the report,
// and the error for an empty program.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/cost.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "support/errors.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr double kB = 8, kIn = 16, kOut = 32;

auto dense = [](const Array& x, const Array& w, const Array& b) {
  auto scope = named_scope("dense");
  return tanh(matmul(x, w) + b);
};

const EquationCost& only(const CostReport& report, std::string_view primitive) {
  const EquationCost* found = nullptr;
  for (const EquationCost& equation : report.equations) {
    if (equation.primitive != primitive) continue;
    EXPECT_EQ(found, nullptr) << "more than one " << primitive;
    found = &equation;
  }
  if (found == nullptr) ADD_FAILURE() << "no " << primitive << " in the report";
  static const EquationCost none;
  return found != nullptr ? *found : none;
}

TEST(CostAnalysis, MlpLayerByHand) {
  CostReport report = cost_analysis(dense, zeros({8, 16}), zeros({16, 32}), zeros({32}));
  // x @ w: 2 B In Out; + b: B Out (b is read once, 32 floats); tanh: B Out transcendentals.
  const EquationCost& matmul = only(report, "dot_general");
  EXPECT_EQ(matmul.cost.flops, 2 * kB * kIn * kOut);
  EXPECT_EQ(matmul.cost.bytes_read, (kB * kIn + kIn * kOut) * 4);
  EXPECT_EQ(matmul.cost.bytes_written, kB * kOut * 4);
  const EquationCost& bias = only(report, "add");
  EXPECT_EQ(bias.cost.flops, kB * kOut);
  EXPECT_EQ(bias.cost.bytes_read, (kB * kOut + kOut) * 4);
  const EquationCost& activation = only(report, "tanh");
  EXPECT_EQ(activation.cost.flops, 0);
  EXPECT_EQ(activation.cost.transcendentals, kB * kOut);
  EXPECT_EQ(report.total.flops, 2 * kB * kIn * kOut + kB * kOut);
  EXPECT_EQ(report.total.transcendentals, kB * kOut);
}

TEST(CostAnalysis, TotalIsTheSumOfTheEquations) {
  auto loss = [](const Array& w, const Array& x, const Array& b) {
    return sum(dense(x, w, b) * dense(x, w, b));
  };
  CostReport report = cost_analysis(grad(loss), zeros({16, 32}), zeros({8, 16}), zeros({32}));
  ASSERT_FALSE(report.equations.empty());
  Cost sum;
  for (size_t i = 0; i < report.equations.size(); ++i) {
    EXPECT_EQ(report.equations[i].index, i);
    sum += report.equations[i].cost;
  }
  EXPECT_EQ(report.total, sum);
  // The gradient with respect to w adds one matmul per use of w (dw = x^T g): forward
  // 2 x 2 B In Out, backward 2 x 2 B In Out.
  double matmul_flops = 0;
  for (const EquationCost& equation : report.equations) {
    if (equation.primitive == "dot_general") matmul_flops += equation.cost.flops;
  }
  EXPECT_EQ(matmul_flops, 4 * 2 * kB * kIn * kOut);
}

TEST(CostAnalysis, AnAliasingReshapeMovesNoBytes) {
  auto f = [](const Array& x) { return reshape(x, {6, 4}) * 2.0; };
  CostReport report = cost_analysis(f, zeros({24}));
  const EquationCost& reshaped = only(report, "reshape");
  EXPECT_EQ(reshaped.cost, Cost{});
  EXPECT_EQ(report.total.bytes_read, 24 * 4 + 4);  // mul reads x and the scalar 2
  EXPECT_EQ(report.total.bytes_written, 24 * 4);
}

TEST(CostAnalysis, ReportNamesScopesAndSites) {
  CostReport report = cost_analysis(dense, zeros({8, 16}), zeros({16, 32}), zeros({32}));
  const EquationCost& matmul = only(report, "dot_general");
  EXPECT_EQ(matmul.scope, "dense");
  EXPECT_THAT(matmul.site, HasSubstr("cost_analysis_test.cc:"));
  std::string table = report.to_string();
  EXPECT_THAT(table, HasSubstr("dot_general"));
  EXPECT_THAT(table, HasSubstr("dense @ "));
  EXPECT_THAT(table, HasSubstr("8.45k"));  // total FLOPs, 8448
  EXPECT_THAT(table, HasSubstr("total"));
  // Arithmetic intensity of the matmul: 8192 FLOPs over 3584 bytes.
  EXPECT_THAT(table, HasSubstr(fmt::format("{:.2f}", 8192.0 / 3584.0)));
}

TEST(CostAnalysis, OfATracedProgramEqualsOfTheFunction) {
  TracedProgram traced = make_program(dense, zeros({8, 16}), zeros({16, 32}), zeros({32}));
  EXPECT_EQ(cost_analysis(traced).total,
            cost_analysis(dense, zeros({8, 16}), zeros({16, 32}), zeros({32})).total);
}

TEST(CostAnalysis, AnEmptyTracedProgramIsAnError) {
  EXPECT_TRUE(testing::fails_with([] { cost_analysis(TracedProgram{}); },
                                  {"cost_analysis: the TracedProgram holds no program"}));
}

}  // namespace
}  // namespace kiln
