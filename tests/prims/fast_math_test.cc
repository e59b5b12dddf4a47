// Sweeps the vectorised math kernels (exp, log, tanh, logistic) across their whole input
// ranges against the reference kernels: the op_table's random cases stay in [-3, 3], but
// the Highway versions need patches near overflow, for subnormal inputs and at the
// saturation points, which only a sweep reaches.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "prims/ids/binary.h"
#include "prims/ids/unary.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

TestArray sweep(DType dtype, double low, double high, int count, bool logarithmic) {
  std::vector<double> values;
  for (int i = 0; i < count; ++i) {
    double t = static_cast<double>(i) / (count - 1);
    values.push_back(logarithmic ? std::exp2(low + (high - low) * t) : low + (high - low) * t);
  }
  return make_array(dtype, Shape{static_cast<int64_t>(values.size())}, values);
}

void expect_fast_matches_reference(PrimId prim, const TestArray& input, double ulps) {
  const PrimDef& def = prim_def(prim);
  ASSERT_NE(def.cpu_kernel, nullptr);
  OpCase c{"sweep", {input}, NoParams{}};
  OpRow row{prim, {}, {}, {}, {}};
  ComputePool serial(1);
  auto out_avals = out_avals_of(row, c);
  auto reference = run_kernel(def.ref_kernel, c, out_avals, serial);
  auto fast = run_kernel(def.cpu_kernel, c, out_avals, serial);
  std::string diff = compare(fast[0], reference[0], ulp_tolerance(input.aval.dtype, ulps));
  EXPECT_TRUE(diff.empty()) << def.name << " " << input.aval.to_string() << diff;
}

TEST(FastMath, ExpAcrossOverflowAndSubnormalResults) {
  expect_fast_matches_reference(prim::exp, sweep(DType::f32, -110, 95, 200001, false), 4);
  expect_fast_matches_reference(prim::exp, sweep(DType::f64, -760, 720, 200001, false), 4);
}

TEST(FastMath, LogAcrossSubnormalAndHugeInputs) {
  expect_fast_matches_reference(prim::log, sweep(DType::f32, -149, 127.9, 200001, true), 4);
  expect_fast_matches_reference(prim::log, sweep(DType::f64, -1074, 1023.9, 200001, true), 4);
  expect_fast_matches_reference(prim::log, sweep(DType::f32, -5, 5, 10001, false), 4);
}

TEST(FastMath, TanhAndLogisticAcrossSaturation) {
  for (PrimId prim : {prim::tanh, prim::logistic}) {
    expect_fast_matches_reference(prim, sweep(DType::f32, -120, 120, 200001, false), 4);
    expect_fast_matches_reference(prim, sweep(DType::f64, -800, 800, 200001, false), 4);
    // Small magnitudes, where a relative error shows most.
    expect_fast_matches_reference(prim, sweep(DType::f32, -40, -1, 10001, true), 4);
  }
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// Arrays this large take the streaming-store path (runs of >= 32K elements), whose
// misaligned chunk heads are computed through a padded vector: results must still match
// the reference exactly for exact ops and within ulps for exp.
TEST(FastElementwise, StreamingStoresOnLargeArrays) {
  Rng rng(5);
  TestArray x = random_array(DType::f32, Shape{(1 << 23) + 13}, rng,
                             [](Rng& r) { return uniform(r, -5, 5); });
  TestArray y = random_array(DType::f32, Shape{(1 << 23) + 13}, rng,
                             [](Rng& r) { return uniform(r, -5, 5); });
  ComputePool serial(1);
  auto check = [&](PrimId prim, std::vector<TestArray> inputs, double ulps) {
    const PrimDef& def = prim_def(prim);
    OpCase c{"large", std::move(inputs), NoParams{}};
    OpRow row{prim, {}, {}, {}, {}};
    auto out_avals = out_avals_of(row, c);
    auto reference = run_kernel(def.ref_kernel, c, out_avals, serial);
    auto fast = run_kernel(def.cpu_kernel, c, out_avals, compute_pool());
    std::string diff = compare(fast[0], reference[0], ulp_tolerance(DType::f32, ulps));
    EXPECT_TRUE(diff.empty()) << def.name << diff;
  };
  check(prim::exp, {x}, 4);
  check(prim::add, {x, y}, 0);
  check(prim::mul, {x, make_array(DType::f32, Shape{1}, {3.0})}, 0);
}

}  // namespace
}  // namespace kiln::testing
