// The primitive test table. One OpRow per primitive says how to make test cases for it and
// how to compute the expected result in double precision (the oracle). The generic suite
// then checks, for every row (one column each):
//   - the reference kernel against the oracle (op_table.cc),
//   - the fast kernel against the reference on every case it supports, with 1, 3 and all
//     compute threads giving the same bits (op_table.cc),
//   - the eager path (bind + async runtime) against the reference (op_table.cc),
//   - the VJP against central finite differences in f64, and its own VJP where
//     second_order is set (op_table.cc),
//   - one-equation programs printing and parsing back (op_table.cc),
//   - vmap against a loop over examples (op_table_vmap.cc),
//   - jit against eager, bit for bit (op_table_jit.cc),
//   - a sane cost for every case (cost_rules_test.cc);
// and that every primitive has a row and the rules it needs (OpTableCompleteness). The
// sharding column (issue 21) will reuse the same rows.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/compute_pool.h"
#include "prims/registry.h"

namespace kiln::testing {

// An array given by its values in double (each exactly representable in aval.dtype).
struct TestArray {
  AbstractValue aval;
  std::vector<double> values;
};

struct OpCase {
  std::string label;
  std::vector<TestArray> inputs;
  Params params;
};

// |actual - expected| <= atol + rtol * |expected| for floating outputs. Integer and bool
// outputs always compare exactly; NaN must meet NaN and infinities must match exactly.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};
// A few units in the last place of `dtype` (rtol, and as many smallest subnormals in
// atol), plus `atol`.
Tolerance ulp_tolerance(DType dtype, double ulps = 4, double atol = 0);

using CaseGenerator = std::function<std::vector<OpCase>()>;
using Oracle = std::function<std::vector<TestArray>(const OpCase&)>;
using ToleranceRule = std::function<Tolerance(const OpCase&, DType out_dtype)>;

struct OpRow {
  PrimId prim;
  CaseGenerator cases;
  Oracle oracle;
  ToleranceRule ref_tolerance;   // reference kernel vs oracle; default ulp_tolerance(dtype)
  ToleranceRule fast_tolerance;  // fast kernel vs reference; default ulp_tolerance(dtype)
  // Gradient column (differentiable primitives only): cases for the VJP check in f64. By
  // default the row's f32 cases with every float operand turned f64 and moved into
  // [0.5, 1.5] (away from kinks and domain edges).
  CaseGenerator grad_cases;
  bool second_order = false;  // also check the gradient of the gradient
};

// gtest prints a row as its primitive's name, and names each instance of a column by it.
void PrintTo(const OpRow& row, std::ostream* out);
std::string row_name(const ::testing::TestParamInfo<OpRow>& info);

// The tolerance of a row whose kernels and oracle must agree bit for bit.
inline Tolerance exact(const OpCase&, DType) {
  return {0, 0};
}

// Rows, one function per family (rows_<family>.cc).
std::vector<OpRow> elementwise_rows();
std::vector<OpRow> shape_rows();
std::vector<OpRow> index_rows();
std::vector<OpRow> reduce_rows();
std::vector<OpRow> contract_rows();
std::vector<OpRow> window_rows();
std::vector<OpRow> random_rows();
std::vector<OpRow> sort_rows();
std::vector<OpRow> custom_rows();
std::vector<OpRow> remat_rows();
std::vector<OpRow> control_flow_rows();
std::vector<OpRow> all_rows();

// ----- building cases -------------------------------------------------------------------
// Deterministic generator for test values.
using Rng = std::mt19937_64;

// `values` rounded to `dtype` (so the TestArray holds exactly what the kernel sees).
TestArray make_array(DType dtype, Shape shape, std::vector<double> values);
// Random values from `gen` rounded to `dtype`.
TestArray random_array(DType dtype, Shape shape, Rng& rng, const std::function<double(Rng&)>& gen);
double uniform(Rng& rng, double low, double high);

// Floating values that every float kernel must handle: NaN, +-Inf, +-0, a subnormal of the
// dtype, its largest finite value.
std::vector<double> special_values(DType dtype);
// Overwrites the first elements of a float array with special_values (no-op otherwise).
void insert_specials(TestArray& array);

inline constexpr DType kFloatDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
inline constexpr DType kIntDTypes[] = {DType::i32, DType::i64, DType::u8, DType::u32};

// Whether `dtype` also gets the large cases. Large sizes exercise the fast kernels'
// chunking; one float, one 16-bit float and one integer dtype cover their code paths and
// keep the suite quick.
bool wants_large_cases(DType dtype);
// Shapes every elementwise-like op is tried on: scalar, empty, size 1, small odd sizes,
// multi-dimensional shapes, and (wants_large_cases) a large non-divisible size.
std::vector<Shape> standard_shapes(DType dtype);
// The shape that `inputs` broadcast to (rank-equal with size-1 axes, or rank 0), and the
// index into an operand of shape `in` of element `index` of that shape `out`.
Shape broadcast_of(const std::vector<TestArray>& inputs);
int64_t source_index(const Shape& out, const Shape& in, int64_t index);

// Pairs of operand shapes that broadcast (size-1 axes on either side with equal rank, or a
// rank-0 operand).
std::vector<std::pair<Shape, Shape>> broadcast_shape_pairs(DType dtype);

// ----- running kernels ------------------------------------------------------------------
std::vector<AbstractValue> out_avals_of(const OpRow& row, const OpCase& c);
// Runs `kernel` on the case's inputs with `pool`; outputs decoded to TestArrays.
std::vector<TestArray> run_kernel(KernelFn kernel, const OpCase& c,
                                  const std::vector<AbstractValue>& out_avals, ComputePool& pool);
// Runs the case through bind() and the eager runtime.
std::vector<TestArray> run_eager(const OpRow& row, const OpCase& c);

// Empty string when `actual` matches `expected` within `tolerance`; otherwise a
// description of the first few mismatches.
std::string compare(const TestArray& actual, const TestArray& expected, Tolerance tolerance);
// True when the two arrays hold identical bits (for thread-count determinism).
bool same_bits(const TestArray& a, const TestArray& b);

// An exact integer result wrapped to `dtype`'s width, as kiln's modular integer arithmetic
// does (bool: nonzero is 1). Oracles compute integers exactly in __int128, then wrap.
double wrap_to(DType dtype, __int128 value);

// Encode / decode between doubles and a dtype's storage.
std::vector<std::byte> encode(const TestArray& array);
TestArray decode(const AbstractValue& aval, const void* data);
// The test array as a kiln Array on the default device.
Array to_array(const TestArray& input);
TestArray to_test_array(const Array& array);

// For the columns that run a case on several examples (batching, sharding): example b of
// an operand is the case's values rotated by b places, so that examples differ; a case is
// small enough when its operands hold at most 2048 elements in all.
TestArray rotated_example(const TestArray& input, int64_t b);
bool small_enough(const OpCase& c);

}  // namespace kiln::testing
