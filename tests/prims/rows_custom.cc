// op_table rows for the primitives defined by ops. custom_vjp_call, through one custom
// function registered here: f(x, y) = x * y + sin(x), saving (x, y) for a hand-written
// backward rule. The primitive's results are f and then the residuals, so the oracle lists
// all three. The gradient column differentiates every result, which checks both the user's
// rule (for f) and the residuals' own gradient path; its second-order check covers a
// gradient of a gradient. pallas_call, through a kernel registered per case: 2 x + y in
// blocks of two rows, the last one ragged (not differentiable: no gradient column).
#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "kiln/transforms.h"
#include "pallas/kernel_call.h"
#include "prims/ids/custom.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

int64_t mul_sin_id() {
  static const int64_t id = detail::register_custom_function(
      "mul_sin",
      [](std::span<const Array> in) {
        return detail::CustomResult{{in[0] * in[1] + sin(in[0])}, {in[0], in[1]}};
      },
      [](std::span<const Array> saved, std::span<const Array> cts) {
        const Array& x = saved[0];
        const Array& y = saved[1];
        return std::vector<Array>{cts[0] * (y + cos(x)), cts[0] * x};
      });
  return id;
}

std::vector<OpCase> custom_cases() {
  std::vector<OpCase> cases;
  Rng rng(41);
  auto positive = [](Rng& r) { return uniform(r, 0.5, 1.5); };
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{1}, Shape{7}, Shape{5, 3}}) {
      cases.push_back(
          {fmt::format("{} {}", dtype_name(dtype), shape.to_string()),
           {random_array(dtype, shape, rng, positive), random_array(dtype, shape, rng, positive)},
           CustomVjpParams{"mul_sin", mul_sin_id()}});
    }
  }
  return cases;
}

std::vector<TestArray> custom_oracle(const OpCase& c) {
  TestArray out = c.inputs[0];
  for (size_t i = 0; i < out.values.size(); ++i) {
    double x = c.inputs[0].values[i];
    out.values[i] = x * c.inputs[1].values[i] + std::sin(x);
  }
  return {out, c.inputs[0], c.inputs[1]};
}

// The kernel 2 x + y over blocks of two rows of x and y [rows, cols].
KernelCallParams twice_plus_kernel(const AbstractValue& type) {
  const int64_t rows = type.shape[0];
  pallas::BlockSpec pairs({2, -1}, [](const pallas::Index& g) { return pallas::Index{g[0], 0}; });
  pallas::detail::RegisteredKernel kernel{
      .body =
          [](const pallas::Kernel& k) { k.out(0).store(k.in(0).load() * 2.0 + k.in(1).load()); },
      .in_types = {type, type},
      .out_types = {type},
      .grid = {std::max<int64_t>(1, pallas::cdiv(rows, 2))},
      .in_specs = {pairs, pairs},
      .out_specs = {pairs},
      .options = {.name = "twice_plus", .semantics = {pallas::GridAxis::kParallel}},
      .hidden_axes = 0};
  pallas::detail::check_kernel(kernel, CallSite());
  return KernelCallParams{"twice_plus",
                          pallas::detail::register_kernel(std::move(kernel), CallSite())};
}

std::vector<OpCase> pallas_cases() {
  std::vector<OpCase> cases;
  Rng rng(43);
  auto values = [](Rng& r) { return uniform(r, -2, 2); };
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    for (const Shape& shape : {Shape{0, 3}, Shape{1, 1}, Shape{5, 3}, Shape{4, 7}}) {
      cases.push_back(
          {fmt::format("{} {}", dtype_name(dtype), shape.to_string()),
           {random_array(dtype, shape, rng, values), random_array(dtype, shape, rng, values)},
           twice_plus_kernel(AbstractValue(shape, dtype))});
    }
  }
  // NaN, infinities, zeros of both signs and a subnormal pass through the blocks.
  OpCase specials{"f32 [7,2] specials",
                  {random_array(DType::f32, Shape{7, 2}, rng, values),
                   random_array(DType::f32, Shape{7, 2}, rng, values)},
                  twice_plus_kernel(AbstractValue(Shape{7, 2}, DType::f32))};
  insert_specials(specials.inputs[1]);
  cases.push_back(std::move(specials));
  return cases;
}

std::vector<TestArray> pallas_oracle(const OpCase& c) {
  TestArray out = c.inputs[0];
  for (size_t i = 0; i < out.values.size(); ++i) {
    out.values[i] = 2 * c.inputs[0].values[i] + c.inputs[1].values[i];
  }
  return {out};
}

}  // namespace

std::vector<OpRow> custom_rows() {
  OpRow row{.prim = prim::custom_vjp_call, .cases = custom_cases, .oracle = custom_oracle};
  // Two roundings of positive terms and one of sin: a few ulps.
  row.ref_tolerance = [](const OpCase&, DType dtype) { return ulp_tolerance(dtype, 8); };
  row.second_order = true;
  OpRow kernel{.prim = prim::pallas_call, .cases = pallas_cases, .oracle = pallas_oracle};
  // 2 x is exact; one rounding of the sum.
  kernel.ref_tolerance = [](const OpCase&, DType dtype) { return ulp_tolerance(dtype, 1); };
  return {row, kernel};
}

}  // namespace kiln::testing
