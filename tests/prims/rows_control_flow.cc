// op_table rows for the control-flow primitives (scan, cond, while_loop). Each case holds
// sub-programs traced from small lambdas for its dtype; the oracles run the same loops and
// branches in plain double arithmetic. The columns then check the impl rules (reference and
// eager), the VJPs of scan and cond (f64, second order too), the batching rules (including
// a batched cond index and a batched while predicate) and print -> parse -> print of the
// nested programs.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ir/program.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/ids/control_flow.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

template <typename F, typename... Args>
ProgramRef program_of(F f, const Args&... args) {
  return ProgramRef{make_program(f, args...).program};
}

double in_unit(Rng& rng) {
  return uniform(rng, -1, 1);
}

// Tolerances for values that went through a few steps of arithmetic and sin.
Tolerance loop_tolerance(const OpCase&, DType dtype) {
  return dtype == DType::f64 ? Tolerance{1e-13, 1e-14} : Tolerance{2e-5, 2e-6};
}

// ----- scan: consts w, carry c, xs; c' = c * w + x, y = sin(c) * x ----------------------

ProgramRef scan_body(DType dtype, int64_t n) {
  auto body = [](const Array& w, const Array& c, const Array& x) {
    return std::pair{c * w + x, sin(c) * x};
  };
  return program_of(body, zeros({n}, dtype), zeros({n}, dtype), zeros({n}, dtype));
}

std::vector<OpCase> scan_cases_for(std::initializer_list<DType> dtypes) {
  struct Config {
    int64_t length, n;
    bool reverse;
    int64_t unroll;
  };
  std::vector<OpCase> cases;
  Rng rng(51);
  for (DType dtype : dtypes) {
    for (Config c : {Config{3, 2, false, 1}, Config{4, 3, true, 2}, Config{5, 1, false, 3},
                     Config{0, 2, false, 1}, Config{1, 1, true, 1}, Config{2, 0, false, 1}}) {
      cases.push_back({fmt::format("{} length={} n={} reverse={} unroll={}", dtype_name(dtype),
                                   c.length, c.n, c.reverse, c.unroll),
                       {random_array(dtype, Shape{c.n}, rng, in_unit),
                        random_array(dtype, Shape{c.n}, rng, in_unit),
                        random_array(dtype, Shape{c.length, c.n}, rng, in_unit)},
                       ScanParams{scan_body(dtype, c.n), c.length, 1, 1, c.reverse, c.unroll}});
    }
  }
  return cases;
}

std::vector<TestArray> scan_oracle(const OpCase& c) {
  const auto& p = std::get<ScanParams>(c.params);
  const TestArray& w = c.inputs[0];
  TestArray carry = c.inputs[1];
  const TestArray& xs = c.inputs[2];
  TestArray ys = xs;
  auto n = static_cast<size_t>(w.aval.shape.num_elements());
  for (int64_t k = 0; k < p.length; ++k) {
    auto t = static_cast<size_t>(p.reverse ? p.length - 1 - k : k);
    for (size_t i = 0; i < n; ++i) {
      double x = xs.values[t * n + i], old = carry.values[i];
      ys.values[t * n + i] = std::sin(old) * x;
      carry.values[i] = old * w.values[i] + x;
    }
  }
  return {carry, ys};
}

// ----- cond: index, x, y; branches x * y, sin(x) + y, x - y -------------------------------

std::vector<ProgramRef> cond_branches(DType dtype, const Shape& shape) {
  Array x = zeros(shape, dtype), y = zeros(shape, dtype);
  return {program_of([](const Array& a, const Array& b) { return a * b; }, x, y),
          program_of([](const Array& a, const Array& b) { return sin(a) + b; }, x, y),
          program_of([](const Array& a, const Array& b) { return a - b; }, x, y)};
}

std::vector<OpCase> cond_cases_for(std::initializer_list<DType> dtypes) {
  std::vector<OpCase> cases;
  Rng rng(52);
  for (DType dtype : dtypes) {
    for (const Shape& shape : {Shape{3}, Shape{}, Shape{0}, Shape{2, 3}}) {
      for (int index : {0, 1, 2, -1, 7}) {
        cases.push_back(
            {fmt::format("{} {} index={}", dtype_name(dtype), shape.to_string(), index),
             {make_array(DType::i32, Shape{}, {static_cast<double>(index)}),
              random_array(dtype, shape, rng, in_unit), random_array(dtype, shape, rng, in_unit)},
             CondParams{cond_branches(dtype, shape)}});
      }
    }
  }
  return cases;
}

std::vector<TestArray> cond_oracle(const OpCase& c) {
  int64_t index = std::clamp<int64_t>(static_cast<int64_t>(c.inputs[0].values[0]), 0, 2);
  const TestArray& x = c.inputs[1];
  const TestArray& y = c.inputs[2];
  TestArray out = x;
  for (size_t i = 0; i < out.values.size(); ++i) {
    double a = x.values[i], b = y.values[i];
    out.values[i] = index == 0 ? a * b : index == 1 ? std::sin(a) + b : a - b;
  }
  return {out};
}

// ----- while_loop: cond const limit, body const w, carry (i, x) -------------------------
// while i < limit: (i, x) = (i + 1, x * w + 1)

std::vector<OpCase> while_cases() {
  std::vector<OpCase> cases;
  Rng rng(53);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (int64_t n : {3, 1, 0}) {
      Array i = scalar(0, DType::i32), x = zeros({n}, dtype);
      ProgramRef cond =
          program_of([](const Array& limit, const Array& i, const Array&) { return i < limit; },
                     scalar(0, DType::i32), i, x);
      ProgramRef body = program_of(
          [](const Array& w, const Array& i, const Array& x) {
            return std::pair{i + 1, x * w + 1.0};
          },
          zeros({n}, dtype), i, x);
      for (int limit : {0, 1, 4}) {
        cases.push_back(
            {fmt::format("{} n={} limit={}", dtype_name(dtype), n, limit),
             {make_array(DType::i32, Shape{}, {static_cast<double>(limit)}),
              random_array(dtype, Shape{n}, rng, in_unit), make_array(DType::i32, Shape{}, {0}),
              random_array(dtype, Shape{n}, rng, in_unit)},
             WhileParams{cond, body, 1, 1}});
      }
    }
  }
  return cases;
}

std::vector<TestArray> while_oracle(const OpCase& c) {
  auto limit = static_cast<int64_t>(c.inputs[0].values[0]);
  const TestArray& w = c.inputs[1];
  TestArray i = c.inputs[2];
  TestArray x = c.inputs[3];
  while (static_cast<int64_t>(i.values[0]) < limit) {
    i.values[0] += 1;
    for (size_t k = 0; k < x.values.size(); ++k) x.values[k] = x.values[k] * w.values[k] + 1;
  }
  return {i, x};
}

}  // namespace

std::vector<OpRow> control_flow_rows() {
  OpRow scan_row{.prim = prim::scan,
                 .cases =
                     [] {
                       return scan_cases_for({DType::f32, DType::f64});
                     },
                 .oracle = scan_oracle};
  scan_row.ref_tolerance = loop_tolerance;
  scan_row.fast_tolerance = loop_tolerance;
  scan_row.grad_cases = [] { return scan_cases_for({DType::f64}); };
  scan_row.second_order = true;

  OpRow cond_row{.prim = prim::cond,
                 .cases =
                     [] {
                       return cond_cases_for({DType::f32, DType::f64});
                     },
                 .oracle = cond_oracle};
  cond_row.ref_tolerance = loop_tolerance;
  cond_row.grad_cases = [] { return cond_cases_for({DType::f64}); };
  cond_row.second_order = true;

  OpRow while_row{.prim = prim::while_loop, .cases = while_cases, .oracle = while_oracle};
  while_row.ref_tolerance = loop_tolerance;
  return {scan_row, cond_row, while_row};
}

}  // namespace kiln::testing
