// The generic primitive suite: every row of the table runs through every column.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "prims/bind.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

std::string case_name(const OpRow& row, const OpCase& c) {
  return fmt::format("{} [{}]", prim_name(row.prim), c.label);
}

Tolerance ref_tolerance(const OpRow& row, const OpCase& c, DType dtype) {
  return row.ref_tolerance ? row.ref_tolerance(c, dtype) : ulp_tolerance(dtype);
}
Tolerance fast_tolerance(const OpRow& row, const OpCase& c, DType dtype) {
  return row.fast_tolerance ? row.fast_tolerance(c, dtype) : ulp_tolerance(dtype);
}

class OpTable : public ::testing::TestWithParam<OpRow> {};

TEST(OpTableCompleteness, EveryPrimitiveHasOneRowAndItsRequiredRules) {
  std::vector<int> rows_per_prim(kNumPrims, 0);
  for (const OpRow& row : all_rows()) ++rows_per_prim[static_cast<size_t>(row.prim)];
  for (const PrimDef& prim : all_prims()) {
    EXPECT_EQ(rows_per_prim[static_cast<size_t>(prim.id)], 1)
        << prim.name << " needs exactly one row in tests/prims/op_table";
    EXPECT_NE(prim.abstract_eval, nullptr) << prim.name << " has no abstract_eval rule";
    EXPECT_NE(prim.ref_kernel, nullptr) << prim.name << " has no reference kernel";
  }
}

TEST_P(OpTable, ReferenceKernelMatchesDoublePrecisionOracle) {
  const OpRow& row = GetParam();
  const PrimDef& prim = prim_def(row.prim);
  ASSERT_NE(prim.ref_kernel, nullptr);
  ComputePool serial(1);
  std::vector<OpCase> cases = row.cases();
  ASSERT_FALSE(cases.empty());
  for (const OpCase& c : cases) {
    std::vector<AbstractValue> out_avals = out_avals_of(row, c);
    std::vector<TestArray> expected = row.oracle(c);
    std::vector<TestArray> actual = run_kernel(prim.ref_kernel, c, out_avals, serial);
    ASSERT_EQ(actual.size(), expected.size()) << case_name(row, c);
    for (size_t i = 0; i < actual.size(); ++i) {
      std::string diff =
          compare(actual[i], expected[i], ref_tolerance(row, c, expected[i].aval.dtype));
      EXPECT_TRUE(diff.empty()) << case_name(row, c) << " output " << i << diff;
    }
  }
}

// Only primitives that have a fast kernel get this column (the others run their reference
// kernel, which the first column checks).
class FastKernel : public ::testing::TestWithParam<OpRow> {};

std::vector<OpRow> rows_with_fast_kernels() {
  std::vector<OpRow> rows;
  for (OpRow& row : all_rows()) {
    if (prim_def(row.prim).cpu_kernel != nullptr) rows.push_back(std::move(row));
  }
  return rows;
}

TEST_P(FastKernel, MatchesReferenceAndIgnoresThreadCount) {
  const OpRow& row = GetParam();
  const PrimDef& prim = prim_def(row.prim);
  ComputePool serial(1);
  ComputePool three(3);
  for (const OpCase& c : row.cases()) {
    std::vector<AbstractValue> out_avals = out_avals_of(row, c);
    std::vector<TestArray> reference = run_kernel(prim.ref_kernel, c, out_avals, serial);
    std::vector<TestArray> fast = run_kernel(prim.cpu_kernel, c, out_avals, compute_pool());
    std::vector<TestArray> fast_serial = run_kernel(prim.cpu_kernel, c, out_avals, serial);
    std::vector<TestArray> fast_three = run_kernel(prim.cpu_kernel, c, out_avals, three);
    for (size_t i = 0; i < reference.size(); ++i) {
      std::string diff =
          compare(fast[i], reference[i], fast_tolerance(row, c, reference[i].aval.dtype));
      EXPECT_TRUE(diff.empty()) << case_name(row, c) << " output " << i << diff;
      EXPECT_TRUE(same_bits(fast[i], fast_serial[i]) && same_bits(fast[i], fast_three[i]))
          << case_name(row, c) << ": result depends on the number of compute threads";
    }
  }
}

TEST_P(OpTable, EagerDispatchMatchesReference) {
  const OpRow& row = GetParam();
  const PrimDef& prim = prim_def(row.prim);
  ComputePool serial(1);
  for (const OpCase& c : row.cases()) {
    std::vector<AbstractValue> out_avals = out_avals_of(row, c);
    std::vector<TestArray> reference = run_kernel(prim.ref_kernel, c, out_avals, serial);
    std::vector<TestArray> eager = run_eager(row, c);
    ASSERT_EQ(eager.size(), reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      std::string diff =
          compare(eager[i], reference[i], fast_tolerance(row, c, reference[i].aval.dtype));
      EXPECT_TRUE(diff.empty()) << case_name(row, c) << " output " << i << diff;
    }
  }
}

std::string row_name(const ::testing::TestParamInfo<OpRow>& info) {
  return std::string(prim_name(info.param.prim));
}

INSTANTIATE_TEST_SUITE_P(AllPrimitives, OpTable, ::testing::ValuesIn(all_rows()), row_name);
INSTANTIATE_TEST_SUITE_P(AllFastKernels, FastKernel, ::testing::ValuesIn(rows_with_fast_kernels()),
                         row_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FastKernel);

}  // namespace
}  // namespace kiln::testing
