// The generic primitive suite: every row of the table runs through every column.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/bind.h"
#include "prims/ids/contract.h"
#include "prims/ids/custom.h"
#include "prims/ids/window.h"
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

// The plain meaning of a case: the reference kernel run serially or, for primitives
// defined by ops (an impl rule, no kernel), the eager interpreter.
std::vector<TestArray> run_reference(const OpRow& row, const OpCase& c, ComputePool& serial) {
  const PrimDef& prim = prim_def(row.prim);
  if (prim.ref_kernel == nullptr) return run_eager(row, c);
  return run_kernel(prim.ref_kernel, c, out_avals_of(row, c), serial);
}

TEST(OpTableCompleteness, EveryPrimitiveHasOneRowAndItsRequiredRules) {
  const PrimTable& table = register_all();
  std::vector<int> rows_per_prim(table.all().size(), 0);
  for (const OpRow& row : all_rows()) ++rows_per_prim[table.index_of(row.prim)];
  for (const PrimDef& prim : all_prims()) {
    // The collectives run only inside shard_map, on a mesh: their columns (values, gradients,
    // batching, errors) are in tests/sharding/shard_map_test.cc.
    const bool spmd = prim.family == Family::kSpmd;
    EXPECT_EQ(rows_per_prim[table.index_of(prim.id)], spmd ? 0 : 1)
        << prim.name << " needs exactly one row in tests/prims/op_table";
    EXPECT_NE(prim.abstract_eval, nullptr) << prim.name << " has no abstract_eval rule";
    EXPECT_TRUE(prim.ref_kernel != nullptr || prim.impl != nullptr)
        << prim.name << " has neither a reference kernel nor an impl rule";
    if (!prim.has_flag(kNotDifferentiable)) {
      EXPECT_NE(prim.vjp, nullptr) << prim.name << " is differentiable but has no VJP rule";
      EXPECT_NE(prim.jvp, nullptr) << prim.name << " is differentiable but has no JVP rule";
    }
    EXPECT_NE(prim.cost, nullptr) << prim.name << " has no cost rule";
    EXPECT_NE(prim.sharding, nullptr) << prim.name << " has no sharding rule";
    // A primitive without operands is never batched.
    if (prim.arity != 0) {
      EXPECT_NE(prim.batch, nullptr) << prim.name << " has no batching rule";
    }
  }
}

TEST_P(OpTable, ReferenceKernelMatchesDoublePrecisionOracle) {
  const OpRow& row = GetParam();
  ComputePool serial(1);
  std::vector<OpCase> cases = row.cases();
  ASSERT_FALSE(cases.empty());
  for (const OpCase& c : cases) {
    std::vector<TestArray> expected = row.oracle(c);
    std::vector<TestArray> actual = run_reference(row, c, serial);
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

// Whether the primitive's fast kernel declares that it takes this case (the dispatcher runs
// the reference kernel, which the first column checks, for the others).
bool fast_kernel_takes(const PrimDef& prim, const OpCase& c,
                       const std::vector<AbstractValue>& out_avals) {
  std::vector<AbstractValue> in_avals;
  for (const TestArray& input : c.inputs) in_avals.push_back(input.aval);
  return kernel_for(prim, in_avals, out_avals, c.params, /*reference_only=*/false) ==
         prim.cpu_kernel;
}

TEST_P(FastKernel, MatchesReferenceAndIgnoresThreadCount) {
  const OpRow& row = GetParam();
  const PrimDef& prim = prim_def(row.prim);
  ComputePool serial(1);
  ComputePool three(3);
  int64_t taken = 0;
  for (const OpCase& c : row.cases()) {
    std::vector<AbstractValue> out_avals = out_avals_of(row, c);
    if (!fast_kernel_takes(prim, c, out_avals)) continue;
    ++taken;
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
  // A fast kernel that no case reaches is not checked at all.
  EXPECT_GT(taken, 0) << prim.name << ": no op-table case is one its fast kernel supports";
}

// The dispatcher runs the reference kernel for the calls a fast kernel declines: integer
// contractions (oneDNN's GEMMs are float ones), pooling over other axes than H and W.
TEST(KernelDispatch, DeclinedCallsRunTheReference) {
  const PrimDef& dot = prim_def(prim::dot_general);
  DotGeneralParams dims{.lhs_contracting = {1}, .rhs_contracting = {0}};
  std::vector<AbstractValue> ints{{Shape{2, 3}, DType::i32}, {Shape{3, 4}, DType::i32}};
  std::vector<AbstractValue> int_out{{Shape{2, 4}, DType::i32}};
  EXPECT_EQ(kernel_for(dot, ints, int_out, dims, false), dot.ref_kernel);
  std::vector<AbstractValue> floats{{Shape{2, 3}, DType::f32}, {Shape{3, 4}, DType::f32}};
  std::vector<AbstractValue> float_out{{Shape{2, 4}, DType::f32}};
  EXPECT_EQ(kernel_for(dot, floats, float_out, dims, false), dot.cpu_kernel);
  EXPECT_EQ(kernel_for(dot, floats, float_out, dims, /*reference_only=*/true), dot.ref_kernel);
  const PrimDef& pool = prim_def(prim::reduce_window_max);
  std::vector<AbstractValue> image{{Shape{1, 4, 4, 2}, DType::f32}};
  std::vector<AbstractValue> pooled{{Shape{1, 2, 2, 2}, DType::f32}};
  ReduceWindowParams hw{{1, 2, 2, 1}, {1, 2, 2, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  EXPECT_EQ(kernel_for(pool, image, pooled, hw, false), pool.cpu_kernel);
  ReduceWindowParams over_channels{{1, 2, 2, 2}, {1, 2, 2, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  std::vector<AbstractValue> pooled_channels{{Shape{1, 2, 2, 1}, DType::f32}};
  EXPECT_EQ(kernel_for(pool, image, pooled_channels, over_channels, false), pool.ref_kernel);
  std::vector<AbstractValue> bools{{Shape{1, 4, 4, 2}, DType::bool_}};
  std::vector<AbstractValue> pooled_bools{{Shape{1, 2, 2, 2}, DType::bool_}};
  EXPECT_EQ(kernel_for(pool, bools, pooled_bools, hw, false), pool.ref_kernel);
}

TEST_P(OpTable, EagerDispatchMatchesReference) {
  const OpRow& row = GetParam();
  ComputePool serial(1);
  for (const OpCase& c : row.cases()) {
    std::vector<TestArray> reference = run_reference(row, c, serial);
    std::vector<TestArray> eager = run_eager(row, c);
    ASSERT_EQ(eager.size(), reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      std::string diff =
          compare(eager[i], reference[i], fast_tolerance(row, c, reference[i].aval.dtype));
      EXPECT_TRUE(diff.empty()) << case_name(row, c) << " output " << i << diff;
    }
  }
}

// ----- gradients ------------------------------------------------------------------------

std::vector<OpCase> default_grad_cases(const OpRow& row) {
  std::vector<OpCase> result;
  Rng rng(31);
  for (OpCase c : row.cases()) {
    bool has_f32 = false, other_float = false;
    int64_t elements = 0;
    for (const TestArray& input : c.inputs) {
      has_f32 = has_f32 || input.aval.dtype == DType::f32;
      other_float =
          other_float || (is_floating(input.aval.dtype) && input.aval.dtype != DType::f32);
      elements += input.aval.num_elements();
    }
    if (!has_f32 || other_float || elements > 4096) continue;
    for (TestArray& input : c.inputs) {
      if (input.aval.dtype != DType::f32) continue;
      input.aval.dtype = DType::f64;
      for (double& value : input.values) value = uniform(rng, 0.5, 1.5);
    }
    bool f64_outputs = true;
    for (const AbstractValue& out : out_avals_of(row, c)) {
      f64_outputs = f64_outputs && (!is_floating(out.dtype) || out.dtype == DType::f64);
    }
    if (f64_outputs) result.push_back(std::move(c));
  }
  return result;
}

class Gradient : public ::testing::TestWithParam<OpRow> {};

std::vector<OpRow> differentiable_rows() {
  std::vector<OpRow> rows;
  for (OpRow& row : all_rows()) {
    if (!prim_def(row.prim).has_flag(kNotDifferentiable)) rows.push_back(std::move(row));
  }
  return rows;
}

// Reverse and forward mode, each against central differences along the same direction
// (GradCheckOptions::forward); with second_order, the VJP's own VJP and JVP too.
TEST_P(Gradient, VjpAndJvpMatchCentralFiniteDifferencesInF64) {
  const OpRow& row = GetParam();
  const PrimDef& prim = prim_def(row.prim);
  ASSERT_NE(prim.vjp, nullptr) << prim.name << " is differentiable but has no VJP rule";
  ASSERT_NE(prim.jvp, nullptr) << prim.name << " is differentiable but has no JVP rule";
  std::vector<OpCase> cases = row.grad_cases ? row.grad_cases() : default_grad_cases(row);
  ASSERT_FALSE(cases.empty()) << prim.name << " needs gradient cases (OpRow::grad_cases)";
  for (const OpCase& c : cases) {
    std::vector<Array> operands;
    std::vector<size_t> float_positions;
    std::vector<Array> float_operands;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      std::vector<std::byte> bytes = encode(c.inputs[i]);
      operands.push_back(from_host_bytes(bytes.data(), c.inputs[i].aval, nullptr, CallSite()));
      if (is_floating(c.inputs[i].aval.dtype)) {
        float_positions.push_back(i);
        float_operands.push_back(operands.back());
      }
    }
    detail::FlatFunction fn = [&](std::span<const Array> floats) {
      std::vector<Array> all = operands;
      for (size_t k = 0; k < floats.size(); ++k) all[float_positions[k]] = floats[k];
      return bind(row.prim, all, c.params, CallSite());
    };
    GradCheckOptions options;
    options.order = row.second_order ? 2 : 1;
    // custom_vjp defines reverse mode only; its refusal of forward mode is checked in
    // tests/transforms/jvp_test.cc.
    options.forward = row.prim != prim::custom_vjp_call;
    try {
      detail::check_grads_flat(fn, float_operands, options, CallSite());
    } catch (const Error& error) {
      ADD_FAILURE() << case_name(row, c) << ": " << error.what();
    }
  }
}

// ----- program text ---------------------------------------------------------------------

// The row's first case as a one-equation program (rank-0 operands as literals, so literal
// text of each dtype and special value is covered) prints, parses and prints identically.
class PrintParseRoundTrip : public ::testing::TestWithParam<OpRow> {};

TEST_P(PrintParseRoundTrip, OneEquationProgram) {
  const OpRow& row = GetParam();
  std::vector<OpCase> cases = row.cases();
  ASSERT_FALSE(cases.empty());
  const OpCase& c = cases.front();
  ProgramBuilder builder;
  std::vector<VarId> operands;
  for (const TestArray& input : c.inputs) {
    if (input.aval.shape.rank() == 0) {
      std::vector<std::byte> bytes = encode(input);
      operands.push_back(
          builder.add_constant(from_host_bytes(bytes.data(), input.aval, nullptr, CallSite())));
    } else {
      operands.push_back(builder.add_input(input.aval));
    }
  }
  builder.set_outputs(builder.add_equation(row.prim, operands, c.params));
  std::string text = print_program(builder.program());
  Program parsed = parse_program(text);
  verify(parsed);
  EXPECT_EQ(print_program(parsed), text) << case_name(row, c);
}

INSTANTIATE_TEST_SUITE_P(AllPrimitives, OpTable, ::testing::ValuesIn(all_rows()), row_name);
INSTANTIATE_TEST_SUITE_P(AllFastKernels, FastKernel, ::testing::ValuesIn(rows_with_fast_kernels()),
                         row_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FastKernel);
INSTANTIATE_TEST_SUITE_P(AllDifferentiable, Gradient, ::testing::ValuesIn(differentiable_rows()),
                         row_name);
INSTANTIATE_TEST_SUITE_P(AllPrimitives, PrintParseRoundTrip, ::testing::ValuesIn(all_rows()),
                         row_name);

}  // namespace
}  // namespace kiln::testing
