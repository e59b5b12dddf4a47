// op_table row for custom_vjp_call, through one custom function registered here:
// f(x, y) = x * y + sin(x), saving (x, y) for a hand-written backward rule. The primitive's
// results are f and then the residuals, so the oracle lists all three. The gradient column
// differentiates every result, which checks both the user's rule (for f) and the residuals'
// own gradient path; its second-order check covers a gradient of a gradient.
#include <cmath>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/transforms.h"
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

}  // namespace

std::vector<OpRow> custom_rows() {
  OpRow row{.prim = prim::custom_vjp_call, .cases = custom_cases, .oracle = custom_oracle};
  // Two roundings of positive terms and one of sin: a few ulps.
  row.ref_tolerance = [](const OpCase&, DType dtype) { return ulp_tolerance(dtype, 8); };
  row.second_order = true;
  return {row};
}

}  // namespace kiln::testing
